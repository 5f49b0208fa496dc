"""DRPO's surrogate (arXiv 2510.04474): hand values, its reduction to DisCO, and the sign of each correct answer's
gradient weight against GRPO's with a length penalty in the reward. The NumPy reference of the authors' released
loss is in tests/core/test_algos.py (the batch-surrogate conformance table)."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tabsim.config import ConfigError, resolve
from tabsim.sim.algos import batch
from tabsim.sim.algos.drpo import positive_weights
from tabsim.sim.params import Hyper
from tabsim.sim.rewards import overlong_penalty


def score_weights(name, lengths, adv, T, **hp):
    """``d(-loss) / d s_i`` of surrogate ``name`` on one on-policy group: the weight its objective puts on each
    answer's mean token log-probability (the loss is the same on every token, so one token's value is the loss)."""
    lengths = np.asarray(lengths, float)
    mask = jnp.asarray((np.arange(T)[None, None, :] < lengths[None, :, None]).astype(float))
    h = Hyper(**hp)

    def loss(s):  # every token of answer i at log-probability s_i: its mean is s_i
        lp = jnp.broadcast_to(s[None, :, None], mask.shape) * mask
        return batch.surrogate(name, jnp.zeros_like(lp), lp, jnp.asarray(adv, float)[None, :, None], h, mask=mask,
                               logp_old=jax.lax.stop_gradient(lp))[0, 0, 0]

    with jax.enable_x64(True):  # one small compiled program (op by op is slower on a loaded machine)
        return -np.asarray(jax.jit(jax.grad(loss))(jnp.full(len(lengths), -1.0)))


def test_positive_weights_by_hand():
    """Lengths 1 and 4 of width 4, lambda 1: e^0.75 and e^0 normalised, 0.67918 and 0.32082; a negative gets 0."""
    w = positive_weights(jnp.asarray([[True, True, False]]), jnp.asarray([[1.0, 4.0, 2.0]]), 4, 1.0)
    e = math.exp(0.75)
    np.testing.assert_allclose(np.asarray(w)[0], [e / (e + 1), 1 / (e + 1), 0.0], rtol=1e-6)


def test_drpo_weights_by_hand():
    """One group: correct answers of 1 and 4 tokens, wrong ones of 1 and 2 tokens, lambda 0.5, tau 10 (on-policy,
    the negatives' softmax is uniform): the positives' weights e^1.5 / (e^1.5 + 1) = 0.81757 and 0.18243 (they
    sum to 1, the group's weight), each negative -1/2; the batch holds one group (B = 1)."""
    got = score_weights("drpo", [1, 4, 1, 2], [1.0, 1.0, -1.0, -1.0], 4, drpo_lambda=0.5, disco_tau=10.0,
                        disco_delta=1.0, disco_beta=0.0)
    e = math.exp(1.5)
    np.testing.assert_allclose(got, [e / (e + 1), 1 / (e + 1), -0.5, -0.5], rtol=1e-6)


def test_drpo_is_disco_when_lengths_are_equal():
    """Equal lengths (every weight e^((1 - 1) / lambda)): DRPO's loss and gradient are DisCO's."""
    rng = np.random.default_rng(3)
    B, G, T = 2, 4, 2
    lengths = np.full((B, G), 2.0)
    mask = jnp.asarray((np.arange(T)[None, None, :] < lengths[..., None]).astype(float))
    logp = jnp.asarray(np.log(rng.uniform(0.1, 0.9, (B, G, T))))
    old = logp + jnp.asarray(rng.normal(scale=0.2, size=(B, G, T)))
    adv = jnp.asarray(rng.choice([-1.0, 1.0], size=(B, G, 1)))
    h = Hyper(drpo_lambda=0.2, disco_tau=2.0, disco_delta=-0.1, disco_beta=3.0)

    def loss(name, lp):
        return batch.surrogate(name, (lp - old) * mask, lp, adv, h, mask=mask, logp_old=old)

    def value_and_grad(name):
        return jax.jit(lambda lp: (loss(name, lp), jax.grad(lambda q: (loss(name, q) * mask).sum())(lp)))(logp)

    with jax.enable_x64(True):
        for got, want in zip(value_and_grad("drpo"), value_and_grad("disco")):
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-9)


def test_long_correct_answer_negative_under_grpo_positive_under_drpo():
    """A group of 4 on a depth-4 tree: correct answers of 1 and 4 tokens, two wrong answers of 1 token. With DAPO's
    overlong penalty (L_max 4, L_cache 2: the 4-token answer loses 1) the rewards are 1, 0, 0, 0 and GRPO's
    centred reward of the long correct answer is 0 - 1/4 < 0: it is pushed down with the wrong ones. DRPO keeps the
    0/1 reward for the sign and gives it weight 1 / (e^(0.75 / 0.1) + 1) = 5.5e-4 > 0 (lambda 0.1)."""
    lengths = jnp.asarray([1.0, 4.0, 1.0, 1.0])
    correct = jnp.asarray([1.0, 1.0, 0.0, 0.0])
    r = correct + overlong_penalty(lengths, 4.0, 2.0)
    np.testing.assert_allclose(np.asarray(r), [1.0, 0.0, 0.0, 0.0])
    assert float(r[1] - r.mean()) == pytest.approx(-0.25)
    got = score_weights("drpo", [1, 4, 1, 1], [1.0, 1.0, -1.0, -1.0], 4, drpo_lambda=0.1, disco_tau=10.0,
                        disco_delta=1.0, disco_beta=0.0)
    assert got[1] == pytest.approx(1 / (math.exp(7.5) + 1), rel=1e-6) and got[1] > 0
    assert got[0] > got[1] and (got[2:] < 0).all()


def test_drpo_lambda_refused_below_its_bound():
    with pytest.raises(ConfigError) as err:
        resolve({"preset": "drpo", "algo": {"drpo_lambda": 0.0}})
    msg = str(err.value)
    assert "algo.drpo_lambda" in msg and "0.001" in msg
