"""The heterogeneous prior's Beta draws (tabsim.rng.beta, tabsim.rng.log_gamma) have the right law.

Kolmogorov-Smirnov tests against scipy's exact CDFs, at fixed keys. With n draws the KS statistic's
1e-3 critical value is about 1.95 / sqrt(n); a test fails when the statistic exceeds it. The Gamma draws
are tested through their logarithms (what the code returns), where even shape 0.02 has no underflow.
"""
from __future__ import annotations

import jax
import numpy as np
import pytest
from scipy import stats

from tabsim import rng as R

N = 100_000
CRITICAL = 1.95 / np.sqrt(N)  # KS at level 1e-3


@pytest.mark.parametrize("alpha", [0.02, 0.3, 1.0, 2.5, 30.0])
def test_log_gamma_has_the_gamma_law(alpha):
    logs = np.asarray(jax.jit(lambda k: R.log_gamma(k, alpha, (N,)))(jax.random.key(7)), np.float64)
    assert np.isfinite(logs).all()
    ks = stats.kstest(logs, lambda t: stats.gamma(alpha).cdf(np.exp(t))).statistic
    assert ks < CRITICAL, (alpha, ks, CRITICAL)


@pytest.mark.parametrize("a, b", [(0.5, 2.0), (3.0, 7.0), (30.0, 10.0), (1.0, 1.0)])
def test_beta_has_the_beta_law(a, b):
    x = np.asarray(jax.jit(lambda k: R.beta(k, a, b, (N,)))(jax.random.key(11)), np.float64)
    assert ((x >= 0) & (x <= 1)).all()
    ks = stats.kstest(x, stats.beta(a, b).cdf).statistic
    assert ks < CRITICAL, (a, b, ks, CRITICAL)


def test_beta_draws_are_independent_per_element_and_reproducible():
    """Per-element parameters, the same key twice: the same draws; another key: other draws; the two
    halves of a vector with different parameters follow their own laws."""
    a = np.r_[np.full(N // 2, 2.0), np.full(N // 2, 0.4)].astype(np.float32)
    b = np.r_[np.full(N // 2, 5.0), np.full(N // 2, 0.4)].astype(np.float32)
    draw = jax.jit(lambda k: R.beta(k, a, b, (N,)))
    x = np.asarray(draw(jax.random.key(3)), np.float64)
    assert np.array_equal(x, np.asarray(draw(jax.random.key(3)), np.float64))
    assert not np.array_equal(x, np.asarray(draw(jax.random.key(4)), np.float64))
    crit = 1.95 / np.sqrt(N // 2)
    assert stats.kstest(x[: N // 2], stats.beta(2.0, 5.0).cdf).statistic < crit
    assert stats.kstest(x[N // 2:], stats.beta(0.4, 0.4).cdf).statistic < crit
    for half in (x[: N // 2], x[N // 2:]):  # neighbours uncorrelated (within 4 standard errors)
        assert abs(np.corrcoef(half[:-1], half[1:])[0, 1]) < 4 / np.sqrt(N // 2)
