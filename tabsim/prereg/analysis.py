"""The pre-registered analysis: estimands at their conditions, intervals, rules, correction, verdicts.

Every estimand comes from :mod:`tabsim.stats` as a point estimate plus an interval at any level,
``ci(level) -> (low, high)``, computed with a fixed random state so that the same resamples serve
every level. A decision rule is then a statement about that interval:

* ``ci_lower_gt: x``   the two-sided ``1 - alpha`` interval lies above ``x``;
* ``ci_upper_lt: x``   it lies below ``x``;
* ``tost: {margin: d, center: c}``  the ``1 - 2 alpha`` interval lies inside ``(c - d, c + d)``
  (two one-sided tests, Schuirmann 1987);
* ``point_gt / point_lt: x``  the reference study's rule on the point estimate alone.

The ``p`` of a rule is the smallest ``alpha`` at which it holds (found by bisection on the level),
so the rule holds at level ``alpha`` iff ``p < alpha``; for ``ci_lower_gt`` with a t interval it is
twice the one-sided t-test p-value. Holm's step-down procedure (Holm 1979) on these ``p`` over the
confirmatory interval rules controls the family-wise error at ``alpha``; the verdict is

* SUPPORTED      the rule holds after the correction;
* NOT SUPPORTED  the nominal interval lies entirely outside the predicted region (the data
  contradict the prediction), or a point rule fails;
* INCONCLUSIVE   anything else (the interval straddles the boundary, the rule holds only before
  the correction, or a required manipulation check failed).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tabsim import stats
from tabsim.stats.effects import holm
from tabsim.prereg.contrasts import (Estimate, cells_estimate, final_rows, is_level, p_floor, paired_estimate,
                                     select)
from tabsim.prereg.manipulation import evaluate_moves, flag_hypotheses
from tabsim.prereg.schema import (
    CELLS_PREFIX,
    COEFFICIENT_PREFIX,
    ESTIMAND_ARMS,
    PAIRED_PREFIX,
    PARTITION_ARMS,
    PARTITION_ESTIMANDS,
    POINT_RULES,
    RATIO_ESTIMANDS,
    Plan,
    arm_factor,
)

SUPPORTED = "SUPPORTED"
NOT_SUPPORTED = "NOT SUPPORTED"
INCONCLUSIVE = "INCONCLUSIVE"
VERDICTS = (SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE)
_ALPHA_MIN = 1e-9


# the row helpers live with the seed-paired contrasts; their old private names stay for callers
_is_level, _select, _floor = is_level, select, p_floor


def partition_frame(plan: Plan, frame: pd.DataFrame) -> pd.DataFrame:
    """Per-seed arm accuracies and partition terms by the design's non-arm factors.

    With all four arms this is :func:`tabsim.stats.seed_partition` (which checks the identity on
    every seed); with fewer arms, the ``acc_<arm>`` columns of the arms that ran and the
    differences they define.
    """
    arm = arm_factor(plan)
    by = [f.name for f in plan.design.factors if f is not arm]
    metric = plan.analysis.metric
    rows = final_rows(frame)[["seed", "arm", "step", metric, *by]]
    if set(PARTITION_ARMS) <= set(rows["arm"].astype(str)):
        return stats.seed_partition(rows, by=by, metric=metric)
    rows = rows[rows["arm"].astype(str).isin(PARTITION_ARMS)]
    wide = rows.pivot_table(index=[*by, "seed"], columns="arm", values=metric, observed=True, aggfunc="first")
    out = wide.rename(columns=lambda a: f"acc_{a}").reset_index()
    out.columns.name = None
    for term in PARTITION_ESTIMANDS:
        lo, hi = ESTIMAND_ARMS[term]
        if {f"acc_{lo}", f"acc_{hi}"} <= set(out.columns):
            out[term] = out[f"acc_{hi}"] - out[f"acc_{lo}"]
    return out


def _difference_estimate(plan: Plan, seed_df: pd.DataFrame, estimand: str, condition: dict) -> Estimate:
    a = plan.analysis
    rows = _select(seed_df, condition)
    if len(rows) < 2:
        raise ValueError(f"{estimand} at {condition}: {len(rows)} seed rows; an interval needs at least 2")
    if estimand in PARTITION_ESTIMANDS:
        x = rows["d_elicit" if estimand == "bias" else estimand].to_numpy(float)

        def ci(level, x=x):
            iv = stats.mean_interval(x, ci=level, method=a.ci_method, n_resamples=a.n_resamples,
                                     random_state=a.random_state)
            return iv.low, iv.high

        return Estimate(estimand, condition, float(x.mean()), ci, a.ci_method, int(x.size),
                        {"sd": float(x.std(ddof=1))}, _floor(a.ci_method, a.n_resamples))
    acc = {a: rows[f"acc_{a}"].to_numpy(float) for a in ESTIMAND_ARMS[estimand]}
    num, den = {"rd_fraction": lambda: (acc["true"] - acc["majority"], acc["true"] - acc["random"]),
                "elicitation_share": lambda: (acc["majority"] - acc["frozen"], acc["true"] - acc["frozen"]),
                "rd_share": lambda: (acc["true"] - acc["majority"], acc["true"] - acc["frozen"])}[estimand]()

    def ci(level):
        iv = stats.ratio_interval(num, den, ci=level, method=a.ci_method, n_resamples=a.n_resamples,
                                  random_state=a.random_state)
        return iv.low, iv.high

    with np.errstate(divide="ignore", invalid="ignore"):
        est = float(num.mean() / den.mean())
    return Estimate(estimand, condition, est, ci, a.ci_method, int(num.size), p_floor=_floor(a.ci_method, a.n_resamples))


def _factorial_fit(plan: Plan, frame: pd.DataFrame, condition: dict):
    fac = plan.analysis.factorial
    rows = _select(final_rows(frame), condition)
    levels = {name: tuple(plan.factor(name).labels) for name in fac.factors}
    metric = plan.analysis.metric
    keep = ["seed", metric, *fac.factors]
    data = rows[keep].copy()
    for name in fac.factors:
        if plan.factor(name).field == "arm":
            data = data[data[name].astype(str).isin([str(x) for x in levels[name]])]
            data[name] = data[name].astype(str)
    return stats.fit_factorial(data, response=metric, factors=list(fac.factors), formula=fac.formula,
                               levels=levels, step=None, ci=1.0 - plan.analysis.alpha)


def _factorial_estimate(plan: Plan, frame: pd.DataFrame, estimand: str, condition: dict, cache: dict) -> Estimate:
    key = tuple(sorted((k, str(v)) for k, v in condition.items()))
    if key not in cache:
        cache[key] = _factorial_fit(plan, frame, condition)
    fit = cache[key]
    n_seeds = int(fit.design.groupby(list(fit.factors), observed=True).size().min())
    a = plan.analysis
    if estimand == "interaction_ratio":
        threshold = a.thresholds.get("interaction_ratio", 0.20)

        def ci(level):
            res = stats.interaction_ratio(fit, threshold=threshold, ci=level, n_resamples=a.n_resamples,
                                          random_state=a.random_state)
            return res.ci_low, res.ci_high

        res = stats.interaction_ratio(fit, threshold=threshold, ci=1.0 - a.alpha, n_resamples=a.n_resamples,
                                      random_state=a.random_state)
        detail = {"max_interaction_term": res.max_interaction_term, "max_main_term": res.max_main_term,
                  "coefficients": _coef_table(fit)}
        return Estimate(estimand, condition, res.ratio, ci, "percentile bootstrap (seeds within cells)",
                        n_seeds, detail, _floor("percentile", a.n_resamples))
    term = estimand[len(COEFFICIENT_PREFIX):]
    coefs = fit.coefficients
    match = coefs[coefs["term"] == term]
    if match.empty:
        raise ValueError(f"{estimand}: no coefficient {term!r} in the model; terms: {coefs['term'].tolist()}")
    row = match.iloc[0]
    model_term = row["model_term"]

    def ci(level):
        lo, hi = fit.model.conf_int(alpha=1.0 - level).loc[model_term]
        return float(lo), float(hi)

    return Estimate(estimand, condition, float(row["estimate"]), ci, "OLS t interval", n_seeds,
                    {"std_err": float(row["std_err"]), "p_value": float(row["p_value"]), "formula": fit.formula})


def _coef_table(fit) -> dict:
    c = fit.coefficients
    return {str(r.term): float(r.estimate) for r in c.itertuples() if r.order >= 1}


def estimate(plan: Plan, frame: pd.DataFrame, seed_df, estimand: str, condition: dict, cache: dict) -> Estimate:
    """The estimand at a condition of the design, from the run's tidy frame."""
    if estimand in PARTITION_ESTIMANDS + RATIO_ESTIMANDS:
        missing = [a for a in ESTIMAND_ARMS[estimand] if f"acc_{a}" not in seed_df.columns]
        if missing:
            raise ValueError(f"{estimand} needs the arms {list(ESTIMAND_ARMS[estimand])}; missing {missing}")
        return _difference_estimate(plan, seed_df, estimand, condition)
    if estimand.startswith(PAIRED_PREFIX):
        return paired_estimate(plan, frame, estimand, condition)
    if estimand.startswith(CELLS_PREFIX):
        return cells_estimate(plan, frame, estimand, condition)
    return _factorial_estimate(plan, frame, estimand, condition, cache)


