"""Manipulation checks of factors: did each factor move the mechanism it is meant to move?

A plan may declare, on a factor, the metric the factor is meant to move (``moves: clip_frac`` on a
clip factor). A factor whose levels leave that metric where it was did not manipulate what the
hypotheses assume (a clip that never engages: ``clip_frac`` 0 at every level), so its hypotheses
test something else. :func:`evaluate_moves` compares the metric's mean per level; the report lists
the result with the plan's other manipulation checks, a failed one is a deviation, and
:func:`flag_hypotheses` says so in the reason of every hypothesis that involves the factor.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tabsim.prereg.schema import COEFFICIENT_PREFIX, FACTORIAL_ESTIMANDS, Plan


def level_text(value) -> str:
    """A factor level as written in a plan: an integral number without ``.0`` (epochs 4, not 4.0)."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    if isinstance(value, np.integer):
        return str(int(value))
    return str(value)


def _trained(frame: pd.DataFrame, arm) -> pd.DataFrame:
    """Rows of the trained arms (one arm when ``arm`` is given) after the first recorded step."""
    arms = frame["arm"].astype(str)
    rows = frame[arms == arm] if arm is not None else frame[arms != "frozen"]
    if rows["step"].nunique() > 1:
        rows = rows[rows["step"] > rows["step"].min()]
    return rows


def evaluate_moves(plan: Plan, frame: pd.DataFrame) -> list[dict]:
    """One check record per factor with ``moves``: the metric's mean at each level and their spread.

    Passed when the largest difference between level means exceeds ``min_change``. Records have the
    fields of the plan's other manipulation checks (``id``, ``description``, ``condition``, ``passed``,
    ``value`` = the spread, ``rule``) and ``factor``, ``metric`` and ``level_means``.
    """
    out = []
    for f in plan.design.factors:
        m = f.moves
        if m is None:
            continue
        who = f"{m.arm} arm" if m.arm is not None else "trained arms"
        rule = (f"mean {m.metric} ({who}) differs between the levels of {f.name} by more than {m.min_change:g}")
        rec = {"id": f"{f.name}.moves.{m.metric}", "description": f"{f.name} moves {m.metric}", "condition": {},
               "factor": f.name, "metric": m.metric, "rule": rule}
        rows = _trained(frame, m.arm) if m.metric in frame else frame.iloc[:0]
        if rows.empty or f.name not in rows:
            out.append({**rec, "passed": False, "value": None, "level_means": {},
                        "note": "no rows or no such metric"})
            continue
        means = rows.groupby(rows[f.name].map(level_text), sort=False)[m.metric].mean()
        spread = float(means.max() - means.min()) if len(means) > 1 else 0.0
        out.append({**rec, "passed": bool(len(means) > 1 and spread > m.min_change), "value": spread,
                    "level_means": {str(k): float(v) for k, v in means.items()},
                    "rule": rule + " (level means: " + ", ".join(f"{k}: {v:.4g}" for k, v in means.items()) + ")"})
    return out


def _factors_of(plan: Plan, h) -> set:
    """The factors a hypothesis involves: those its condition fixes, and a factorial estimand's axes."""
    names = set(h.condition)
    if (h.estimand in FACTORIAL_ESTIMANDS or h.estimand.startswith(COEFFICIENT_PREFIX)) and plan.analysis.factorial:
        names |= set(plan.analysis.factorial.factors)
    return names


def flag_hypotheses(plan: Plan, records: list[dict], moves: list[dict]) -> None:
    """Append a warning to the reason of each hypothesis involving a factor that did not move its metric."""
    failed = {c["factor"]: c for c in moves if not c["passed"]}
    if not failed:
        return
    for h, r in zip(plan.hypotheses, records):
        hit = sorted(_factors_of(plan, h) & set(failed))
        if hit:
            r["reason"] += "; WARNING: " + "; ".join(
                f"the factor {name} did not move {failed[name]['metric']} (manipulation "
                f"check {failed[name]['id']} failed), so this test is not of the mechanism the plan assumed"
                for name in hit)
