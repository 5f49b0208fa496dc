"""Aggregates across conditions with stratified bootstrap intervals (rliable's estimators).

Scores are ``[runs, tasks]`` arrays: one column per condition (a task, a prior, ...), one row per
seed. The aggregates and their definitions follow rliable (Agarwal et al., "Deep Reinforcement
Learning at the Edge of the Statistical Precipice", NeurIPS 2021, arXiv 2108.13264):

* mean: the mean over tasks of each task's mean over runs;
* median: the median over tasks of each task's mean over runs;
* IQM: the mean of the middle 50% of all ``runs x tasks`` scores (``scipy.stats.trim_mean``, 0.25);
* optimality gap: ``threshold - mean(min(scores, threshold))``, how far the scores fall short of
  ``threshold`` (lower is better);
* probability of improvement of X over Y: the mean over tasks of ``P(X > Y) + 0.5 P(X = Y)``, the
  Mann-Whitney U statistic divided by ``runs_x * runs_y``;
* score distribution (performance profile): the fraction of all runs scoring above ``tau``.

Every statistic is vectorised over leading axes, so a bootstrap is one call on ``[B, runs, tasks]``.
Intervals come from a stratified bootstrap: within each task (the stratum) the runs are drawn with
replacement; for the probability of improvement X and Y are drawn independently, as rliable does.
``method="percentile"`` gives rliable's percentile intervals. Those under-cover with few runs per
task: a resample's within-task variance is ``(n - 1) / n`` of the sample's, so with 10 seeds a 95%
interval of the mean covers about 92% of the time (measured in tests/stats/test_aggregate.py). The
default, ``method="rescaled"``, stretches each percentile bound away from the estimate by
``sqrt(n / (n - 1))`` (``n`` the runs per task, the smaller of X's and Y's), the rescaling of the
with-replacement bootstrap for stratified samples (McCarthy and Snowden, 1985; Rao and Wu, 1988).
``method="bca"`` gives bias-corrected and accelerated intervals (Efron, 1987) from
``scipy.stats.bootstrap``, each task's runs a sample of its own, so that its resampling is stratified
too. Every bound is clipped to the values the statistic can take on these scores (a probability to
[0, 1], an optimality gap to [0, threshold - min score]), which a stretched bound could leave.

``conditions=True`` also resamples the tasks (with replacement, the same tasks for X and Y), rliable's
``task_bootstrap``: the interval then speaks for other conditions like these, not for these ones only.
"""
from __future__ import annotations

import warnings
from typing import Callable, Iterator

import numpy as np

from tabsim.stats import checks as v
from tabsim.stats.draws import resample_indices

AGGREGATES = ("mean", "median", "iqm", "optimality_gap")
METHODS = ("rescaled", "percentile", "bca")
_BLOCK = 2_000_000  # resampled values held at once; bounds memory, not the result


def aggregate_mean(scores: np.ndarray) -> np.ndarray:
    """Mean over tasks of the per-task mean. ``scores``: ``[..., runs, tasks]`` -> ``[...]``."""
    return np.mean(np.mean(scores, axis=-2), axis=-1)


def aggregate_median(scores: np.ndarray) -> np.ndarray:
    """Median over tasks of the per-task mean. ``scores``: ``[..., runs, tasks]`` -> ``[...]``."""
    return np.median(np.mean(scores, axis=-2), axis=-1)


def aggregate_iqm(scores: np.ndarray) -> np.ndarray:
    """Interquartile mean of all runs of all tasks (25% trimmed at each end). ``[..., runs, tasks]`` -> ``[...]``."""
    flat = scores.reshape(*scores.shape[:-2], -1)
    from scipy import stats as sps  # lazy: scipy.stats is 0.5 s of imports the other statistics never need

    return sps.trim_mean(flat, 0.25, axis=-1)


def optimality_gap(scores: np.ndarray, *, threshold: float = 1.0) -> np.ndarray:
    """``threshold - mean(min(scores, threshold))`` over runs and tasks. ``[..., runs, tasks]`` -> ``[...]``."""
    return threshold - np.mean(np.minimum(scores, threshold), axis=(-2, -1))