# ------------------------------------------------------------------------------------ rules


def _region(plan: Plan, rule) -> tuple[float, float]:
    """The predicted region ``(low, high)`` of a rule (open interval)."""
    kind = rule.kind
    if kind in ("ci_lower_gt", "point_gt"):
        return plan.threshold(rule.value), math.inf
    if kind in ("ci_upper_lt", "point_lt"):
        return -math.inf, plan.threshold(rule.value)
    margin = plan.threshold(rule.tost.margin)
    return rule.tost.center - margin, rule.tost.center + margin


def _outside(lo: float, hi: float, region: tuple) -> bool:
    return hi <= region[0] or lo >= region[1]


def rule_level(kind: str, alpha: float) -> float:
    """Interval level a rule is judged on: ``1 - 2 alpha`` for TOST, else ``1 - alpha``."""
    return 1.0 - 2.0 * alpha if kind == "tost" else 1.0 - alpha


def rule_p(est: Estimate, region: tuple, kind: str) -> float:
    """Smallest alpha at which the rule holds on the interval at :func:`rule_level` (1.0 if never).

    Bisection on alpha: the interval narrows as alpha grows, so the rule is monotone in alpha. A
    bootstrap cannot resolve tail probabilities below ``1 / (resamples + 1)``, so its ``p`` is
    floored there (``est.p_floor``), which can only make a decision more conservative.
    """
    top = 0.5 if kind == "tost" else 1.0

    def holds(alpha):
        lo, hi = est.ci(rule_level(kind, alpha))
        return not (math.isnan(lo) or math.isnan(hi)) and lo > region[0] and hi < region[1]

    hi_a = top * (1.0 - 1e-9)
    if not holds(hi_a):
        return 1.0
    lo_a = max(_ALPHA_MIN, est.p_floor)
    if holds(lo_a):
        return lo_a
    for _ in range(40):
        mid = math.sqrt(lo_a * hi_a) if hi_a / lo_a > 4 else 0.5 * (lo_a + hi_a)
        if holds(mid):
            hi_a = mid
        else:
            lo_a = mid
        if hi_a - lo_a < 1e-6 * hi_a:
            break
    return hi_a


