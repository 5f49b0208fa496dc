"""tabsim.stats.dist: the distribution functions the statistics use are scipy.stats' own values, to the
bit, on a grid with the edges of their domains (probabilities 0 and 1, infinite and NaN arguments,
degrees of freedom that are not positive)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats as sps

from tabsim.stats import dist

PROBS = np.array([0.0, 1e-300, 1e-12, 0.001, 0.025, 0.1, 0.3, 0.5, 0.7, 0.9, 0.95, 0.975, 0.995, 1 - 1e-12,
                  1.0, -0.1, 1.1, np.nan, np.inf, -np.inf])
DFS = np.array([0.5, 1.0, 2.0, 3.0, 7.0, 15.0, 31.0, 127.0, 4095.0, 1e6, np.inf, 0.0, -1.0, np.nan])
XS = np.array([-np.inf, -1e6, -40.0, -3.0, -1.0, -1e-9, -0.0, 0.0, 1e-300, 1e-9, 0.5, 1.0, 2.5, 7.0, 40.0, 1e6,
               np.inf, np.nan])


def _same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)  # NaN where scipy gives NaN
    assert np.array_equal(np.signbit(got), np.signbit(want))  # no -0.0 where scipy gives +0.0


def test_t_ppf_is_scipys():
    q, df = np.meshgrid(PROBS, DFS)
    _same(dist.t_ppf(q, df), sps.t.ppf(q, df))


def test_norm_ppf_is_scipys():
    _same(dist.norm_ppf(PROBS), sps.norm.ppf(PROBS))


def test_t_sf_is_scipys():
    x, df = np.meshgrid(XS, DFS)
    _same(dist.t_sf(x, df), sps.t.sf(x, df))


@pytest.mark.parametrize("dfn", [1.0, 2.0, 5.0, 0.0, np.nan])
def test_f_sf_is_scipys(dfn):
    x, dfd = np.meshgrid(XS, DFS)
    _same(dist.f_sf(x, dfn, dfd), sps.f.sf(x, dfn, dfd))


@pytest.mark.parametrize("fn, args", [(dist.t_ppf, (0.975, 7)), (dist.norm_ppf, (0.3,)), (dist.t_sf, (2.0, 7)),
                                      (dist.f_sf, (3.0, 1, 56))])
def test_scalars_give_numpy_scalars_as_scipy_does(fn, args):
    got = fn(*args)
    want = getattr(sps, {"t_ppf": "t", "norm_ppf": "norm", "t_sf": "t", "f_sf": "f"}[fn.__name__])
    want = getattr(want, fn.__name__.split("_")[1])(*args)
    assert type(got) is type(want) is np.float64 and got == want


def _statistic(f, r, m, t, axis=-1):
    """A vector of partition-like statistics, a ratio among them (NaN where its denominator is 0)."""
    mf, mr, mm, mt = (np.mean(a, axis=axis) for a in (f, r, m, t))
    return np.stack([mr - mf, mm - mr, mt - mm, (mt - mm) / (mt - mr)])


@pytest.mark.parametrize("case", range(12))
def test_the_percentile_bootstrap_is_scipys(case):
    """tabsim's own paired percentile bootstrap gives scipy.stats.bootstrap's interval, standard error and
    distribution from the same generator (scipy.stats is then not imported by a study's statistics)."""
    from tabsim.stats.intervals import paired_bootstrap

    rng = np.random.default_rng(case)
    n = int(rng.integers(2, 40))
    data = [rng.normal(0.5, 0.1, n) * rng.choice([1.0, 1e-4, 1e3]) for _ in range(4)]
    if case == 0:  # the ratio is 0 / 0 in the resamples that miss the first seed: NaN among the ratio's
        n = 4
        data = [rng.normal(0.5, 0.1, n), np.zeros(n), np.zeros(n), np.array([1.0, 0.0, 0.0, 0.0])]
    if case == 1:
        data = [np.full(n, 0.25) for _ in range(4)]  # no spread: the degenerate [estimate, estimate]
    level = float(rng.choice([0.8, 0.9, 0.95, 0.99]))
    n_resamples = int(rng.integers(100, 3000))
    est, se, low, high = paired_bootstrap(data, _statistic, ci=level, method="percentile", n_resamples=n_resamples,
                                          random_state=case)
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", sps.DegenerateDataWarning)
        want = sps.bootstrap(data, _statistic, n_resamples=n_resamples, vectorized=True, paired=True,
                             confidence_level=level, method="percentile", rng=np.random.default_rng(case))
        dist_ = want.bootstrap_distribution
    flat = np.all(dist_ == dist_[:, :1], axis=1)
    if case == 0:
        assert np.isnan(dist_[3]).any() and np.isnan(high[3])
    for got, ref in ((low, want.confidence_interval.low), (high, want.confidence_interval.high),
                     (se, want.standard_error)):
        ref = np.where(flat, est if ref is not want.standard_error else 0.0, ref)
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-300, equal_nan=True)


def test_a_studys_statistics_load_no_scipy_stats():
    """The statistics of a study (t intervals, Fieller, the percentile gate, power, the factorial's closed
    form) run on scipy.special: scipy.stats and statsmodels are never imported."""
    import subprocess
    import sys

    code = ("import sys, numpy as np, pandas as pd\n"
            "import tabsim.stats as ts\n"
            "from tabsim.stats.intervals import paired_bootstrap, t_interval, fieller_interval\n"
            "from tabsim.stats.dist import t_ppf\n"
            "x = np.random.default_rng(0).normal(size=(4, 8))\n"
            "paired_bootstrap(list(x), lambda *a, axis=-1: np.stack([np.mean(a[0], axis=axis)]), method='percentile')\n"
            "t_interval(x[0]); fieller_interval(x[1], x[2] + 5.0)\n"
            "print(sorted(m for m in ('scipy.stats', 'statsmodels') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
