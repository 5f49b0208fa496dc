"""Roots of mean curves on a grid of priors: the first sign change of each curve by linear
interpolation, bootstrap resamples of the seeds behind the curve, and the percentile interval of the
resampled roots with root-free resamples placed below or above the grid."""
from __future__ import annotations

from typing import Optional

import numpy as np

from tabsim.stats.draws import resample_indices, resampled_means


def first_roots(grid: np.ndarray, means: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First root of each row of ``means [B, P]`` by linear interpolation on ``grid [P]``."""
    zero = means == 0
    change = np.zeros_like(zero)
    change[:, :-1] = means[:, :-1] * means[:, 1:] < 0
    event = zero | change
    has = event.any(axis=1)
    first = np.argmax(event, axis=1)
    nxt = np.minimum(first + 1, grid.size - 1)
    rows = np.arange(means.shape[0])
    m0, m1 = means[rows, first], means[rows, nxt]
    p0, p1 = grid[first], grid[nxt]
    with np.errstate(divide="ignore", invalid="ignore"):
        interp = p0 - m0 * (p1 - p0) / (m1 - m0)
    root = np.where(zero[rows, first], p0, interp)
    return np.where(has, root, np.nan), has


COUNT_ROWS = 256  # resamples whose seed counts are formed at once (paired resampling)


def resampled_roots(grid: np.ndarray, per_prior: list, n_resamples: int, rng, paired: bool):
    """``(roots, has_root, means [n_resamples, P])`` of the mean curves of seeds drawn with replacement.

    Unpaired, each prior draws ``rng.integers(0, n_p, size=(n_resamples, n_p))`` in turn. Paired, one draw
    serves every prior: each resample is then a count of each seed, and its means are ``counts @ values / n``
    (one product for the grid instead of a gather of ``n_resamples x n`` values per prior), formed
    :data:`COUNT_ROWS` resamples at a time so that the counts stay in the caches (with thousands of seeds
    the whole count matrix is hundreds of MB of fresh memory).
    """
    if paired:
        n = per_prior[0].size
        idx = resample_indices(rng, n, (n_resamples, n))  # one draw, as the resamples' seeds were always drawn
        values = np.stack(per_prior, axis=1)
        boot = np.empty((n_resamples, values.shape[1]))
        offsets = n * np.arange(min(COUNT_ROWS, n_resamples))[:, None]
        for r0 in range(0, n_resamples, COUNT_ROWS):
            rows = idx[r0:r0 + COUNT_ROWS]
            m = rows.shape[0]
            counts = np.bincount((rows + offsets[:m]).ravel(), minlength=m * n).reshape(m, n)
            boot[r0:r0 + m] = counts.astype(float) @ values
        boot /= n
    else:
        boot = np.stack([resampled_means(x, resample_indices(rng, x.size, (n_resamples, x.size))) for x in per_prior],
                        axis=1)
    roots, has = first_roots(grid, boot)
    return roots, has, boot

def percentile_root_interval(point: np.ndarray, roots: np.ndarray, has: np.ndarray, boot: np.ndarray,
                             level: float) -> tuple[Optional[str], float, float, float, float]:
    """``(direction, frac_below, frac_above, lo, hi)`` of the resampled roots of a curve with a root.

    ``point [P]`` is the mean curve, ``roots, has [B]`` and ``boot [B, P]`` come from
    :func:`resampled_roots`. A resample with no root lies below the grid when its curve keeps the sign
    the mean curve has above the root, above the grid otherwise; a bound that falls among those
    resamples is NaN.
    """
    nonzero = point[point != 0]
    # The sign at the low end of the grid tells which side a root-free resample's root is on.
    low_sign = np.sign(nonzero[0]) if nonzero.size else 0.0
    direction = "increasing" if low_sign < 0 else "decreasing" if low_sign > 0 else None
    positive = np.all(boot > 0, axis=1) & ~has
    negative = np.all(boot < 0, axis=1) & ~has
    below = positive if low_sign < 0 else negative
    above = negative if low_sign < 0 else positive
    frac_below, frac_above = float(below.mean()), float(above.mean())
    lo = hi = float("nan")
    censored = np.where(below, -np.inf, np.where(above, np.inf, roots))
    if low_sign != 0 and np.isfinite(censored[has]).all():
        alpha = 1.0 - level
        with np.errstate(invalid="ignore"):
            q = np.quantile(censored, [alpha / 2.0, 1.0 - alpha / 2.0])
        lo, hi = (float(b) if np.isfinite(b) else float("nan") for b in q)
    return direction, frac_below, frac_above, lo, hi
