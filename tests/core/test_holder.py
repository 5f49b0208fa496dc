"""HölderPO's ratio (arXiv 2605.12058): hand values, the authors' loss, the reductions the paper states."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tabsim.sim.algos import batch
from tabsim.sim.algos.holder import holder_log_ratio
from tabsim.sim.params import Hyper

from test_algos import TOL, make_batch, np_ratio_holder  # tests/core: the NumPy reference and random batches

# one answer of two tokens with ratios 1.25 and 0.8, and a padding token
LOGP = np.log([[[0.5, 0.2, 0.3]]])
OLD = np.log([[[0.4, 0.25, 0.3]]])
MASK = np.array([[[1.0, 1.0, 0.0]]])


def holder(p, logp=LOGP, old=OLD, mask=MASK):
    with jax.enable_x64(True):
        return np.asarray(batch.ratio("holder", jnp.asarray(logp), jnp.asarray(old), jnp.asarray(mask),
                                      hp=Hyper(holder_p=p)))


@pytest.mark.parametrize("p,want", [(1.0, (1.25 + 0.8) / 2), (0.0, 1.0), (-1.0, 2 / (1 / 1.25 + 1 / 0.8)),
                                    (2.0, math.sqrt((1.25 ** 2 + 0.8 ** 2) / 2))])
def test_holder_mean_by_hand(p, want):
    """Ratios 1.25 and 0.8: arithmetic mean 1.025, geometric 1, harmonic 0.97561, quadratic 1.04940; the
    padding token holds 0."""
    got = holder(p)
    np.testing.assert_allclose(np.exp(got[0, 0, :2]), [want, want], rtol=1e-12)
    assert got[0, 0, 2] == 0.0


@pytest.mark.parametrize("p", [2.0, 0.5, 1e-3, 0.0, -1.0, -2.0])
def test_holder_ratio_matches_numpy(p):
    b = make_batch(seed=21)
    want = np_ratio_holder(b["logp"], b["logp_old"], b["mask"], p=p)
    np.testing.assert_allclose(holder(p, b["logp"], b["logp_old"], b["mask"]), want, **TOL)


def test_reductions():
    """p -> 0 is the geometric mean (the ``sequence`` ratio, GSPO) and continuous there; one-token answers give
    the ``token`` ratio for every p; the mean grows with p (the power-mean inequality)."""
    b = make_batch(seed=22)
    lp, old, mask = b["logp"], b["logp_old"], b["mask"]
    with jax.enable_x64(True):
        seq = np.asarray(batch.ratio("sequence", *map(jnp.asarray, (lp, old, mask))))
    np.testing.assert_allclose(holder(0.0, lp, old, mask), seq, **TOL)
    np.testing.assert_allclose(holder(1e-4, lp, old, mask), seq, atol=1e-4)  # O(p var(l)) away
    one = mask.copy()
    one[..., 1:] = 0.0
    for p in (-2.0, 0.0, 0.5, 3.0):
        np.testing.assert_allclose(holder(p, lp, old, one), (lp - old) * one, **TOL)
    ps = [-2.0, -1.0, 0.0, 1.0, 2.0]
    values = np.stack([holder(p, lp, old, mask) for p in ps])
    assert (np.diff(values, axis=0) >= -1e-12).all() and (np.diff(values, axis=0) > 1e-6).any()


def test_the_authors_loss_and_its_gradient():
    """The authors' ``holder`` loss, ``mean_i max(-A_i rho_i, -A_i clip(rho_i, 0.8, 1.2))``, is the composition
    holder ratio x clip x seq-mean-token-mean; its gradient with respect to logp is ``-A_i rho_i w_t^p /
    sum_s w_s^p`` on an unclipped answer's tokens (divided by the number of answers) and 0 on a clipped one."""
    b = make_batch(seed=23, B=3, G=4, T=3)
    lp, old, mask, adv, p = b["logp"], b["logp_old"], b["mask"], b["adv"], 2.0
    rho = np.exp(np_ratio_holder(lp, old, mask, p=p)[..., 0])
    per = np.maximum(-adv * rho, -adv * np.clip(rho, 0.8, 1.2))
    n_answers = adv.size
    grad = np.zeros_like(lp)
    for b_, g in np.ndindex(adv.shape):
        if -adv[b_, g] * rho[b_, g] >= -adv[b_, g] * min(max(rho[b_, g], 0.8), 1.2):
            w = np.exp(p * (lp[b_, g] - old[b_, g])) * mask[b_, g]
            grad[b_, g] = -adv[b_, g] * rho[b_, g] * w / w.sum() / n_answers
    with jax.enable_x64(True):
        hp = Hyper(holder_p=p, eps_low=0.2, eps_high=0.2)
        m, o, a = jnp.asarray(mask), jnp.asarray(old), jnp.asarray(adv)[..., None]

        def loss(x):
            l = batch.ratio("holder", x, o, m, hp=hp)
            return batch.aggregate("seq-mean-token-mean", batch.surrogate("clip", l, x, a, hp, mask=m), m)

        got, g = jax.jit(jax.value_and_grad(loss))(jnp.asarray(lp))  # one compile, not op-by-op
    np.testing.assert_allclose(float(got), per.mean(), **TOL)
    np.testing.assert_allclose(np.asarray(g), grad, **TOL)
    clipped = np.abs(rho - 1) > 0.2
    assert clipped.any() and (~clipped).any()  # both branches compared


def test_gradient_is_finite_at_p_zero_and_on_padding_only_answers():
    """The geometric branch and an answer with no token: finite values and gradients (the dropped branch of the
    where divides by a safe p)."""
    l = jnp.asarray([[[0.3, -0.2], [0.0, 0.0]]])
    mask = jnp.asarray([[[1.0, 1.0], [0.0, 0.0]]])
    grad = jax.jit(jax.grad(lambda x, p: holder_log_ratio(x, mask, p).sum()))
    for p in (0.0, 2.0):
        g = grad(l, jnp.asarray(p))
        assert np.isfinite(np.asarray(g)).all()
        np.testing.assert_allclose(np.asarray(g)[0, 1], 0.0)
