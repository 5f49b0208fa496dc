"""Verdict on what dominates the gain: elicitation, reward design, or a mix.

The reference study's rule (docs/science.md) on the shares of ``d_total``: elicitation share > 0.60 -> ELICITATION_DOMINATED;
else rd share > 0.60 -> REWARD_DESIGN_DOMINATED; else MIXED. With intervals the same tree is
walked on the bounds, and a deciding share whose interval straddles the threshold gives
INCONCLUSIVE. Plain floats in, so published tables can be audited without a DataFrame.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Optional, Sequence

import pandas as pd

from tabsim.stats import checks as v

ELICITATION_DOMINATED = "ELICITATION_DOMINATED"
REWARD_DESIGN_DOMINATED = "REWARD_DESIGN_DOMINATED"
MIXED = "MIXED"
INCONCLUSIVE = "INCONCLUSIVE"
VERDICTS = (ELICITATION_DOMINATED, REWARD_DESIGN_DOMINATED, MIXED, INCONCLUSIVE)


@dataclasses.dataclass(frozen=True)
class ShareVerdict:
    """Interval and point-estimate verdicts on the shares of the total gain.

    Attributes:
      verdict: rule applied to the intervals (the point rule when no interval is given).
      point_verdict: the reference study's rule on the point estimates.
      deciding_share: ``"elicitation"`` or ``"rd"``, the share whose comparison fixed the verdict.
      elicitation_share, rd_share: point estimates.
      elicitation_ci, rd_ci: the intervals used (degenerate ``(x, x)`` when none was given).
      threshold: the share threshold.
      reason: one sentence saying why.
    """

    verdict: str
    point_verdict: str
    deciding_share: str
    elicitation_share: float
    rd_share: float
    elicitation_ci: tuple
    rd_ci: tuple
    threshold: float
    reason: str


def _share(value, name: str) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number (a share of d_total, any real value), got {value!r}")
    if math.isnan(out):
        raise ValueError(f"{name} is NaN (d_total = 0?); a verdict needs a defined share")
    return out


def _interval(ci, point: float, name: str) -> tuple:
    if ci is None:
        return (point, point)
    try:
        lo, hi = (float(x) for x in ci)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a pair (low, high) of numbers, got {ci!r}")
    if math.isnan(lo) or math.isnan(hi) or lo > hi:
        raise ValueError(f"{name} must be an ordered pair low <= high without NaN, got {ci!r}")
    return (lo, hi)


def share_verdict(
    elicitation_share: float,
    rd_share: float,
    *,
    elicitation_ci: Optional[Sequence[float]] = None,
    rd_ci: Optional[Sequence[float]] = None,
    threshold: float = 0.60,
) -> ShareVerdict:
    """Verdict on the shares ``(acc_majority - acc_frozen) / d_total`` and ``d_rd / d_total``.

    Point rule: ``e > t`` -> ELICITATION_DOMINATED, else ``r > t`` -> REWARD_DESIGN_DOMINATED, else
    MIXED. Interval rule: ``e_low > t`` -> ELICITATION_DOMINATED; ``e_low <= t < e_high`` ->
    INCONCLUSIVE; else ``r_low > t`` -> REWARD_DESIGN_DOMINATED; ``r_low <= t < r_high`` ->
    INCONCLUSIVE; else MIXED.

    Args:
      elicitation_share: point estimate of the elicitation share (any real; shares exceed [0, 1]
        when the terms have opposite signs).
      rd_share: point estimate of the reward-design share.
      elicitation_ci: optional ``(low, high)``; infinite bounds (unbounded Fieller sets) are allowed.
      rd_ci: optional ``(low, high)``.
      threshold: share threshold (> 0; 0.60 in the reference study).

    Returns:
      :class:`ShareVerdict` with both the interval and the point verdicts.
    """
    e = _share(elicitation_share, "elicitation_share")
    r = _share(rd_share, "rd_share")
    t = v.check_positive(threshold, "threshold")
    e_ci = _interval(elicitation_ci, e, "elicitation_ci")
    r_ci = _interval(rd_ci, r, "rd_ci")

    if e > t:
        point = ELICITATION_DOMINATED
    elif r > t:
        point = REWARD_DESIGN_DOMINATED
    else:
        point = MIXED

    if e_ci[0] > t:
        verdict, deciding, reason = ELICITATION_DOMINATED, "elicitation", f"elicitation share interval lies above {t:g}"
    elif e_ci[1] > t:
        verdict, deciding, reason = INCONCLUSIVE, "elicitation", f"elicitation share interval {e_ci} straddles {t:g}"
    elif r_ci[0] > t:
        verdict, deciding, reason = (REWARD_DESIGN_DOMINATED, "rd",
                                     f"elicitation share is at most {t:g} and the rd share interval lies above it")
    elif r_ci[1] > t:
        verdict, deciding, reason = INCONCLUSIVE, "rd", f"rd share interval {r_ci} straddles {t:g}"
    else:
        verdict, deciding, reason = MIXED, "rd", f"both share intervals lie at or below {t:g}"
    return ShareVerdict(
        verdict=verdict, point_verdict=point, deciding_share=deciding, elicitation_share=e, rd_share=r,
        elicitation_ci=e_ci, rd_ci=r_ci, threshold=t, reason=reason,
    )


def share_verdicts(summary: pd.DataFrame, *, by: Sequence[str] = (), threshold: float = 0.60) -> pd.DataFrame:
    """Apply :func:`share_verdict` to every group of a :func:`tabsim.stats.summarize_partition` frame.

    Args:
      summary: output of ``summarize_partition`` (rows for ``elicitation_share`` and ``rd_share``).
      by: the group columns used there.
      threshold: share threshold (> 0).

    Returns:
      DataFrame, one row per group: ``*by, verdict, point_verdict, deciding_share,
      elicitation_share, elicitation_ci_low, elicitation_ci_high, rd_share, rd_ci_low, rd_ci_high,
      threshold, reason``.
    """
    v.check_frame(summary, "summary")
    by = v.as_tuple(by, "by")
    v.check_columns(summary, ("term", "estimate", "ci_low", "ci_high", *by), name="summary")
    records = []
    for key, sub in v.group_items(summary, by):
        terms = sub.set_index("term")
        missing = [x for x in ("elicitation_share", "rd_share") if x not in terms.index]
        if missing:
            raise ValueError(f"summary lacks term rows {missing} in {v.describe_group(key)}")
        e, r = terms.loc["elicitation_share"], terms.loc["rd_share"]
        out = share_verdict(e["estimate"], r["estimate"], elicitation_ci=(e["ci_low"], e["ci_high"]),
                            rd_ci=(r["ci_low"], r["ci_high"]), threshold=threshold)
        records.append({
            **key, "verdict": out.verdict, "point_verdict": out.point_verdict,
            "deciding_share": out.deciding_share, "elicitation_share": out.elicitation_share,
            "elicitation_ci_low": out.elicitation_ci[0], "elicitation_ci_high": out.elicitation_ci[1],
            "rd_share": out.rd_share, "rd_ci_low": out.rd_ci[0], "rd_ci_high": out.rd_ci[1],
            "threshold": out.threshold, "reason": out.reason,
        })
    return pd.DataFrame.from_records(records)