def adjust(pvals: list[float], method: str) -> list[float]:
    """Family-wise adjusted p-values (Holm step-down, Bonferroni, or none).

    The arithmetic of ``statsmodels.stats.multitest.multipletests`` for these methods (a test compares them),
    without the full garbage collection it runs on every call (0.2-1 s in a process holding compiled programs,
    once per analysis)."""
    if not pvals or method == "none":
        return list(pvals)
    p = np.asarray(pvals, float)
    if method == "holm":
        adjusted = holm(p)
    elif method == "bonferroni":
        adjusted = np.minimum(p * float(p.size), 1.0)
    else:
        raise ValueError(f"correction: {method!r} is not one of 'holm', 'bonferroni', 'none'")
    return [float(x) for x in adjusted]


def _fmt(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.4g}"


def _fmt_p(p: float, floor: float = 0.0) -> str:
    if floor > _ALPHA_MIN and p <= floor:
        return f"<= {floor:.2g} (the bootstrap's resolution)"
    if p <= _ALPHA_MIN:
        return f"< {_ALPHA_MIN:g}"
    return f"= {p:.3g}"


def _rule_text(plan: Plan, rule) -> str:
    kind = rule.kind
    if kind == "tost":
        m = rule.tost.margin
        named = f" ({m})" if isinstance(m, str) else ""
        return (f"TOST: {round(100 * (1 - 2 * plan.analysis.alpha))}% CI inside "
                f"{rule.tost.center:g} +/- {plan.threshold(m):g}{named}")
    value = plan.threshold(rule.value)
    named = f" ({rule.value})" if isinstance(rule.value, str) else ""
    level = round(100 * (1 - plan.analysis.alpha))
    return {"ci_lower_gt": f"{level}% CI lower bound > {value:g}{named}",
            "ci_upper_lt": f"{level}% CI upper bound < {value:g}{named}",
            "point_gt": f"point estimate > {value:g}{named} (reference rule, no interval)",
            "point_lt": f"point estimate < {value:g}{named} (reference rule, no interval)"}[kind]


