"""The heterogeneous prior's Beta draws (tabsim.sim.rng.beta, tabsim.sim.rng.log_gamma) have the right law.

Kolmogorov-Smirnov tests against scipy's exact CDFs, at fixed keys. With n draws the KS statistic's
1e-3 critical value is about 1.95 / sqrt(n); a test fails when the statistic exceeds it. The Gamma draws
are tested through their logarithms (what the code returns), where even shape 0.02 has no underflow.
"""
from __future__ import annotations

import jax
import numpy as np
import pytest
from scipy import stats

from tabsim.sim import rng as R

N = 100_000
CRITICAL = 1.95 / np.sqrt(N)  # KS at level 1e-3


ALPHAS = (0.02, 0.3, 1.0, 2.5, 30.0)
BETAS = ((0.5, 2.0), (3.0, 7.0), (30.0, 10.0), (1.0, 1.0))


@pytest.fixture(scope="module")
def draws():
    """Every law's draws from one compiled program each (a row per parameter, per-element parameters)."""
    alpha = np.repeat(np.asarray(ALPHAS, np.float32)[:, None], N, axis=1)
    logs = jax.jit(lambda k: R.log_gamma(k, alpha, alpha.shape))(jax.random.key(7))
    a, b = (np.repeat(np.asarray(col, np.float32)[:, None], N, axis=1) for col in zip(*BETAS))
    x = jax.jit(lambda k: R.beta(k, a, b, a.shape))(jax.random.key(11))
    return np.asarray(logs, np.float64), np.asarray(x, np.float64)


@pytest.mark.parametrize("row", range(len(ALPHAS)), ids=[f"alpha={a}" for a in ALPHAS])
def test_log_gamma_has_the_gamma_law(draws, row):
    alpha, logs = ALPHAS[row], draws[0][row]
    assert np.isfinite(logs).all()
    ks = stats.kstest(logs, lambda t: stats.gamma(alpha).cdf(np.exp(t))).statistic
    assert ks < CRITICAL, (alpha, ks, CRITICAL)


@pytest.mark.parametrize("row", range(len(BETAS)), ids=[f"a={a}-b={b}" for a, b in BETAS])
def test_beta_has_the_beta_law(draws, row):
    (a, b), x = BETAS[row], draws[1][row]
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


@pytest.mark.parametrize("seeds", [[0], [0, 1, 7], list(range(100, 612)), [2**32 - 1, 0, 5],
                                   (np.int64(3), 4, np.uint32(9)), [True, 2], [2**32, 1], [-1, 3]])
def test_seed_array_holds_each_seeds_words(seeds):
    """The array of many seeds at once is the per-seed words, row for row (including seeds outside
    ``[0, 2**32)``, whose words are those of their JAX key)."""
    got = R.seed_array(seeds)
    want = np.stack([np.asarray(R.seed_words(int(s)), dtype=np.uint32) for s in seeds])
    assert got.dtype == np.uint32 and got.shape == (len(seeds), 2)
    np.testing.assert_array_equal(got, want)
    assert R.seed_array(iter(seeds)).tolist() == want.tolist()  # any iterable, read once


def test_seed_array_refuses_a_seed_jax_cannot_key_as_seed_words_does():
    with pytest.raises(OverflowError):
        R.seed_words(2**70)
    with pytest.raises(OverflowError):
        R.seed_array([1, 2**70])
