"""Readable names of a factorial model's columns: patsy's ``C(A, Sum)[S.x]:C(B, Sum)[S.y]`` becomes
``AB`` for two-level factors and ``A[x]:B[y]`` pieces for factors with more levels."""
from __future__ import annotations

import re
from typing import Optional

import numpy as np

FACTOR_CODE = re.compile(r"^\s*C\(\s*(?:Q\(\s*(['\"])(?P<q>.+?)\1\s*\)|(?P<name>[A-Za-z_][A-Za-z0-9_.]*))")


def quote(name: str) -> str:
    """A column name as patsy reads it: bare when an identifier, ``Q('name')`` otherwise."""
    return name if name.isidentifier() else f"Q({name!r})"


def native(x):
    """A NumPy scalar as the Python value it holds; anything else unchanged."""
    return x.item() if isinstance(x, np.generic) else x


def variable_of(code: str) -> Optional[str]:
    """The column named by one factor piece of a model term (``C(A, Sum)``, ``Q('a b')`` or ``A``)."""
    m = FACTOR_CODE.match(code)
    if m:
        return m.group("q") or m.group("name")
    code = code.strip()
    q = re.fullmatch(r"Q\(\s*(['\"])(.+?)\1\s*\)", code)
    return q.group(2) if q else code


def split_column(name: str, codes: list[str]) -> Optional[list[Optional[str]]]:
    """Level label of each factor piece of a design column name, or None if it cannot be parsed."""
    pos, out = 0, []
    for i, code in enumerate(codes):
        if not name.startswith(code, pos):
            return None
        pos += len(code)
        if pos < len(name) and name[pos] == "[":
            end = len(name) - 1 if i == len(codes) - 1 else name.find("]:" + codes[i + 1], pos)
            if end < 0 or name[end] != "]":
                return None
            label = name[pos + 1:end]
            out.append(label[2:] if label[:2] in ("S.", "T.") else label)
            pos = end + 1
        else:
            out.append(None)
        if i < len(codes) - 1:
            if name[pos:pos + 1] != ":":
                return None
            pos += 1
    return out if pos == len(name) else None


def readable_term(column: str, codes: list[str], letters: dict, n_levels: dict) -> str:
    """``"intercept"``, ``"A"``, ``"AB"`` or ``"A[level]:B"`` for a model column; the column itself if unparsed."""
    if not codes:
        return "intercept"
    labels = split_column(column, codes)
    if labels is None:
        return column
    pieces = []
    for code, label in zip(codes, labels):
        var = variable_of(code)
        if var not in letters:
            pieces.append(code if label is None else f"{code}[{label}]")
        elif n_levels.get(var) == 2 or label is None:
            pieces.append(letters[var])
        else:
            pieces.append(f"{letters[var]}[{label}]")
    if all(p in letters.values() for p in pieces):
        return "".join(pieces)
    return ":".join(pieces)
