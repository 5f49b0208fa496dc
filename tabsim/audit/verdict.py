"""The audit's verdict: which of the three terms holds most of the gain, or MIXED, or INCONCLUSIVE.

The partition ``d_total = d_null + d_elicit + d_rd`` gives three shares of the total gain that sum
to 1: ``null_share`` (what a random reward gives: random-reward or structural gains such as
clipping bias or format learning), ``sharpening_share`` (self-consistency sharpening) and ``rd_share``
(the reward-design signal). With threshold ``t`` (0.5 by default: a share above one half is larger
than the other two together) and each share's interval:

* a term *dominates* when its share's interval lies above ``t``; when exactly one does, the
  verdict names it: RANDOM_REWARD_DOMINATED, ELICITATION_DOMINATED or REWARD_DESIGN_DOMINATED;
* two shares above ``t`` (possible only when the third term is negative): MIXED;
* no share above ``t`` but one straddles it (or a share is unbounded because ``d_total`` is not
  distinguishable from 0): INCONCLUSIVE;
* every share below ``t``: MIXED.

The reference study's rule (:func:`tabsim.stats.share_verdict`) counts ``d_null`` inside its
"elicitation share"; audits show it beside this verdict as ``reference_verdict``.
"""
from __future__ import annotations

import dataclasses
import math

from tabsim.stats.partition_terms import canonical
from tabsim.stats.verdict import ELICITATION_DOMINATED, INCONCLUSIVE, MIXED, REWARD_DESIGN_DOMINATED

RANDOM_REWARD_DOMINATED = "RANDOM_REWARD_DOMINATED"
TERM_VERDICTS = {"null_share": RANDOM_REWARD_DOMINATED, "sharpening_share": ELICITATION_DOMINATED,
                 "rd_share": REWARD_DESIGN_DOMINATED}
SHARE_NAMES = {"null_share": "null (d_null)", "sharpening_share": "elicitation (d_elicit)",
               "rd_share": "reward-design (d_rd)"}
VERDICTS = (RANDOM_REWARD_DOMINATED, ELICITATION_DOMINATED, REWARD_DESIGN_DOMINATED, MIXED, INCONCLUSIVE)
RULES = ("terms", "reference")


@dataclasses.dataclass(frozen=True)
class TermVerdict:
    """Verdict of the three-term rule: on the intervals, on the point estimates, and why."""

    verdict: str
    point_verdict: str
    reason: str


def _fmt(lo: float, hi: float) -> str:
    return f"[{lo:.2f}, {hi:.2f}]"


def _point(points: dict, t: float) -> str:
    if not all(math.isfinite(p) for p in points.values()):
        return ""
    above = [k for k, p in points.items() if p > t]
    return TERM_VERDICTS[above[0]] if len(above) == 1 else MIXED


def term_verdict(shares: dict, *, threshold: float = 0.5) -> TermVerdict:
    """Verdict on the three shares.

    Args:
      shares: ``{"null_share": (point, low, high), "sharpening_share": ..., "rd_share": ...}``; the point
        may be NaN (bounded terms), the bounds may be infinite. The old name ``elicit_share`` is taken, with
        a DeprecationWarning.
      threshold: share threshold ``t`` in (0, 1).

    Returns:
      :class:`TermVerdict`.
    """
    t = float(threshold)
    shares = {canonical(k): v for k, v in shares.items()}  # elicit_share, the sharpening share's old name
    points = {k: float(v[0]) for k, v in shares.items()}
    lows = {k: float(v[1]) for k, v in shares.items()}
    highs = {k: float(v[2]) for k, v in shares.items()}
    point = _point(points, t)
    if any(math.isnan(lows[k]) or math.isnan(highs[k]) for k in shares):
        return TermVerdict(INCONCLUSIVE, point, "a share is undefined (d_total is 0)")
    if any(math.isinf(lows[k]) and math.isinf(highs[k]) for k in shares):
        return TermVerdict(INCONCLUSIVE, point, "d_total is not distinguishable from 0, so no share is bounded")
    above = [k for k in shares if lows[k] > t]
    straddle = [k for k in shares if lows[k] <= t < highs[k]]
    iv = "; ".join(f"{SHARE_NAMES[k]} share {_fmt(lows[k], highs[k])}" for k in shares)
    if len(above) == 1:
        k = above[0]
        extra = (f" ({', '.join(SHARE_NAMES[s] for s in straddle)} could also exceed {t:g}, offset by a negative "
                 "third term)" if straddle else "")
        return TermVerdict(TERM_VERDICTS[k], point, f"the {SHARE_NAMES[k]} share lies above {t:g}{extra}; {iv}")
    if len(above) > 1:
        return TermVerdict(MIXED, point, f"{' and '.join(SHARE_NAMES[k] for k in above)} shares each exceed {t:g}, "
                                         f"offset by a negative third term; {iv}")
    if straddle:
        return TermVerdict(INCONCLUSIVE, point, f"{', '.join(SHARE_NAMES[k] for k in straddle)} share interval "
                                                f"straddles {t:g}; {iv}")
    return TermVerdict(MIXED, point, f"no share exceeds {t:g}; {iv}")
