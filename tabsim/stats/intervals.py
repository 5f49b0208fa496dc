"""Confidence intervals over seeds: paired bootstrap, Student t and Fieller.

Metrics are small pure functions of ``[seeds]`` arrays; the intervals around them come from a
separate bootstrap with an explicit random state (rliable, Agarwal et al., arXiv 2108.13264).
Seeds are the independent units: every arm of one seed shares its random numbers, so the arms are
resampled together (a paired bootstrap over seed indices).
"""
from __future__ import annotations

import warnings
from typing import Callable, NamedTuple, Sequence

import numpy as np

from tabsim.stats import checks as v
from tabsim.stats import dist
from tabsim.stats.draws import resample_indices


class Interval(NamedTuple):
    """A point estimate with its standard error and two-sided interval."""

    estimate: float
    se: float
    low: float
    high: float


class FiellerInterval(NamedTuple):
    """Fieller interval of a ratio of means; ``bounded`` is False when it is the whole real line."""

    estimate: float
    low: float
    high: float
    bounded: bool


def _as_seed_array(x, name: str) -> np.ndarray:
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a 1-D numeric array of per-seed values, got {type(x).__name__}")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D [seeds], got shape {arr.shape}")
    if arr.size < 2:
        raise ValueError(f"{name} needs at least 2 seeds for an interval, got {arr.size}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite; it holds {int((~np.isfinite(arr)).sum())} NaN/inf value(s)")
    return arr


