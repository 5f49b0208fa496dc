"""How papers write their numbers, read at the edge: signs, dashes, percent signs, scales, headers.

A published table is copied by hand or from a PDF, so its cells arrive in the paper's notation:
a Unicode minus (``−4.9``) or an en dash (``–4.9``) for a negative gain, ``-`` or ``—`` for a cell the
paper leaves empty, ``49.4%``, and column headers such as ``base (pass@1)``. This module turns one
cell into a number (or "missing"), says whether it was written as a signed gain, how many decimals
it carries (for the rounding checks) and whether it had a percent sign. Nothing here knows about
arms or entries; :mod:`tabsim.audit.entry` uses it for every value it reads.
"""
from __future__ import annotations

import dataclasses
import math
import re
from typing import Optional

# Characters papers use for a minus sign: ASCII hyphen-minus, Unicode minus, en dash, figure dash,
# small and full-width hyphen-minus.
MINUS_SIGNS = "-\u2212\u2013\u2012\ufe63\uff0d"
# A cell holding only one of these is an arm the paper does not report.
MISSING_MARKS = ("", "-", "\u2212", "\u2013", "\u2014", "\u2012", "n/a", "na", "nan", "--", "\u2014\u2014", "/")
SCALES = ("percent", "fraction")
# ASCII digits only: Python's \d and float() also take full-width (U+FF10-FF19) and Arabic-Indic
# (U+0660-0669) digits, which a table copied from a PDF may carry without anyone meaning that number.
# The sign is read before the digits, so a second one (``++28.8``, ``+-4.9``) is no number.
_NUMBER = re.compile(r"^([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$")
SIGNS = MINUS_SIGNS + "+\uff0b\ufe62"
# A metric named in a header beside the arm: "true (pass@1)", "base pass@1", "pass@1_majority".
_METRIC = re.compile(r"(pass|avg|mean|maj)@(\d+)", re.IGNORECASE)
_SEPARATORS = " _-()[],:/"


@dataclasses.dataclass(frozen=True)
class Cell:
    """One value as the paper wrote it.

    Attributes:
      value: the number (None when the cell is missing or could not be read).
      missing: the cell is empty or a dash: the paper does not report it.
      signed: written with an explicit sign (``+21.4``, ``−4.9``): a gain over the base.
      percent: written with a trailing ``%``.
      decimals: digits after the decimal point as written (the rounding of the reported value).
      error: why the cell could not be read (None when it could).
    """

    value: Optional[float]
    missing: bool = False
    signed: bool = False
    percent: bool = False
    decimals: int = 0
    error: Optional[str] = None


def _decimals(text: str) -> int:
    mant = text.lower().split("e")[0]
    return len(mant.split(".")[1]) if "." in mant else 0


def read_cell(raw) -> Cell:
    """Read one cell: a number, or a string in a paper's notation.

    Accepted: ``49.4``, ``+21.4``, ``−4.9`` / ``–4.9`` (Unicode minus, en dash), ``49.4%``, and for a
    missing value an empty cell, ``-``, ``—``, ``–``, ``n/a``. Digits are ASCII ``0-9`` only. A number
    that carries its written text (``.text``, from :func:`tabsim.files.safeload.load_yaml`'s
    ``"written"`` schema) is read from that text, so its sign is kept.

    Returns:
      :class:`Cell`; ``error`` says what is allowed when the cell is not a number.
    """
    if isinstance(raw, bool) or raw is None:
        return Cell(None, missing=raw is None, error=None if raw is None else f"expected a number, got {raw!r}")
    written = getattr(raw, "text", None)
    if isinstance(raw, (int, float)) and isinstance(written, str):
        # a YAML number with its text as written (tabsim.files.safeload's "written" schema): read the text,
        # so that an unquoted +58.8 is a signed gain like '+58.8'
        return read_cell(written)
    if isinstance(raw, (int, float)):
        v = float(raw)
        if not math.isfinite(v):
            return Cell(None, error=f"must be finite, got {raw!r}")
        return Cell(v, decimals=0 if isinstance(raw, int) else _decimals(repr(v)))
    if not isinstance(raw, str):
        return Cell(None, error=f"expected a number, got {raw!r}")
    s = raw.strip().replace("\u00a0", "").replace(" ", "")
    if s.lower() in MISSING_MARKS:
        return Cell(None, missing=True)
    percent = s.endswith("%")
    if percent:
        s = s[:-1]
    sign = 1.0
    signed = False
    if s[:1] and s[0] in MINUS_SIGNS:
        sign, signed, s = -1.0, True, s[1:]
    elif s[:1] == "+":
        signed, s = True, s[1:]
    if not _NUMBER.match(s):
        if s[:1] and s[0] in SIGNS:
            return Cell(None, error=(f"{raw!r} carries two signs; write one sign before the digits (+28.8 for a "
                                     "gain, -4.9 for a loss)"))
        if any(ch.isdigit() and not "0" <= ch <= "9" for ch in s):
            return Cell(None, error=(f"{raw!r} holds digits that are not ASCII digits 0-9 (full-width or another "
                                     "script's digits, often from a PDF); write the number with ASCII digits"))
        return Cell(None, error=(f"expected a number, got {raw!r}; allowed: 49.4, +21.4, -4.9 (also written with "
                                 "a Unicode minus or an en dash), 49.4%, and -, \u2014 or an empty cell for a "
                                 "missing value"))
    v = sign * float(s)
    if not math.isfinite(v):
        return Cell(None, error=f"must be finite, got {raw!r}")
    return Cell(v, signed=signed, percent=percent, decimals=_decimals(s))


def header_arm(header: str) -> tuple[str, Optional[str]]:
    """Split a column header into its arm name and the metric written beside it.

    ``"true (pass@1)"`` -> ``("true", "pass@1")``; ``"base"`` -> ``("base", None)``. A header that is
    only a metric (``"pass@1"``) stays as it is.
    """
    h = header.strip()
    m = _METRIC.search(h)
    if not m:
        return h, None
    rest = (h[:m.start()] + " " + h[m.end():]).strip(_SEPARATORS).strip()
    rest = re.sub(r"[ ]+", " ", rest)
    if not rest:
        return h, None
    return rest, m.group(0).lower()


def rounding(cell: Cell) -> float:
    """Half a unit of the last written decimal: how far the exact score may lie from the cell."""
    return 0.5 * 10.0 ** (-cell.decimals)


def check_scale(value, where: str) -> tuple[Optional[str], Optional[str]]:
    """Validate a declared ``scale`` (``percent`` or ``fraction``); ``(scale, error)``."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None, None
    s = str(value).strip().lower()
    if s in ("%", "percentage"):
        s = "percent"
    if s not in SCALES:
        return None, f"{where}: scale: {value!r} is not allowed; allowed: {', '.join(SCALES)}"
    return s, None


def infer_scale(values: list, percent_signs: bool) -> tuple[Optional[str], str]:
    """The scale of a table whose scale is not declared, when the numbers leave no doubt.

    Args:
      values: every absolute accuracy of the table as written (bases, absolute arms).
      percent_signs: some cell was written with ``%``.

    Returns:
      ``(scale, why)``: ``"percent"`` when a value exceeds 1 or a cell carries ``%``; None when every
      value lies in [0, 1], which fractions and small percentages both explain.
    """
    if percent_signs:
        return "percent", "a cell is written with %"
    if any(v > 1.0 for v in values):
        return "percent", "a value exceeds 1"
    if not values:
        return "percent", "no absolute value"
    return None, "every accuracy lies in [0, 1]"
