"""The telescoping partition of the training gain, per seed and summarised over seeds.

The terms (``d_null``, ``d_elicit``, ``d_rd``, ``d_naive``, ``d_total``, ``bias`` and the ratios) are defined
once, in :mod:`tabsim.stats.partition_terms`.

The arms of one seed share their random numbers, so every term is first formed per seed and the
seeds are the resampling unit of every interval.
"""
from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from tabsim.stats import checks as v
from tabsim.stats import intervals
from tabsim.stats.partition_terms import ACC_COLUMNS, RATIOS, arms_of, value
from tabsim.stats.roots import first_roots, percentile_root_interval, resampled_roots

ARMS = ("frozen", "random", "majority", "majority_offline", "incorrect", "format", "true", "noisy")
MAJORITY_ARMS = ("majority", "majority_offline")
DIFFERENCE_TERMS = ("d_null", "d_elicit", "d_rd", "d_naive", "d_total")
RATIO_TERMS = ("rd_fraction", "elicitation_share", "rd_share")
SUMMARY_TERMS = DIFFERENCE_TERMS + ("bias",) + RATIO_TERMS
IDENTITY_ATOL = 1e-9
CROSSOVER_METHODS = ("percentile", "t")



def seed_partition(
    df: pd.DataFrame,
    *,
    by: Sequence[str] = (),
    metric: str = "pass1",
    step="final",
    majority_arm: str = "majority",
) -> pd.DataFrame:
    """Per-seed telescoping partition of the gain of TRUE over FROZEN.

    ``d_total = d_null + d_elicit + d_rd`` with ``d_null = acc_random - acc_frozen``,
    ``d_elicit = acc_majority - acc_random``, ``d_rd = acc_true - acc_majority``,
    ``d_naive = acc_true - acc_random``; the identity is checked on every row to 1e-9.

    Args:
      df: tidy run results, one row per seed x arm x condition x step, with columns ``seed``,
        ``arm``, ``step`` (unless ``step=None``), the ``by`` columns and ``metric``.
      by: condition columns that define the groups (e.g. ``("prior_strength",)``). Every other
        column must be constant within a (group, seed, arm), else the rows are ambiguous.
      metric: the accuracy column (default ``"pass1"``).
      step: ``"final"`` (each arm's largest step within its group; the trained arms must agree,
        the FROZEN arm may be logged at fewer steps since it never changes), an int step, or
        ``None`` when ``df`` has no step column.
      majority_arm: ``"majority"`` (online) or ``"majority_offline"``; reported as ``acc_majority``.

    Returns:
      DataFrame with one row per (by..., seed) and columns ``*by, seed, [step,] acc_frozen,
      acc_random, acc_majority, acc_true, d_null, d_elicit, d_rd, d_naive, d_total``.
    """
    by, arms = _check_partition_arguments(df, by, metric, majority_arm)
    rows = df[df["arm"].isin(list(arms))]
    rows = v.select_step(rows, step, [*by, "arm"])
    v.check_finite_column(rows, metric)
    _check_groups(rows, by, arms, step)
    _check_unique_rows(rows, [*by, "seed", "arm"])
    out = _paired_accuracies(rows, by, arms, metric, step)
    f, r, m, t = (out[c].to_numpy(float) for c in ACC_COLUMNS)
    for term in DIFFERENCE_TERMS:
        out[term] = value(term, f, r, m, t)
    out.attrs.update(metric=metric, majority_arm=majority_arm, by=list(by))
    check_identity(out)
    return out


def _check_partition_arguments(df, by, metric, majority_arm) -> tuple[tuple, dict]:
    """``(by, arms)``: the condition columns, and each arm of the partition -> its accuracy column."""
    v.check_frame(df)
    by = v.as_tuple(by, "by")
    if not isinstance(majority_arm, str) or majority_arm not in MAJORITY_ARMS:
        raise ValueError(f"majority_arm must be one of {list(MAJORITY_ARMS)}, got {majority_arm!r}")
    reserved = {"seed", "arm", "step", metric}
    clash = [c for c in by if c in reserved]
    if clash:
        raise ValueError(
            f"by must name condition columns, not {clash} (seed, arm, step and the metric have fixed roles)"
        )
    v.check_columns(df, ("seed", "arm", metric, *by), role="seed, arm, metric and by columns")
    return by, {"frozen": "acc_frozen", "random": "acc_random", majority_arm: "acc_majority", "true": "acc_true"}