def paired_bootstrap(
    data: Sequence[np.ndarray],
    statistic: Callable[..., np.ndarray],
    *,
    ci: float = 0.95,
    method: str = "bca",
    n_resamples: int = 2000,
    random_state=0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Paired bootstrap over seeds of a vector of statistics: percentile intervals computed here as
    ``scipy.stats.bootstrap`` computes them (the same draws, quantiles and standard errors), BCa intervals
    by ``scipy.stats.bootstrap`` itself.

    The same resampled seed indices are applied to every array of ``data`` and to every output of
    ``statistic``, so the terms of one resample are computed on one set of seeds.

    Args:
      data: arrays ``[seeds]`` of equal length, one per quantity (e.g. one per arm).
      statistic: ``statistic(*arrays, axis=-1) -> [k, ...]``, vectorised along ``axis``.
      ci: two-sided confidence level in (0, 1).
      method: ``"bca"`` (bias-corrected and accelerated) or ``"percentile"``.
      n_resamples: number of bootstrap resamples (>= 100).
      random_state: int seed or ``numpy.random.Generator``.

    Returns:
      ``(estimate, se, low, high)``, each ``[k]``. Outputs that do not vary across resamples (all
      seeds equal) get the degenerate interval ``[estimate, estimate]``.
    """
    level = v.check_level(ci)
    method = v.check_method(method, v.BOOTSTRAP_METHODS)
    n_resamples = v.check_int(n_resamples, "n_resamples", minimum=100)
    arrays = tuple(_as_seed_array(x, f"data[{i}]") for i, x in enumerate(data))
    if len({a.size for a in arrays}) != 1:
        raise ValueError(f"data arrays must have one value per seed each, got sizes {[a.size for a in arrays]}")
    rng = v.make_rng(random_state)
    with np.errstate(divide="ignore", invalid="ignore"):
        estimate = np.atleast_1d(np.asarray(statistic(*arrays, axis=-1), dtype=float))
        vector = lambda *a, axis=-1: np.atleast_1d(statistic(*a, axis=axis))  # noqa: E731
        if method == "bca":
            low, high, se, boot = _scipy_bca(arrays, vector, level, n_resamples, rng)
        else:
            low, high, se, boot = _percentile_bootstrap(arrays, vector, level, n_resamples, rng)
    low, high, se = (np.atleast_1d(np.asarray(x, dtype=float)).copy() for x in (low, high, se))
    boot = np.asarray(boot, dtype=float).reshape(estimate.size, -1)
    flat = np.all(boot == boot[:, :1], axis=1)
    low[flat], high[flat], se[flat] = estimate[flat], estimate[flat], 0.0
    return estimate, se, low, high


def _percentile_bootstrap(arrays: tuple, statistic, level: float, n_resamples: int, rng):
    """``(low, high, se, distribution)`` of the paired percentile bootstrap, as ``scipy.stats.bootstrap``
    computes it (``method="percentile"``, ``paired=True``, one batch): the seed indices of every resample
    drawn at once with ``rng.integers(0, n, (n_resamples, n))``, the statistic over them, its
    Hyndman-Fan type 7 (linear) quantiles and its standard deviation (``ddof=1``)."""
    n = arrays[0].size
    idx = resample_indices(rng, n, (n_resamples, n))
    boot = statistic(*(a[idx] for a in arrays), axis=-1)
    alpha = (1.0 - level) / 2.0
    low, high = (_linear_quantile(boot, p) for p in (alpha, 1.0 - alpha))
    return low, high, np.std(boot, ddof=1, axis=-1), boot


def _linear_quantile(x: np.ndarray, p: float) -> np.ndarray:
    """The ``p`` quantile of ``x`` along its last axis (Hyndman-Fan type 7, the arithmetic of
    ``scipy.stats.quantile``'s ``"linear"``); NaN where a row holds NaN."""
    y = np.sort(x, axis=-1)
    n = y.shape[-1]
    jg = p * n + (1.0 - p)
    jp1 = jg // 1
    j = jp1 - 1
    g = 0.0 if j < 0 else jg % 1
    lo, hi = (int(min(max(k, 0.0), n - 1.0)) for k in (j, jp1))
    out = (1.0 - g) * y[..., lo] + g * y[..., hi]
    return np.where(np.isnan(x).any(axis=-1), np.nan, out)


def _scipy_bca(arrays: tuple, statistic, level: float, n_resamples: int, rng):
    """``(low, high, se, distribution)`` of ``scipy.stats.bootstrap``'s paired BCa interval."""
    from scipy import stats as sps  # lazy: only BCa intervals load scipy.stats (about 0.5 s of imports)

    with warnings.catch_warnings():
        # BCa is undefined for outputs with no spread; paired_bootstrap fixes those up.
        warnings.simplefilter("ignore", sps.DegenerateDataWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        res = sps.bootstrap(arrays, statistic, n_resamples=n_resamples, vectorized=True, paired=True,
                            confidence_level=level, method="BCa", rng=rng)
    return res.confidence_interval.low, res.confidence_interval.high, res.standard_error, res.bootstrap_distribution


def t_interval(x, *, ci: float = 0.95) -> Interval:
    """Student-t interval of a mean over seeds.

    ``mean +/- t_{n-1, (1+ci)/2} * s / sqrt(n)`` with ``s`` the Bessel-corrected standard deviation.

    Args:
      x: per-seed values ``[seeds]`` (at least 2).
      ci: two-sided confidence level in (0, 1).

    Returns:
      :class:`Interval` ``(estimate, se, low, high)``.
    """
    level = v.check_level(ci)
    arr = _as_seed_array(x, "x")
    n = arr.size
    est = float(arr.mean())
    se = float(arr.std(ddof=1) / np.sqrt(n))
    half = float(dist.t_ppf(0.5 + level / 2.0, n - 1)) * se
    return Interval(est, se, est - half, est + half)


def mean_interval(x, *, ci: float = 0.95, method: str = "bca", n_resamples: int = 2000, random_state=0) -> Interval:
    """Interval of a mean over seeds by paired bootstrap (BCa, percentile) or Student t.

    Args:
      x: per-seed values ``[seeds]`` (at least 2).
      ci: two-sided confidence level in (0, 1).
      method: ``"bca"``, ``"percentile"`` or ``"t"``.
      n_resamples: bootstrap resamples (ignored for ``"t"``).
      random_state: int seed or ``numpy.random.Generator`` (ignored for ``"t"``).

    Returns:
      :class:`Interval` ``(estimate, se, low, high)``; ``se`` is the bootstrap standard error for
      the bootstrap methods.
    """
    method = v.check_method(method)
    if method == "t":
        return t_interval(x, ci=ci)
    est, se, lo, hi = paired_bootstrap(
        (x,), lambda a, axis=-1: np.mean(a, axis=axis), ci=ci, method=method,
        n_resamples=n_resamples, random_state=random_state,
    )
    return Interval(float(est[0]), float(se[0]), float(lo[0]), float(hi[0]))


def fieller_interval(num, den, ci: float = 0.95) -> FiellerInterval:
    """Fieller interval of the ratio of means ``rho = mean(num) / mean(den)`` for paired seeds.

    The set ``{rho : (m_x - rho m_y)^2 <= t^2 (v_xx - 2 rho v_xy + rho^2 v_yy)}`` with ``m`` the
    means, ``v`` the (co)variances of the means and ``t = t_{n-1, (1+ci)/2}``. It is a finite
    interval only when the denominator mean is significantly non-zero, ``m_y^2 > t^2 v_yy``; else
    it is unbounded and reported as ``(-inf, inf)`` (Fieller 1954, J. R. Stat. Soc. B 16:175).

    Args:
      num: per-seed numerator values ``[seeds]``.
      den: per-seed denominator values ``[seeds]``, paired with ``num`` (same seed order).
      ci: two-sided confidence level in (0, 1).

    Returns:
      :class:`FiellerInterval` ``(estimate, low, high, bounded)``.
    """
    level = v.check_level(ci)
    x = _as_seed_array(num, "num")
    y = _as_seed_array(den, "den")
    if x.size != y.size:
        raise ValueError(f"num and den must be paired per seed, got {x.size} and {y.size} values")
    n = x.size
    mx, my = x.mean(), y.mean()
    cov = np.cov(x, y, ddof=1) / n
    vxx, vyy, vxy = cov[0, 0], cov[1, 1], cov[0, 1]
    t2 = float(dist.t_ppf(0.5 + level / 2.0, n - 1)) ** 2
    estimate = float(mx / my) if my != 0 else float(np.copysign(np.inf, mx) if mx != 0 else np.nan)
    a = my * my - t2 * vyy
    b = -2.0 * (mx * my - t2 * vxy)
    c = mx * mx - t2 * vxx
    if a <= 0:
        return FiellerInterval(estimate, -np.inf, np.inf, False)
    disc = max(b * b - 4.0 * a * c, 0.0)  # >= 0 whenever a > 0: rho = mx/my is always inside
    root = np.sqrt(disc)
    lo, hi = (-b - root) / (2.0 * a), (-b + root) / (2.0 * a)
    return FiellerInterval(estimate, float(lo), float(hi), True)


def ratio_interval(
    num, den, *, ci: float = 0.95, method: str = "bca", n_resamples: int = 2000, random_state=0
) -> Interval:
    """Interval of a ratio of means ``mean(num) / mean(den)`` over paired seeds.

    Bootstrap methods resample seeds and recompute the ratio of means; ``"t"`` uses
    :func:`fieller_interval` and a delta-method standard error
    ``|rho| sqrt(v_xx/m_x^2 - 2 v_xy/(m_x m_y) + v_yy/m_y^2)``.

    Args:
      num: per-seed numerator values ``[seeds]``.
      den: per-seed denominator values ``[seeds]``.
      ci: two-sided confidence level in (0, 1).
      method: ``"bca"``, ``"percentile"`` or ``"t"`` (Fieller).
      n_resamples: bootstrap resamples (ignored for ``"t"``).
      random_state: int seed or ``numpy.random.Generator``.

    Returns:
      :class:`Interval` ``(estimate, se, low, high)``; unbounded Fieller sets give ``(-inf, inf)``.
    """
    method = v.check_method(method)
    if method == "t":
        f = fieller_interval(num, den, ci)
        return Interval(f.estimate, _delta_ratio_se(np.asarray(num, float), np.asarray(den, float)), f.low, f.high)
    est, se, lo, hi = paired_bootstrap(
        (num, den), lambda a, b, axis=-1: np.mean(a, axis=axis) / np.mean(b, axis=axis),
        ci=ci, method=method, n_resamples=n_resamples, random_state=random_state,
    )
    return Interval(float(est[0]), float(se[0]), float(lo[0]), float(hi[0]))


def _delta_ratio_se(x: np.ndarray, y: np.ndarray) -> float:
    n = x.size
    mx, my = x.mean(), y.mean()
    if mx == 0 or my == 0:
        return float("nan")
    cov = np.cov(x, y, ddof=1) / n
    rel = cov[0, 0] / mx**2 - 2.0 * cov[0, 1] / (mx * my) + cov[1, 1] / my**2
    return float(abs(mx / my) * np.sqrt(max(rel, 0.0)))


class RootInterval(NamedTuple):
    """Confidence interval of where a mean curve crosses zero, from a t band inverted at the root.

    ``low``/``high`` are NaN where the accepted set reaches the end of the grid (the root may lie
    beyond it); ``accepted`` lists every accepted stretch ``(p_from, p_to)`` along the grid.
    """

    low: float
    high: float
    accepted: tuple


def _accepted_stretches(a, b, s_aa, s_ab, s_bb, c2):
    """Where on ``w in [0, 1]`` the zero mean is accepted: ``m(w)^2 <= c^2 var(m(w))``.

    ``m(w) = (1 - w) a + w b`` and ``var(m(w)) = (1 - w)^2 s_aa + 2 w (1 - w) s_ab + w^2 s_bb``, so the
    test statistic's condition is the quadratic ``A w^2 + B w + C <= 0``.
    """
    A = (b - a) ** 2 - c2 * (s_aa - 2.0 * s_ab + s_bb)
    B = 2.0 * a * (b - a) - c2 * (2.0 * s_ab - 2.0 * s_aa)
    C = a * a - c2 * s_aa
    f = lambda w: (A * w + B) * w + C  # noqa: E731
    cuts = [0.0, 1.0]
    if abs(A) > 1e-300:
        disc = B * B - 4.0 * A * C
        if disc >= 0:
            r = np.sqrt(disc)
            cuts += [w for w in ((-B - r) / (2 * A), (-B + r) / (2 * A)) if 0.0 < w < 1.0]
    elif abs(B) > 1e-300 and 0.0 < -C / B < 1.0:
        cuts.append(-C / B)
    cuts = sorted(cuts)
    out = []
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        if hi > lo and f(0.5 * (lo + hi)) <= 0.0:
            out.append((lo, hi))
    for w in (0.0, 1.0):  # an accepted end point alone (a touching root)
        if f(w) <= 0.0 and not any(lo <= w <= hi for lo, hi in out):
            out.append((w, w))
    return out


def root_t_interval(grid, values, *, ci: float = 0.95, paired: bool = True, estimate: float | None = None) -> RootInterval:
    """Confidence interval of the root of a mean curve, by inverting a pointwise Student-t band.

    Between grid points the curve is the linear interpolation of each seed's values, so at
    ``p = (1 - w) p_j + w p_{j+1}`` the seeds' interpolated values are i.i.d. (paired seeds) and the
    hypothesis "the mean curve is 0 at p" has a t test. The interval is the set of ``p`` where the test
    does not reject at level ``1 - ci``: it holds the root of the interpolated mean curve with
    probability ``ci`` whenever the t test is exact at that point (Fieller's construction, 1954, applied
    along the grid). The connected stretch that holds ``estimate`` is returned.

    Args:
      grid: sorted prior values ``[P]``.
      values: per-seed values ``[n, P]`` (``paired``: row ``i`` is seed ``i`` at every grid point), or
        a list of ``P`` arrays of per-seed values (independent seeds; a Welch variance and the smallest
        ``n - 1`` as degrees of freedom, which is conservative).
      ci: two-sided confidence level in (0, 1).
      paired: whether the rows of ``values`` are the same seeds at every grid point.
      estimate: the point estimate whose stretch is returned (default: the root of the mean curve).

    Returns:
      :class:`RootInterval`.
    """
    level = v.check_level(ci)
    grid = np.asarray(grid, dtype=float)
    if paired:
        x = np.asarray(values, dtype=float)
        n = x.shape[0]
        means = x.mean(0)
        cov = np.cov(x, rowvar=False, ddof=1) / n
        var = np.diag(cov)
        cross = np.diag(cov, 1)
        df = n - 1
    else:
        cols = [np.asarray(c, dtype=float) for c in values]
        means = np.array([c.mean() for c in cols])
        var = np.array([c.var(ddof=1) / c.size for c in cols])
        cross = np.zeros(grid.size - 1)
        df = min(c.size for c in cols) - 1
    c2 = float(dist.t_ppf(0.5 + level / 2.0, df)) ** 2
    pieces = []
    for j in range(grid.size - 1):
        for lo, hi in _accepted_stretches(means[j], means[j + 1], var[j], cross[j], var[j + 1], c2):
            step = grid[j + 1] - grid[j]
            pieces.append((grid[j] + lo * step, grid[j] + hi * step))
    merged: list[list[float]] = []
    for lo, hi in sorted(pieces):
        if merged and lo <= merged[-1][1] + 1e-12:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    if estimate is None or not np.isfinite(estimate):
        return RootInterval(float("nan"), float("nan"), tuple(map(tuple, merged)))
    for lo, hi in merged:
        if lo - 1e-12 <= estimate <= hi + 1e-12:
            low = float("nan") if lo <= grid[0] + 1e-12 else float(lo)
            high = float("nan") if hi >= grid[-1] - 1e-12 else float(hi)
            return RootInterval(low, high, tuple(map(tuple, merged)))
    return RootInterval(float("nan"), float("nan"), tuple(map(tuple, merged)))
