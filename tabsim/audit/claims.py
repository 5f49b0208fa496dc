"""What an audit's notes state about a row's numbers, each statement bounded by its interval.

A note states the sign of a term, or that a share lies above 1, only when the interval excludes the
boundary (0 for a sign, 1 for "above 1"); otherwise it says that the interval spans the boundary and
quotes it. A ratio is always quoted with its interval. Each note is rendered from :class:`Claim`
records, so what it says can be checked against the row it describes.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Mapping, Optional

# each identified share of d_total and the term it divides
SHARE_TERMS = {"null_share": "d_null", "sharpening_share": "d_elicit", "rd_share": "d_rd"}


def number(x: float, digits: int = 1, *, percent: bool = False) -> str:
    """``x`` as a note prints it: ``digits`` decimals (a percent of a ratio with ``percent``), ``inf``, ``?``."""
    if x is None or math.isnan(x):
        return "?"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{100 * x:.0f}%" if percent else f"{x:.{digits}f}"


@dataclasses.dataclass(frozen=True)
class Claim:
    """One quantity a note speaks of, with the interval the note must stay within.

    Attributes:
      quantity: the term or ratio (``null_share``, ``d_null``, ``format gain / true gain``).
      estimate, low, high: its point estimate and interval (the row's own).
      boundary: what the note compares it with (0 for a sign, 1 for "above 1"); None: quoted only.
      digits: decimals the note prints; percent: printed as a percentage (a ratio).
    """

    quantity: str
    estimate: float
    low: float
    high: float
    boundary: Optional[float] = None
    digits: int = 2
    percent: bool = False

    @property
    def side(self) -> str:
        """``below`` or ``above`` the boundary when the whole interval is; else ``spans``."""
        if self.boundary is not None and self.high < self.boundary:
            return "below"
        if self.boundary is not None and self.low > self.boundary:
            return "above"
        return "spans"

    def quoted(self, *, signed: bool = False) -> str:
        """``estimate [low, high]`` as the note prints it (``+`` before a positive estimate with ``signed``)."""
        est = number(self.estimate, self.digits, percent=self.percent)
        if signed and self.estimate > 0:
            est = "+" + est
        lo, hi = (number(x, self.digits, percent=self.percent) for x in (self.low, self.high))
        return f"{est} [{lo}, {hi}]"


@dataclasses.dataclass(frozen=True)
class Note:
    """A sentence of a note and the claims it rests on."""

    text: str
    claims: tuple


def term_claim(t: Mapping, name: str, boundary: Optional[float] = 0.0, digits: int = 1) -> Claim:
    """The claim on term ``name`` of one row's term record ``t`` (``estimate``, ``low``, ``high``)."""
    return Claim(name, float(t["estimate"]), float(t["low"]), float(t["high"]), boundary, digits)


def share_notes(by: Mapping[str, Mapping]) -> list:
    """A :class:`Note` for each identified share whose estimate lies outside [0, 1].

    A share below 0 says that its term cost accuracy only when both the share's interval and the
    term's lie below 0; a share above 1 says that its term alone exceeds the total gain only when its
    interval lies above 1. Otherwise the note says that the interval spans the boundary.

    Args:
      by: term name -> the row's term record (``identified``, ``estimate``, ``low``, ``high``).
    """
    out = []
    for s, d in SHARE_TERMS.items():
        t = by[s]
        v = float(t["estimate"])
        if t["identified"] != "point" or not math.isfinite(v) or 0.0 <= v <= 1.0:
            continue
        share = term_claim(t, s, boundary=0.0 if v < 0 else 1.0, digits=2)
        term = term_claim(by[d], d)
        if v < 0 and share.side == "below" and term.side == "below":
            text = (f"{s} {share.quoted()} is below 0: {d} {term.quoted()} is negative (that step of the partition "
                    "cost accuracy), so the other shares add up to more than 1.")
        elif v < 0:
            which = "its interval" if share.side != "below" else f"{d}'s interval"
            text = (f"{s} {share.quoted()} is below 0 at its estimate only: {which} spans 0, so the sign of {d} "
                    f"({term.quoted()}) is not established.")
        elif share.side == "above":
            text = (f"{s} {share.quoted()} is above 1: {d} alone is larger than the total gain, which the other "
                    "terms' net loss brings back down.")
        else:
            text = (f"{s} {share.quoted()} is above 1 at its estimate only: its interval spans 1, so whether {d} "
                    "alone is larger than the total gain is not established.")
        out.append(Note(text, (share, term) if v < 0 else (share,)))
    return out


def range_text(t: Mapping) -> str:
    """A bounded term's bound and the range of its point values, each named for what made it.

    ``sim_low``/``sim_high`` range over the simulated candidates alone (the simulated range);
    ``set_low``/``set_high`` over every completion, which includes RANDOM filled over the range of
    ``d_null`` that published runs measured where that widened the bound.
    """
    def rng(lo, hi):
        return f"[{number(lo)}, {number(hi)}]"

    both = (float(t["set_low"]), float(t["set_high"]))
    sim = tuple(float(x) if x is not None else math.nan for x in (t.get("sim_low"), t.get("sim_high")))
    sim = both if any(math.isnan(x) for x in sim) else sim  # an older result: no separate simulated range
    text = f"{t['term']} in {rng(t['low'], t['high'])} (simulated range {rng(*sim)}"
    if not all(_same(a, b) for a, b in zip(sim, both)):
        text += f"; {rng(*both)} with RANDOM also over the measured d_null range"
    return text + ")"


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b