def _check_groups(rows, by, arms, step) -> None:
    """Every group has every arm, and with ``step="final"`` the trained arms end at one step."""
    for key, sub in v.group_items(rows, by):
        present = set(sub["arm"])
        for arm in arms:
            if arm not in present:
                raise ValueError(
                    f"arm {arm!r} is missing in {v.describe_group(key)}; the partition needs arms "
                    f"{list(arms)}, found {sorted(present)}"
                )
        if step == "final":
            trained = sub[sub["arm"] != "frozen"].groupby("arm")["step"].max()
            if trained.nunique() > 1:
                raise ValueError(
                    f"the trained arms end at different steps in {v.describe_group(key)}: "
                    f"{trained.to_dict()}; pass an explicit int step"
                )


def _check_unique_rows(rows, keys) -> None:
    """One row per (by..., seed, arm); the message names the columns that vary among clashing rows."""
    dup = rows.duplicated(keys, keep=False)
    if dup.any():
        first_key, clashing = next(iter(rows[dup].groupby(keys, sort=False, dropna=False)))
        first_key = tuple(x.item() if isinstance(x, np.generic) else x for x in first_key)
        varying = [c for c in rows.columns if c not in keys and clashing[c].nunique(dropna=False) > 1]
        raise ValueError(
            f"{len(clashing)} rows share (by..., seed, arm) = {first_key!r}; columns that vary "
            f"among them: {varying}; add the condition columns to by or filter the frame"
        )


def _paired_accuracies(rows, by, arms, metric, step) -> pd.DataFrame:
    """One row per (by..., seed) with each arm's accuracy (and the trained arms' final step)."""
    wide = rows.pivot(index=[*by, "seed"], columns="arm", values=metric)
    missing = wide[list(arms)].isna()
    if missing.to_numpy().any():
        where = missing.stack()
        loc = tuple(x.item() if isinstance(x, np.generic) else x for x in where[where].index[0])
        raise ValueError(
            f"seeds are not paired across arms: arm {loc[-1]!r} has no row for (by..., seed) = {loc[:-1]!r}; "
            f"every seed needs all of {list(arms)}"
        )
    wide = wide[list(arms)]
    # plain column labels: renaming the pivot's columns, a CategoricalIndex when the arm column is categorical,
    # re-encodes them against the arm categories (a deprecated construction in pandas 3)
    wide.columns = pd.Index(list(arms.values()))
    out = wide.reset_index()
    out.columns.name = None
    if step is not None:
        final = (rows[rows["arm"] != "frozen"].groupby([*by, "seed"], dropna=False)["step"].max()
                 .rename("step").reset_index())
        out = out.merge(final, on=[*by, "seed"], how="left")
        out = out[[*by, "seed", "step", *ACC_COLUMNS]]
    return out


def check_identity(seed_df: pd.DataFrame, *, atol: float = IDENTITY_ATOL) -> None:
    """Check the partition accounting on every seed row; raise if any row breaks it.

    ``d_total = d_null + d_elicit + d_rd``, ``d_naive = d_elicit + d_rd``, and each term equals its
    definition from the ``acc_*`` columns, all to absolute tolerance ``atol``.

    Args:
      seed_df: output of :func:`seed_partition` (or a frame with the same columns).
      atol: absolute tolerance (> 0).

    Returns:
      None; raises ``ValueError`` naming the first violated relation and row.
    """
    v.check_frame(seed_df, "seed_df")
    atol = v.check_positive(atol, "atol")
    v.check_columns(seed_df, (*ACC_COLUMNS, *DIFFERENCE_TERMS), name="seed_df", role="partition columns")
    col = {c: v.check_finite_column(seed_df, c, name="seed_df") for c in (*ACC_COLUMNS, *DIFFERENCE_TERMS)}
    f, r, m, t = (col[c] for c in ACC_COLUMNS)
    relations = {
        "d_total == d_null + d_elicit + d_rd": col["d_total"] - (col["d_null"] + col["d_elicit"] + col["d_rd"]),
        "d_naive == d_elicit + d_rd": col["d_naive"] - (col["d_elicit"] + col["d_rd"]),
    }
    for term in ("d_null", "d_elicit", "d_rd", "d_total"):  # each term against its definition
        plus, minus = arms_of(term)
        relations[f"{term} == acc_{plus} - acc_{minus}"] = col[term] - value(term, f, r, m, t)
    for name, gap in relations.items():
        bad = np.abs(gap) > atol
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"partition identity {name} violated on {int(bad.sum())} row(s); first at index "
                f"{seed_df.index[i]!r} with gap {gap[i]:.3g} (tolerance {atol:g})"
            )