def probability_of_improvement(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Mean over tasks of ``P(X > Y) + 0.5 P(X = Y)``. ``x``: ``[..., runs_x, tasks]``, ``y``: ``[..., runs_y, tasks]``."""
    xs, ys = x[..., :, None, :], y[..., None, :, :]
    per_task = np.mean((xs > ys) + 0.5 * (xs == ys), axis=(-3, -2))
    return np.mean(per_task, axis=-1)


def score_distribution(scores: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """Fraction of all runs scoring above each ``tau``. ``[..., runs, tasks]`` -> ``[..., len(taus)]``."""
    flat = scores.reshape(*scores.shape[:-2], -1)
    return np.mean(flat[..., None, :] > np.asarray(taus, dtype=float)[:, None], axis=-1)


def check_scores(scores, name: str = "scores") -> np.ndarray:
    """``scores`` as a finite float ``[runs, tasks]`` array with at least 2 runs, or ``ValueError``."""
    try:
        arr = np.asarray(scores, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a numeric [runs, tasks] array, got {type(scores).__name__}")
    if arr.ndim != 2 or arr.shape[0] < 2 or arr.shape[1] < 1:
        raise ValueError(f"{name} must be [runs, tasks] with at least 2 runs and 1 task, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite; it holds {int((~np.isfinite(arr)).sum())} NaN/inf value(s)")
    return arr


def stratified_resamples(scores: np.ndarray, n_resamples: int, rng: np.random.Generator,
                         factor: int = 1, tasks_drawn: np.ndarray | None = None) -> Iterator[np.ndarray]:
    """Blocks ``[b, runs, tasks]`` of stratified resamples (runs drawn with replacement within each task)
    that together hold ``n_resamples``; ``factor`` shrinks the blocks for statistics that need more memory.
    ``tasks_drawn`` (``[n_resamples, tasks]`` task indices) resamples the tasks as well."""
    runs, tasks = scores.shape
    per_block = max(1, _BLOCK // (runs * tasks * factor))
    done = 0
    while done < n_resamples:
        b = min(per_block, n_resamples - done)
        idx = resample_indices(rng, runs, (b, runs, tasks))
        if tasks_drawn is None:
            yield np.take_along_axis(scores[None], idx, axis=1)
        else:  # the tasks first, then runs drawn afresh within each drawn task (a task drawn twice differs)
            yield np.take_along_axis(np.moveaxis(scores[:, tasks_drawn[done:done + b]], 1, 0), idx, axis=1)
        done += b


def _tasks_drawn(conditions: bool, n_resamples: int, tasks: int, rng: np.random.Generator) -> np.ndarray | None:
    return resample_indices(rng, tasks, (n_resamples, tasks)) if conditions else None


def _interval(boot: np.ndarray, est: np.ndarray, ci: float, method: str, runs: int,
              bounds: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bounds of ``boot`` ``[B, k]`` (stretched by ``sqrt(runs / (runs - 1))`` when rescaled),
    clipped to ``bounds``: the least and greatest values the statistics can take."""
    lo, hi = np.percentile(boot, [50 * (1 - ci), 50 * (1 + ci)], axis=0)
    if method == "rescaled":
        c = np.sqrt(runs / (runs - 1))
        lo, hi = est - c * (est - lo), est + c * (hi - est)
    return np.clip(lo, *bounds), np.clip(hi, *bounds)


def _bca(stat_of_columns: Callable, columns: list[np.ndarray], est: np.ndarray, ci: float, n_resamples: int,
         rng: np.random.Generator, bounds: tuple, cells: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """BCa bounds from ``scipy.stats.bootstrap``, each column (a task's runs) resampled on its own, in
    batches that hold about :data:`_BLOCK` values (``cells``: values one resample's statistic holds); a
    statistic with no spread over the resamples (or an undefined correction) keeps its estimate."""
    from scipy import stats as sps  # lazy: as in aggregate_iqm, scipy.stats only when it is used

    with warnings.catch_warnings():  # degenerate resamples are answered below, not warned about
        warnings.simplefilter("ignore")
        got = sps.bootstrap(tuple(columns), stat_of_columns, vectorized=True, paired=False, method="BCa",
                            n_resamples=n_resamples, confidence_level=ci, rng=rng,
                            batch=max(1, _BLOCK // max(cells, sum(c.size for c in columns))))
    lo, hi = (np.asarray(b, dtype=float).reshape(est.shape) for b in got.confidence_interval)
    lo, hi = np.where(np.isfinite(lo), lo, est), np.where(np.isfinite(hi), hi, est)
    return np.clip(np.minimum(lo, est), *bounds), np.clip(np.maximum(hi, est), *bounds)


def _flat(columns) -> np.ndarray:
    """Columns ``[..., runs_t]`` (their leading axes broadcast) as one ``[..., sum runs_t]`` array."""
    lead = np.broadcast_shapes(*(c.shape[:-1] for c in columns))
    return np.concatenate([np.broadcast_to(c, lead + c.shape[-1:]) for c in columns], axis=-1)


def _bootstrap(stat: Callable[[np.ndarray], np.ndarray], scores: np.ndarray, n_resamples: int,
               rng: np.random.Generator, factor: int = 1, tasks_drawn: np.ndarray | None = None) -> np.ndarray:
    return np.concatenate([np.atleast_1d(stat(block)).reshape(len(block), -1)
                           for block in stratified_resamples(scores, n_resamples, rng, factor, tasks_drawn)])


def _check_settings(ci, n_resamples, method, threshold=1.0, conditions=False) -> tuple[float, int, str]:
    level = v.check_level(ci)
    n = v.check_int(n_resamples, "n_resamples", minimum=100)
    if not np.isfinite(threshold):
        raise ValueError(f"threshold must be a finite number, got {threshold!r}")
    method = v.check_method(method, METHODS)
    if not isinstance(conditions, (bool, np.bool_)):
        raise ValueError(f"conditions must be True or False, got {conditions!r}")
    if conditions and method == "bca":
        raise ValueError("method: 'bca' resamples seeds within conditions only; with conditions resampled as well "
                         "choose 'percentile' or 'rescaled'")
    return level, n, method


def aggregate_intervals(scores, *, threshold: float = 1.0, ci: float = 0.95, n_resamples: int = 2000,
                        method: str = "rescaled", random_state=0, conditions: bool = False,
                        ) -> dict[str, tuple[float, float, float]]:
    """Each aggregate of :data:`AGGREGATES` with its stratified-bootstrap percentile interval.

    Args:
      scores: ``[runs, tasks]``.
      threshold: the optimality gap's target (the metric's best attainable value).
      ci: two-sided level; n_resamples: bootstrap resamples (>= 100);
      method: ``"rescaled"`` (default), ``"percentile"`` (rliable's) or ``"bca"``, see the module's docstring;
      random_state: int seed or ``numpy.random.Generator``; conditions: resample the tasks as well.

    Returns:
      ``{name: (estimate, low, high)}``.
    """
    arr = check_scores(scores)
    level, n, method = _check_settings(ci, n_resamples, method, threshold, conditions)
    rng = np.random.default_rng(random_state)

    def stat(s):
        return np.stack([aggregate_mean(s), aggregate_median(s), aggregate_iqm(s),
                         optimality_gap(s, threshold=threshold)], axis=-1)

    est = stat(arr)
    least, most = arr.min(), arr.max()
    gap = np.array([threshold - min(most, threshold), threshold - min(least, threshold)])
    bounds = (np.array([least, least, least, gap[0]]), np.array([most, most, most, gap[1]]))
    if method == "bca":
        from scipy import stats as sps  # lazy: as in aggregate_iqm, scipy.stats only when it is used

        def of_columns(*cols, axis=-1):
            means = np.stack([c.mean(axis=-1) for c in cols], axis=-1)
            flat = _flat(cols)
            return np.stack([means.mean(axis=-1), np.median(means, axis=-1), sps.trim_mean(flat, 0.25, axis=-1),
                             threshold - np.minimum(flat, threshold).mean(axis=-1)])

        lo, hi = _bca(of_columns, list(arr.T), est, level, n, rng, bounds)
    else:
        boot = _bootstrap(stat, arr, n, rng, tasks_drawn=_tasks_drawn(conditions, n, arr.shape[1], rng))
        lo, hi = _interval(boot, est, level, method, arr.shape[0], bounds)
    return {name: (float(est[i]), float(lo[i]), float(hi[i])) for i, name in enumerate(AGGREGATES)}


def improvement_interval(x, y, *, ci: float = 0.95, n_resamples: int = 2000, method: str = "rescaled",
                         random_state=0, conditions: bool = False) -> tuple[float, float, float]:
    """Probability of improvement of X over Y with its interval: X and Y resampled independently, each
    stratified by task (and, with ``conditions``, the same tasks drawn for both).
    ``x``: ``[runs_x, tasks]``, ``y``: ``[runs_y, tasks]`` (the same tasks)."""
    x, y = check_scores(x, "x"), check_scores(y, "y")
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"x and y must hold the same tasks, got {x.shape[1]} and {y.shape[1]} columns")
    level, n, method = _check_settings(ci, n_resamples, method, conditions=conditions)
    rng = np.random.default_rng(random_state)
    est = np.atleast_1d(probability_of_improvement(x, y))
    if method == "bca":
        tasks = x.shape[1]

        def of_columns(*cols, axis=-1):
            return np.mean([np.mean((xc[..., :, None] > yc[..., None, :]) + 0.5 * (xc[..., :, None] == yc[..., None, :]),
                                    axis=(-2, -1)) for xc, yc in zip(cols[:tasks], cols[tasks:])], axis=0)[None]

        lo, hi = _bca(of_columns, [*x.T, *y.T], est, level, n, rng, (0.0, 1.0), x.shape[0] * y.shape[0])
        return float(est[0]), float(lo[0]), float(hi[0])
    factor = max(x.shape[0], y.shape[0])
    drawn = _tasks_drawn(conditions, n, x.shape[1], rng)
    bx = np.concatenate(list(stratified_resamples(x, n, rng, factor, drawn)))
    by = np.concatenate(list(stratified_resamples(y, n, rng, factor, drawn)))
    step = max(1, _BLOCK // (x.shape[0] * y.shape[0] * x.shape[1]))
    boot = np.concatenate([probability_of_improvement(bx[i:i + step], by[i:i + step]) for i in range(0, n, step)])
    lo, hi = _interval(boot[:, None], est, level, method, min(x.shape[0], y.shape[0]), (0.0, 1.0))
    return float(est[0]), float(lo[0]), float(hi[0])


def profile_intervals(scores, taus, *, ci: float = 0.95, n_resamples: int = 2000, method: str = "rescaled",
                      random_state=0, conditions: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The performance profile (fraction of runs above each ``tau``) with pointwise bootstrap bands.

    Returns ``(fraction, low, high)``, each ``[len(taus)]``."""
    arr = check_scores(scores)
    taus = np.asarray(taus, dtype=float)
    if taus.ndim != 1 or taus.size == 0 or not np.isfinite(taus).all():
        raise ValueError(f"taus must be a non-empty 1-D array of finite thresholds, got shape {taus.shape}")
    level, n, method = _check_settings(ci, n_resamples, method, conditions=conditions)
    rng = np.random.default_rng(random_state)
    est = score_distribution(arr, taus)
    if method == "bca":
        def of_columns(*cols, axis=-1):
            flat = _flat(cols)
            return np.moveaxis(np.mean(flat[..., None, :] > taus[:, None], axis=-1), -1, 0)

        return (est, *_bca(of_columns, list(arr.T), est, level, n, rng, (0.0, 1.0), arr.size * taus.size))
    boot = _bootstrap(lambda s: score_distribution(s, taus), arr, n, rng, factor=taus.size,
                      tasks_drawn=_tasks_drawn(conditions, n, arr.shape[1], rng))
    return (est, *_interval(boot, est, level, method, arr.shape[0], (0.0, 1.0)))