def evaluate_checks(plan: Plan, frame: pd.DataFrame) -> list[dict]:
    """Manipulation checks: ``reduce(metric of arm at condition over seeds) op value``."""
    out = []
    ops = {"eq": lambda a, b: math.isclose(a, b, abs_tol=1e-9), "le": lambda a, b: a <= b,
           "lt": lambda a, b: a < b, "ge": lambda a, b: a >= b, "gt": lambda a, b: a > b}
    for c in plan.design.checks:
        rows = frame[frame["arm"].astype(str) == c.arm]
        rows = final_rows(rows) if c.step == "final" else rows[rows["step"] == c.step]
        rows = _select(rows, c.condition)
        if rows.empty or c.metric not in rows:
            out.append({"id": c.id, "description": c.description, "passed": False, "value": None,
                        "rule": f"{c.reduce}({c.metric} of {c.arm}) {c.op} {c.value:g}",
                        "note": "no rows or no such metric"})
            continue
        value = float(getattr(rows[c.metric], c.reduce)())
        out.append({"id": c.id, "description": c.description, "condition": c.condition,
                    "passed": bool(ops[c.op](value, c.value)), "value": value, "n_seeds": int(rows["seed"].nunique()),
                    "rule": f"{c.reduce} over matching runs of {c.metric} ({c.arm} arm) {c.op} {c.value:g}"})
    return out


def analyse(plan: Plan, frame: pd.DataFrame) -> dict:
    """Evaluate every hypothesis and exploratory analysis of ``plan`` on a run's tidy frame.

    Returns:
      JSON-ready dict with ``hypotheses`` (estimate, interval, rule, p, adjusted p, verdict and the
      sentence that decided it), ``exploratory``, ``checks`` and ``arm_means``.
    """
    a = plan.analysis
    seed_df = partition_frame(plan, frame)
    cache: dict = {}
    moves = evaluate_moves(plan, frame)
    checks = evaluate_checks(plan, frame) + moves
    passed = {c["id"]: c["passed"] for c in checks}
    records = []
    for h in plan.hypotheses:
        est = estimate(plan, frame, seed_df, h.estimand, h.condition, cache)
        kind = h.rule.kind
        region = _region(plan, h.rule)
        level = rule_level(kind, a.alpha)
        lo, hi = est.ci(level)
        rec = {
            "id": h.id, "kind": h.kind, "statement": h.statement, "estimand": h.estimand,
            "condition": h.condition, "prediction": h.prediction, "source": h.source,
            "rule": h.rule.model_dump(exclude_none=True), "rule_text": _rule_text(plan, h.rule),
            "estimate": est.estimate, "ci_low": float(lo), "ci_high": float(hi), "ci_level": level,
            "ci_method": est.method, "n_seeds": est.n_seeds, "detail": est.detail,
            "region": [region[0], region[1]], "requires": h.requires,
            "p_rule": None if kind in POINT_RULES else rule_p(est, region, kind), "p_floor": est.p_floor,
        }
        records.append(rec)
    family = [r for r in records if r["kind"] == "confirmatory" and r["p_rule"] is not None]
    adjusted = adjust([r["p_rule"] for r in family], a.correction)
    for r, p in zip(family, adjusted):
        r["p_adjusted"] = p
        r["family_size"] = len(family)
    for r in records:
        if r["p_rule"] is not None and "p_adjusted" not in r:
            r["p_adjusted"] = r["p_rule"]  # exploratory: no correction
            r["family_size"] = 1
        _decide(plan, r, passed)
    flag_hypotheses(plan, records, moves)
    exploratory = []
    for e in plan.exploratory:
        est = estimate(plan, frame, seed_df, e.estimand, e.condition, cache)
        lo, hi = est.ci(1.0 - a.alpha)
        exploratory.append({"id": e.id, "description": e.description, "estimand": e.estimand,
                            "condition": e.condition, "estimate": est.estimate, "ci_low": float(lo),
                            "ci_high": float(hi), "ci_level": 1.0 - a.alpha, "ci_method": est.method,
                            "n_seeds": est.n_seeds, "detail": est.detail})
    return {"hypotheses": records, "exploratory": exploratory, "checks": checks,
            "arm_means": arm_means(plan, frame)}