def _group_arrays(sub: pd.DataFrame, key: dict) -> tuple[np.ndarray, ...]:
    if sub["seed"].duplicated().any():
        seed = sub.loc[sub["seed"].duplicated(), "seed"].iloc[0]
        raise ValueError(
            f"seed {seed!r} appears more than once in {v.describe_group(key)}; pass the condition "
            f"columns that distinguish those rows in by"
        )
    sub = sub.sort_values("seed")
    return tuple(sub[c].to_numpy(float) for c in ACC_COLUMNS)


def _summary_statistic(f, r, m, t, axis=-1):
    mf, mr, mm, mt = (np.mean(a, axis=axis) for a in (f, r, m, t))
    out = [value(k, mf, mr, mm, mt) for k in DIFFERENCE_TERMS + ("bias",) + RATIO_TERMS]
    return np.stack(out, axis=0)


def summarize_partition(
    seed_df: pd.DataFrame,
    *,
    by: Sequence[str] = (),
    ci: float = 0.95,
    method: str = "bca",
    n_resamples: int = 2000,
    random_state=0,
) -> pd.DataFrame:
    """Estimates and paired-over-seeds intervals of every partition term, per group.

    Estimates come from the seed means of the arm accuracies; ratio terms are ratios of means:
    ``rd_fraction = d_rd / d_naive``, ``elicitation_share = (acc_majority - acc_frozen) / d_total``,
    ``rd_share = d_rd / d_total``, and ``bias = d_elicit`` (the bias of ``d_naive`` for ``d_rd``).

    Args:
      seed_df: output of :func:`seed_partition`.
      by: group columns of ``seed_df``; seeds must be unique within a group.
      ci: two-sided confidence level in (0, 1).
      method: ``"bca"`` or ``"percentile"`` (paired bootstrap over seeds,
        :func:`tabsim.stats.intervals.paired_bootstrap`; all terms of one resample share its seeds), or ``"t"`` (Student
        t for the differences, :func:`tabsim.stats.fieller_interval` for the ratios, reported as
        ``(-inf, inf)`` when the denominator is not significant).
      n_resamples: bootstrap resamples (>= 100; ignored for ``"t"``).
      random_state: int seed or ``numpy.random.Generator``. With an int every group is resampled
        from the same seed, so a group's interval does not depend on the other groups.

    Returns:
      Tidy DataFrame, one row per (by..., term), columns ``*by, term, estimate, se, ci_low,
      ci_high, ci_level, method, n_seeds``; terms in the order ``d_null, d_elicit, d_rd, d_naive,
      d_total, bias, rd_fraction, elicitation_share, rd_share``.
    """
    v.check_frame(seed_df, "seed_df")
    by = v.as_tuple(by, "by")
    level = v.check_level(ci)
    method = v.check_method(method)
    n_resamples = v.check_int(n_resamples, "n_resamples", minimum=100)
    v.make_rng(random_state)
    v.check_columns(seed_df, ("seed", *by), name="seed_df", role="seed and by columns")
    check_identity(seed_df)

    records = []
    for key, sub in v.group_items(seed_df, by):
        arrays = _group_arrays(sub, key)
        n = arrays[0].size
        if n < 2:
            raise ValueError(f"{v.describe_group(key)} has {n} seed; an interval needs at least 2")
        if method == "t":
            rows = []
            for term in DIFFERENCE_TERMS + ("bias",):
                iv = intervals.t_interval(value(term, *arrays), ci=level)
                rows.append((term, iv.estimate, iv.se, iv.low, iv.high))
            for term in RATIO_TERMS:
                num, den = RATIOS[term]
                iv = intervals.ratio_interval(value(num, *arrays), value(den, *arrays), ci=level, method="t")
                rows.append((term, iv.estimate, iv.se, iv.low, iv.high))
        else:
            rng = v.make_rng(random_state)
            est, se, lo, hi = intervals.paired_bootstrap(
                arrays, _summary_statistic, ci=level, method=method, n_resamples=n_resamples, random_state=rng
            )
            rows = list(zip(SUMMARY_TERMS, est, se, lo, hi))
        for term, est_, se_, lo_, hi_ in rows:
            records.append({**key, "term": term, "estimate": float(est_), "se": float(se_),
                            "ci_low": float(lo_), "ci_high": float(hi_), "ci_level": level,
                            "method": method, "n_seeds": n})
    out = pd.DataFrame.from_records(records)
    out.attrs.update(n_resamples=n_resamples if method != "t" else 0, by=list(by))
    return out


