"""The crossover's t band inverted at the root: hand values, a brute-force scan, and its coverage."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

import tabsim.stats as ts
from tabsim.stats.intervals import root_t_interval


def _scan(grid, x, level=0.95, points=200_001):
    """Brute force: the t statistic of the interpolated seed values at a fine grid of priors."""
    n = x.shape[0]
    c = sps.t.ppf(0.5 + level / 2, n - 1)
    p = np.linspace(grid[0], grid[-1], points)
    j = np.clip(np.searchsorted(grid, p, side="right") - 1, 0, len(grid) - 2)
    w = (p - grid[j]) / (grid[j + 1] - grid[j])
    y = (1 - w) * x[:, j] + w * x[:, j + 1]  # [n, points]
    t = y.mean(0) / (y.std(0, ddof=1) / np.sqrt(n))
    return p[np.abs(t) <= c]


def test_two_point_hand_example():
    # 4 seeds at p = 0 and p = 1 with means -1 and 1 and seed deviations (-1, -1, 1, 1) * 0.5 at both
    # ends (perfectly correlated): the interpolated values are m(w) + 0.5 d with sd 0.5 * sqrt(4/3), so
    # |m(w)| <= c sd / 2 with m(w) = 2 w - 1: w = 1/2 -/+ c sqrt(4/3) / 8.
    d = np.array([-1.0, -1.0, 1.0, 1.0]) * 0.5
    x = np.stack([-1.0 + d, 1.0 + d], axis=1)
    res = root_t_interval([0.0, 1.0], x, estimate=0.5)
    half = sps.t.ppf(0.975, 3) * np.sqrt(4 / 3) / 8
    assert res.low == pytest.approx(0.5 - half, abs=1e-12)
    assert res.high == pytest.approx(0.5 + half, abs=1e-12)


def test_matches_a_brute_force_scan():
    rng = np.random.default_rng(3)
    grid = np.array([0.2, 0.3, 0.4, 0.5, 0.6])
    x = 0.8 * (grid - 0.41) + rng.normal(0, 0.03, (8, 1)) + rng.normal(0, 0.02, (8, 5))
    est = ts.locate_crossover(_frame(grid, x), n_resamples=100, paired=True).estimate
    res = root_t_interval(grid, x, estimate=est)
    accepted = _scan(grid, x)
    step = (grid[-1] - grid[0]) / 200_000
    assert res.low == pytest.approx(accepted.min(), abs=2 * step)
    assert res.high == pytest.approx(accepted.max(), abs=2 * step)


def _frame(grid, x):
    n, p = x.shape
    return pd.DataFrame({"seed": np.repeat(np.arange(n), p), "prior_strength": np.tile(grid, n),
                         "d_elicit": x.ravel()})


def test_locate_crossover_t_method():
    rng = np.random.default_rng(4)
    grid = np.array([0.2, 0.35, 0.5, 0.65, 0.8])
    x = 0.5 * (grid - 0.42) + rng.normal(0, 0.02, (8, 5))
    res = ts.locate_crossover(_frame(grid, x), method="t", paired=True, n_resamples=200)
    assert res.method == "t" and res.ci_low < res.estimate < res.ci_high
    with pytest.raises(ValueError, match="method"):
        ts.locate_crossover(_frame(grid, x), method="bca")
    # independent seeds per prior: a Welch band, wider than the paired one here (shared seed offsets)
    unpaired = ts.locate_crossover(_frame(grid, x), method="t", n_resamples=200)
    assert unpaired.ci_low < unpaired.estimate < unpaired.ci_high


def test_band_reaching_the_grid_end_is_open():
    grid = np.array([0.2, 0.35, 0.5])
    rng = np.random.default_rng(5)
    x = np.array([0.01, 0.3, 0.6]) + rng.normal(0, 0.05, (6, 3))  # root near the grid's low end, noisy
    res = root_t_interval(grid, x, estimate=0.2001)
    assert np.isnan(res.low) and res.high < 0.5


def test_coverage_of_a_linear_crossover():
    """8 paired seeds, a linear mean curve with seed offsets and noise: the band covers the root at
    95%. 2000 studies: binomial SE sqrt(0.95 * 0.05 / 2000) = 0.0049, tolerance 4 SE."""
    rng = np.random.default_rng(6)
    grid = np.array([0.2, 0.3, 0.4, 0.5, 0.6, 0.7])
    root, n_studies = 0.43, 2000
    hits = 0
    for _ in range(n_studies):
        x = 0.4 * (grid - root) + rng.normal(0, 0.02, (8, 1)) + rng.normal(0, 0.015, (8, grid.size))
        m = x.mean(0)
        j = np.flatnonzero(m[:-1] * m[1:] < 0)[0]
        est = grid[j] - m[j] * (grid[j + 1] - grid[j]) / (m[j + 1] - m[j])
        res = root_t_interval(grid, x, estimate=est)
        lo = -np.inf if np.isnan(res.low) else res.low
        hi = np.inf if np.isnan(res.high) else res.high
        hits += lo <= root <= hi
    se = np.sqrt(0.95 * 0.05 / n_studies)
    assert abs(hits / n_studies - 0.95) < 4 * se, hits / n_studies


@pytest.mark.parametrize("n_seeds", [8, 301])
def test_paired_percentile_interval_matches_resampled_means_gathered_per_prior(n_seeds):
    """Paired resamples, reduced to seed counts, against the plain gather of the same draws: every prior's
    resampled mean from ``rng.integers(0, n, size=(B, n))`` drawn once."""
    rng = np.random.default_rng(n_seeds)
    grid = np.array([0.2, 0.3, 0.4, 0.5, 0.6])
    x = 0.8 * (grid - 0.41) + rng.normal(0, 0.05, (n_seeds, 1)) + rng.normal(0, 0.05, (n_seeds, 5))
    df = pd.DataFrame({"prior_strength": np.repeat(grid, n_seeds), "seed": np.tile(np.arange(n_seeds), 5),
                       "d_elicit": x.T.ravel()})
    res = ts.locate_crossover(df, n_resamples=500, paired=True, method="percentile", random_state=7)
    idx = np.random.default_rng(7).integers(0, n_seeds, size=(500, n_seeds))
    boot = np.stack([x[:, j][idx].mean(axis=1) for j in range(5)], axis=1)
    change = boot[:, :-1] * boot[:, 1:] < 0
    has = change.any(axis=1)
    j = np.argmax(change, axis=1)[has]
    m0, m1 = boot[has, j], boot[has, j + 1]
    roots = grid[j] - m0 * (grid[j + 1] - grid[j]) / (m1 - m0)
    assert res.root_fraction == has.mean()
    if has.all():
        lo, hi = np.quantile(roots, [0.025, 0.975])
        assert res.ci_low == pytest.approx(lo, rel=1e-12) and res.ci_high == pytest.approx(hi, rel=1e-12)


@pytest.mark.parametrize("n_seeds, n_resamples", [(8, 100), (300, 1000), (37, 513)])
def test_paired_resamples_counted_in_blocks_match_one_count_matrix(n_seeds, n_resamples):
    """The paired bootstrap forms its seed counts a block of resamples at a time: the resampled means are
    the one-matrix ``counts @ values / n`` of the same draws (the block size is crossed, and a last block
    is partial), so the roots are those of the whole matrix."""
    from tabsim.stats.roots import COUNT_ROWS, first_roots, resampled_roots

    assert n_resamples < COUNT_ROWS or n_resamples % COUNT_ROWS  # several blocks, the last one partial
    rng = np.random.default_rng(11)
    grid = np.linspace(0.2, 0.8, 7)
    values = (grid - 0.5) + rng.normal(0, 0.3, (n_seeds, grid.size))
    per_prior = [values[:, j] for j in range(grid.size)]
    roots, has, boot = resampled_roots(grid, per_prior, n_resamples, np.random.default_rng(5), paired=True)
    idx = np.random.default_rng(5).integers(0, n_seeds, size=(n_resamples, n_seeds))
    counts = np.stack([np.bincount(row, minlength=n_seeds) for row in idx])
    whole = counts.astype(float) @ values / n_seeds
    np.testing.assert_allclose(boot, whole, rtol=1e-12, atol=1e-15)
    want_roots, want_has = first_roots(grid, whole)
    np.testing.assert_array_equal(has, want_has)
    np.testing.assert_allclose(roots, want_roots, rtol=1e-12, equal_nan=True)
