"""Seed-count planning from a pilot: interval half-width and detection rate against seeds.

Confirmatory runs fix their number of seeds before they start (STYLE section 8). The pilot's
seed-level partition stands in for the seed distribution: each simulated study draws ``n`` seeds
from it with replacement and computes the interval the confirmatory analysis would compute.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from tabsim.stats import checks as v
from tabsim.stats import dist
from tabsim.stats.draws import resample_indices, resampled_means

POWER_METHODS = ("t", "percentile")


def _intervals(samples: np.ndarray, level: float, method: str, n_resamples: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Interval bounds of the mean of each row of ``samples [S, n]``."""
    s, n = samples.shape
    mean = samples.mean(axis=1)
    if method == "t":
        half = dist.t_ppf(0.5 + level / 2.0, n - 1) * samples.std(axis=1, ddof=1) / np.sqrt(n)
        return mean - half, mean + half
    alpha = 1.0 - level
    lo, hi = np.empty(s), np.empty(s)
    for i in range(s):
        boot = resampled_means(samples[i], resample_indices(rng, n, (n_resamples, n)))
        lo[i], hi[i] = np.quantile(boot, [alpha / 2.0, 1.0 - alpha / 2.0])
    return lo, hi


def power_curve(
    seed_df: pd.DataFrame,
    *,
    seeds_grid: Sequence[int] = (4, 8, 16, 32, 64),
    n_sim: int = 500,
    random_state=0,
    term: str = "d_elicit",
    ci: float = 0.95,
    method: str = "t",
    n_resamples: int = 500,
    by: Sequence[str] = (),
) -> pd.DataFrame:
    """Simulated interval half-width and detection rate of ``term`` against the number of seeds.

    For each ``n`` in ``seeds_grid``, ``n_sim`` studies draw ``n`` pilot seeds with replacement and
    form the interval of the mean of ``term``; ``half_width = (ci_high - ci_low) / 2`` and a study
    detects when ``0 not in [ci_low, ci_high]``. Expect ``half_width ~ 1/sqrt(n)``.

    Args:
      seed_df: the pilot's :func:`tabsim.stats.seed_partition` output.
      seeds_grid: seed counts to simulate (ints >= 2).
      n_sim: simulated studies per seed count (>= 10).
      random_state: int seed or ``numpy.random.Generator``.
      term: numeric per-seed column to plan for (default ``"d_elicit"``).
      ci: two-sided confidence level in (0, 1).
      method: ``"t"`` (Student t, fast) or ``"percentile"`` (bootstrap inside every study).
      n_resamples: bootstrap resamples per study for ``"percentile"`` (>= 100).
      by: group columns; each group is planned from its own pilot seeds.

    Returns:
      DataFrame, one row per (by..., n_seeds): ``*by, term, n_seeds, mean_half_width,
      median_half_width, se_mean_half_width, detection_rate, detection_se, n_sim, ci_level, method,
      pilot_seeds, pilot_estimate``.
    """
    v.check_frame(seed_df, "seed_df")
    by = v.as_tuple(by, "by")
    if not isinstance(term, str):
        raise ValueError(f"term must be a column name, got {term!r}")
    v.check_columns(seed_df, ("seed", term, *by), name="seed_df", role="seed, term and by columns")
    grid = sorted({v.check_int(n, "seeds_grid entry", minimum=2) for n in seeds_grid})
    if not grid:
        raise ValueError("seeds_grid must hold at least one seed count >= 2")
    n_sim = v.check_int(n_sim, "n_sim", minimum=10)
    level = v.check_level(ci)
    method = v.check_method(method, POWER_METHODS)
    n_resamples = v.check_int(n_resamples, "n_resamples", minimum=100)
    v.check_finite_column(seed_df, term, name="seed_df")

    records = []
    for key, sub in v.group_items(seed_df, by):
        if sub["seed"].duplicated().any():
            raise ValueError(f"seeds repeat in {v.describe_group(key)}; pass the condition columns in by")
        x = sub.sort_values("seed")[term].to_numpy(float)
        if x.size < 2:
            raise ValueError(f"{v.describe_group(key)} has {x.size} pilot seed; at least 2 are needed")
        rng = v.make_rng(random_state)
        for n in grid:
            samples = x[resample_indices(rng, x.size, (n_sim, n))]
            lo, hi = _intervals(samples, level, method, n_resamples, rng)
            half = (hi - lo) / 2.0
            detect = (lo > 0) | (hi < 0)
            p = float(detect.mean())
            records.append({
                **key, "term": term, "n_seeds": n, "mean_half_width": float(half.mean()),
                "median_half_width": float(np.median(half)),
                "se_mean_half_width": float(half.std(ddof=1) / np.sqrt(n_sim)),
                "detection_rate": p, "detection_se": math.sqrt(p * (1.0 - p) / n_sim),
                "n_sim": n_sim, "ci_level": level, "method": method,
                "pilot_seeds": int(x.size), "pilot_estimate": float(x.mean()),
            })
    return pd.DataFrame.from_records(records)


def recommend_seeds(curve: pd.DataFrame, target_half_width: float) -> dict:
    """Smallest number of seeds whose mean interval half-width meets a target.

    On the grid: the smallest ``n`` with ``mean_half_width <= target``. Beyond it, from the largest
    grid point ``(n_0, h_0)`` by the ``1/sqrt(n)`` law: ``n = ceil(n_0 (h_0 / target)^2)``; this
    ignores the shrinking t quantile, so it errs toward more seeds.

    Args:
      curve: :func:`power_curve` output filtered to one group and one term.
      target_half_width: wanted half-width (> 0), in the units of the term.

    Returns:
      dict with ``n_seeds``, ``predicted_half_width``, ``detection_rate`` (None when extrapolated),
      ``extrapolated`` (bool), ``basis_n_seeds``, ``target_half_width`` and ``note`` (how the
      number was obtained).
    """
    v.check_frame(curve, "curve")
    v.check_columns(curve, ("n_seeds", "mean_half_width", "detection_rate", "term"), name="curve")
    target = v.check_positive(target_half_width, "target_half_width")
    if curve["term"].nunique() != 1 or curve["n_seeds"].duplicated().any():
        raise ValueError(
            "curve must hold one term and one group (each n_seeds once); filter it first, got terms "
            f"{sorted(curve['term'].unique().tolist())} and {len(curve)} rows"
        )
    c = curve.sort_values("n_seeds")
    ns = c["n_seeds"].to_numpy(int)
    hw = c["mean_half_width"].to_numpy(float)
    det = c["detection_rate"].to_numpy(float)
    ok = np.flatnonzero(hw <= target)
    if ok.size:
        i = int(ok[0])
        note = f"smallest n on the simulated grid {ns.tolist()} with mean half-width <= {target:g}"
        if i == 0:
            note += "; it is the smallest grid point, fewer seeds may also suffice"
        return {"n_seeds": int(ns[i]), "predicted_half_width": float(hw[i]), "detection_rate": float(det[i]),
                "extrapolated": False, "basis_n_seeds": int(ns[i]), "target_half_width": target, "note": note}
    n0, h0 = int(ns[-1]), float(hw[-1])
    n_star = int(math.ceil(n0 * (h0 / target) ** 2))
    return {
        "n_seeds": n_star, "predicted_half_width": h0 * math.sqrt(n0 / n_star), "detection_rate": None,
        "extrapolated": True, "basis_n_seeds": n0, "target_half_width": target,
        "note": (f"extrapolated beyond the simulated grid (largest n={n0}, half-width {h0:.3g}) with "
                 f"half-width proportional to 1/sqrt(n); simulate n={n_star} to confirm"),
    }