@dataclasses.dataclass(frozen=True)
class CrossoverResult:
    """Location of the self-consistency crossover and its interval.

    Attributes:
      estimate: root of the mean curve on the grid (NaN when the mean curve has no sign change).
      ci_low, ci_high: interval bounds (``method``); NaN where the bound falls off the grid (percentile:
        among resamples with no root; t: the accepted stretch reaches the end of the grid).
      ci_level: confidence level.
      root_fraction: fraction of resamples whose mean curve has a root on the grid.
      frac_below_grid, frac_above_grid: fractions of resamples with no root whose curve places the
        root below / above the grid (by the direction of the mean curve; NaN when it has no root).
      direction: ``"increasing"`` (negative below the root) or ``"decreasing"``; None without root.
      n_resamples: bootstrap resamples.
      curve: DataFrame ``[prior_col, mean_<term>, n_seeds]`` of the mean curve on the grid.
    """

    estimate: float
    ci_low: float
    ci_high: float
    ci_level: float
    root_fraction: float
    frac_below_grid: float
    frac_above_grid: float
    direction: Optional[str]
    n_resamples: int
    curve: pd.DataFrame
    method: str = "percentile"


def locate_crossover(
    seed_df_by_prior: pd.DataFrame,
    *,
    prior_col: str = "prior_strength",
    grid: Optional[Sequence[float]] = None,
    term: str = "d_elicit",
    ci: float = 0.95,
    n_resamples: int = 2000,
    random_state=0,
    paired: bool = False,
    method: str = "t",
) -> CrossoverResult:
    """Prior strength where the mean of ``term`` (default ``d_elicit``) first changes sign.

    On the sorted grid ``p_1 < ... < p_P`` with seed means ``m_j``, the first ``j`` with ``m_j = 0``
    gives ``p_j``, else the first ``m_j m_{j+1} < 0`` gives
    ``p_j - m_j (p_{j+1} - p_j) / (m_{j+1} - m_j)``. The percentile interval resamples seeds within
    each prior; resamples with no root count as lying below or above the grid (by the direction of
    the mean curve) and a bound that falls among them is NaN.

    The interval (``method="t"``, the default) inverts a pointwise Student-t band at the root
    (:func:`tabsim.stats.intervals.root_t_interval`): it is every prior where a t test of "the
    interpolated mean curve is 0 here" does not reject. It has its nominal coverage with 8 seeds
    (0.949 at 95%), where the percentile bootstrap (``method="percentile"``) covers too rarely
    (0.886; ``experiments/interval_coverage``). The bootstrap resamples still give ``root_fraction``.

    Args:
      seed_df_by_prior: output of :func:`seed_partition` with ``by`` including ``prior_col``; other
        conditions must be filtered out (seeds unique per prior).
      prior_col: the prior-strength column.
      grid: prior values to use (each must be present); default all values in the frame.
      term: the per-seed column whose mean curve is searched (default ``"d_elicit"``).
      ci: two-sided confidence level in (0, 1).
      n_resamples: bootstrap resamples (>= 100).
      random_state: int seed or ``numpy.random.Generator``.
      paired: resample the same seed indices at every prior (common random numbers across priors;
        needs the same seeds at every grid point). Default False: independent within each prior.
      method: ``"t"`` (t band inverted at the root; default) or ``"percentile"`` (bootstrap).

    Returns:
      :class:`CrossoverResult`.
    """
    df = seed_df_by_prior
    level, method, n_resamples, rng = _check_crossover_arguments(df, prior_col, term, ci, method, n_resamples,
                                                                 random_state)
    priors, values, grid_arr = _crossover_grid(df, prior_col, term, grid)
    per_prior = _values_per_prior(df, priors, values, grid_arr, prior_col, paired)

    point = np.array([x.mean() for x in per_prior])
    est_arr, has_point = first_roots(grid_arr, point[None, :])
    estimate = float(est_arr[0])

    roots, has, boot = resampled_roots(grid_arr, per_prior, n_resamples, rng, paired)

    direction = None
    frac_below = frac_above = float("nan")
    lo = hi = float("nan")
    if has_point[0]:
        direction, frac_below, frac_above, lo, hi = percentile_root_interval(point, roots, has, boot, level)
    if method == "t":
        vals = np.stack(per_prior, axis=1) if paired else per_prior
        band = intervals.root_t_interval(grid_arr, vals, ci=level, paired=paired, estimate=estimate)
        lo, hi = band.low, band.high
    curve = pd.DataFrame({prior_col: grid_arr, f"mean_{term}": point, "n_seeds": [x.size for x in per_prior]})
    return CrossoverResult(
        estimate=estimate, ci_low=lo, ci_high=hi, ci_level=level, root_fraction=float(has.mean()),
        frac_below_grid=frac_below, frac_above_grid=frac_above, direction=direction,
        n_resamples=n_resamples, curve=curve, method=method,
    )


