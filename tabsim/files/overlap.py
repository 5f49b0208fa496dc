"""An output apart from every input: the one check that every command makes before it writes ``--out``.

A command publishes ``--out`` whole, replacing it with ``--overwrite``; an ``--out`` that is, holds or
lies inside something the command reads would delete that input, or change a published folder that
``tabsim verify`` then reports as altered. Paths are compared with their links resolved, so a link
to an input is the input.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable


class OverlapError(ValueError):
    """``--out`` is, holds or lies inside an input of the command (the message names both and the option)."""


def real(path: str | Path) -> Path:
    """``path`` absolute, with ``~`` expanded and every link along it resolved (also when it does not exist)."""
    return Path(os.path.realpath(Path(path).expanduser()))


def relation(out: str | Path, path: str | Path) -> str | None:
    """How ``out`` sits against ``path``: ``"is"``, ``"lies inside"``, ``"holds"``, or None when apart."""
    o, p = real(out), real(path)
    if o == p:
        return "is"
    if p in o.parents:
        return "lies inside"
    if o in p.parents:
        return "holds"
    return None


def check_apart(out: str | Path, reads: Iterable[tuple[str, str | Path | None]], *, option: str = "--out") -> None:
    """Refuse an ``out`` that overlaps any input of ``reads``: pairs of what it is (``"run it reads"``) and its
    path (None: no such input).

    Raises:
      OverlapError: one line naming ``option``, the input and how they overlap.
    """
    for what, path in reads:
        if path is None:
            continue
        how = relation(out, path)
        if how is None:
            continue
        harm = {"is": "publishing would replace it",
                "holds": "publishing would replace the folder that holds it",
                "lies inside": "writing there changes a folder it reads"}[how]
        raise OverlapError(f"{option} {out}: {how} {path}, the {what} ({harm}, with --overwrite or not); "
                           f"choose an {option} apart from every input")


__all__ = ["OverlapError", "real", "relation", "check_apart"]
