"""BNPO's estimator (tabsim.sim.algos.bnpo) by hand: the Beta fitted to the batch's group means, its edge cases, and
its declarations (batch-level, refused by the exact expected flow)."""
from __future__ import annotations

import math

import numpy as np

from tabsim.sim.algos import ESTIMATORS


def bnpo(rewards, valid=None):
    import jax
    import jax.numpy as jnp
    r = jnp.asarray(rewards, jnp.float32)
    v = jnp.ones(r.shape[0]) if valid is None else jnp.asarray(valid, jnp.float32)
    # compiled: run eagerly, each operation (of each batch shape here) is compiled on its own
    return np.asarray(jax.jit(lambda r, v: ESTIMATORS["bnpo"](r, lengths=jnp.ones_like(r), valid=v, hp=None))(r, v))


def test_bnpo_by_hand():
    # group means 1/4, 1/2, 3/4: m = 1/2, v = 1/16, a = b = (4 - 1) / 2 = 3/2, Beta(1.5, 1.5) with B(1.5, 1.5) = pi/8
    rewards = np.array([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0]], np.float32)
    pdf = lambda x: math.sqrt(x * (1 - x)) / (math.pi / 8)  # noqa: E731
    want = np.stack([(rewards[i] - p) / pdf(p) for i, p in enumerate((0.25, 0.5, 0.75))])
    np.testing.assert_allclose(bnpo(rewards), want, rtol=1e-5)
    # means 1/2, 1, 0: v = 1/4 = m (1 - m), so a = b = 0: the uniform density, A = r - p
    np.testing.assert_allclose(bnpo(np.array([[1, 0], [1, 1], [0, 0]], np.float32)),
                               [[0.5, -0.5], [0, 0], [0, 0]], rtol=1e-5, atol=1e-6)  # float32 density


def test_bnpo_edges():
    # every group mean equal (v = 0; NaN in the authors' code): the uniform density, A = r - p
    np.testing.assert_allclose(bnpo(np.array([[1, 0], [0, 1]], np.float32)), [[0.5, -0.5], [-0.5, 0.5]], rtol=1e-5)
    # one kept group: the authors' m = 0, v = 1 give alpha = beta = 1, A = r - p
    np.testing.assert_allclose(bnpo(np.array([[1, 0, 0], [1, 1, 1]], np.float32), valid=[1, 0]),
                               [[2 / 3, -1 / 3, -1 / 3], [0, 0, 0]], rtol=1e-5, atol=1e-6)
    meta = ESTIMATORS.meta("bnpo")
    assert meta["batch_level"] and "batch total" in meta["no_expected"]