def _check_crossover_arguments(df, prior_col, term, ci, method, n_resamples, random_state) -> tuple:
    """``(level, method, n_resamples, rng)`` once the frame and the settings of the search are checked."""
    v.check_frame(df, "seed_df_by_prior")
    if not isinstance(term, str):
        raise ValueError(f"term must be a column name, got {term!r}")
    v.check_columns(df, ("seed", prior_col, term), name="seed_df_by_prior", role="seed, prior and term")
    level = v.check_level(ci)
    method = v.check_method(method, CROSSOVER_METHODS)
    n_resamples = v.check_int(n_resamples, "n_resamples", minimum=100)
    rng = v.make_rng(random_state)
    if set(ACC_COLUMNS + DIFFERENCE_TERMS) <= set(df.columns):
        check_identity(df)
    return level, method, n_resamples, rng


def _crossover_grid(df, prior_col, term, grid) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(priors, values, grid)``: the prior and term columns, and the sorted grid (each value present)."""
    priors = v.check_finite_column(df, prior_col, name="seed_df_by_prior")
    values = v.check_finite_column(df, term, name="seed_df_by_prior")
    present = np.unique(priors)
    if grid is None:
        grid_arr = present
    else:
        grid_arr = np.unique(np.asarray(list(grid), dtype=float))
        absent = [float(g) for g in grid_arr if not np.isclose(present, g, rtol=0, atol=1e-12).any()]
        if absent:
            raise ValueError(
                f"grid values {absent} are not in seed_df_by_prior[{prior_col!r}]; present: {present.tolist()}"
            )
    if grid_arr.size < 2:
        raise ValueError(f"grid needs at least 2 prior values, got {grid_arr.tolist()}")
    return priors, values, grid_arr


def _values_per_prior(df, priors, values, grid_arr, prior_col, paired) -> list[np.ndarray]:
    """The term's values at each grid prior, sorted by seed; seeds unique per prior (the same at every
    prior when paired)."""
    per_prior, seed_sets = [], []
    for g in grid_arr:
        mask = np.isclose(priors, g, rtol=0, atol=1e-12)
        sub = df.loc[mask, ["seed"]].assign(_value=values[mask]).sort_values("seed")
        if sub["seed"].duplicated().any():
            raise ValueError(
                f"seeds repeat at {prior_col}={g!r}; filter the other conditions out before locating the crossover"
            )
        if len(sub) < 2:
            raise ValueError(f"{prior_col}={g!r} has {len(sub)} seed; at least 2 are needed")
        per_prior.append(sub["_value"].to_numpy())
        seed_sets.append(tuple(sub["seed"]))
    if paired and len(set(seed_sets)) != 1:
        raise ValueError("paired=True needs the same seeds at every prior value of the grid")
    return per_prior