def _decide(plan: Plan, r: dict, passed: dict) -> None:
    kind = next(iter(r["rule"]))
    region = tuple(r["region"])
    est, lo, hi = r["estimate"], r["ci_low"], r["ci_high"]
    ci_txt = f"{round(100 * r['ci_level'])}% CI [{_fmt(lo)}, {_fmt(hi)}]"
    failed = [c for c in r["requires"] if not passed.get(c, False)]
    if kind in POINT_RULES:
        ok = est > region[0] if kind == "point_gt" else est < region[1]
        verdict = SUPPORTED if ok else NOT_SUPPORTED
        reason = (f"point estimate {_fmt(est)} {'>' if kind == 'point_gt' else '<'} "
                  f"{_fmt(region[0] if kind == 'point_gt' else region[1])} is {'true' if ok else 'false'} "
                  f"({ci_txt}, not used by this rule)")
    else:
        alpha = plan.analysis.alpha
        p, p_adj = r["p_rule"], r["p_adjusted"]
        corr = plan.analysis.correction if r["family_size"] > 1 else "none"
        p_txt = f"p {_fmt_p(p, r.get('p_floor', 0.0))}" + (f", {corr}-adjusted p {_fmt_p(p_adj)} (family of {r['family_size']})"
                                    if corr != "none" else "")
        if p_adj < alpha:
            verdict = SUPPORTED
            reason = f"{ci_txt} lies inside the predicted region {_region_text(region)}; {p_txt} < {alpha:g}"
        elif _outside(lo, hi, region):
            verdict = NOT_SUPPORTED
            reason = f"{ci_txt} lies outside the predicted region {_region_text(region)}; {p_txt}"
        elif p < alpha:
            verdict = INCONCLUSIVE
            reason = f"{ci_txt} meets the rule before the correction but not after; {p_txt}"
        else:
            verdict = INCONCLUSIVE
            reason = f"{ci_txt} overlaps the boundary of the predicted region {_region_text(region)}; {p_txt}"
    if failed:
        verdict = INCONCLUSIVE
        reason = f"required check(s) {failed} failed, so the condition is not what the plan assumed; " + reason
    r["verdict"], r["reason"] = verdict, reason


def _region_text(region: tuple) -> str:
    lo, hi = region
    if math.isinf(hi):
        return f"(> {_fmt(lo)})"
    if math.isinf(lo):
        return f"(< {_fmt(hi)})"
    return f"({_fmt(lo)}, {_fmt(hi)})"


def arm_means(plan: Plan, frame: pd.DataFrame) -> list[dict]:
    """Mean and standard error over seeds of the metric, per condition and arm (descriptive)."""
    arm = arm_factor(plan)
    by = [f.name for f in plan.design.factors if f is not arm]
    metric = plan.analysis.metric
    rows = final_rows(frame)
    g = rows.groupby([*by, "arm"], observed=True, sort=True)[metric]
    out = g.agg(["mean", "sem", "count"]).reset_index()
    out["arm"] = out["arm"].astype(str)
    return [{k: (v.item() if hasattr(v, "item") else v) for k, v in rec.items()} for rec in out.to_dict("records")]
