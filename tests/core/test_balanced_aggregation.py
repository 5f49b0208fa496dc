"""Balanced Aggregation (arXiv 2605.04077): each sign's token mean weighted by its answers, by hand, against
token-mean's sign-length coupling, and equal to seq-mean-token-mean with one-token answers."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from tabsim.sim.algos import batch


def aggregate(name, loss, mask, adv):
    """``batch.aggregate`` compiled (op-by-op dispatch compiles each small op: seconds)."""
    return jax.jit(lambda *a: batch.aggregate(name, *a[:2], adv=a[2]))(loss, mask, adv)


def _group():
    """One group: a positive answer of 3 tokens (losses 1, 2, 3), a positive of 1 token (loss 4) and a negative of
    1 token (loss -6); the padding holds 100 (never read)."""
    loss = jnp.asarray([[[1.0, 2.0, 3.0], [4.0, 100.0, 100.0], [-6.0, 100.0, 100.0]]])
    mask = jnp.asarray([[[1.0, 1.0, 1.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]])
    adv = jnp.asarray([[1.0, 0.5, -1.5]])
    return loss, mask, adv


def test_balanced_by_hand():
    """Positives: 2 answers of 3, token mean (1 + 2 + 3 + 4) / 4 = 2.5; negative: 1 of 3, mean -6; so
    2/3 2.5 + 1/3 (-6) = -1/3. token-mean gives (10 - 6) / 5 = 0.8: the long positive answer's tokens outvote."""
    loss, mask, adv = _group()
    np.testing.assert_allclose(float(aggregate("balanced", loss, mask, adv)), -1.0 / 3.0, rtol=1e-6)
    np.testing.assert_allclose(float(aggregate("token-mean", loss, mask, adv)), 0.8, rtol=1e-6)


def test_balanced_averages_the_kept_groups_and_ignores_zero_advantages():
    """A second group with a zero advantage and a filtered third group: the zero-advantage answer weighs 0 (its
    loss 50 is not read), the group's negative half of its answers gives (1/2)(-2); the filtered group does not
    count: (-1/3 - 1) / 2."""
    loss, mask, adv = _group()
    loss = jnp.concatenate([loss, jnp.asarray([[[50.0, 0, 0], [-2.0, 0, 0], [9.0, 0, 0]]]),
                            jnp.ones((1, 3, 3))])
    mask = jnp.concatenate([mask, jnp.asarray([[[1.0, 0, 0], [1.0, 0, 0], [0.0, 0, 0]]]), jnp.zeros((1, 3, 3))])
    adv = jnp.concatenate([adv, jnp.asarray([[0.0, -1.0, 2.0]]), jnp.asarray([[1.0, -1.0, 0.0]])])
    got = aggregate("balanced", loss, mask, adv)
    np.testing.assert_allclose(float(got), (-1.0 / 3.0 - 1.0) / 2.0, rtol=1e-6)


def test_balanced_is_seq_mean_token_mean_on_one_token_answers():
    rng = np.random.default_rng(0)
    loss = jnp.asarray(rng.normal(size=(4, 6, 3)))
    mask = jnp.zeros((4, 6, 3)).at[..., 0].set(1.0).at[2].set(0.0)
    adv = jnp.asarray(rng.normal(size=(4, 6)))
    got = aggregate("balanced", loss, mask, adv)
    want = aggregate("seq-mean-token-mean", loss, mask, adv)
    np.testing.assert_allclose(float(got), float(want), rtol=1e-6)
