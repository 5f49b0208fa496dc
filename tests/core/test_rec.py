"""REC's surrogates (arXiv 2509.24203; tabsim.sim.algos.rec): hand values, the authors' loss in NumPy, the
relations the family's definition implies (on-policy REC is REINFORCE; REC-OneSide-IS's gradient is the PPO
clip's), and the clip fraction."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tabsim.config import ConfigError, resolve
from tabsim.config.presets import PRESETS
from tabsim.sim.algos import SURROGATES, clip_fraction
from tabsim.sim.params import Hyper

EPS = dict(eps_low=0.2, eps_high=0.2)  # the example's epsilon_low / epsilon_high


def np_trinity_rec(logprob, old_logprob, mask, adv, clip_mode, weight, eps_low=0.2, eps_high=0.2):
    """Trinity-RFT's RECPolicyLossFn.__call__ (trinity/algorithm/policy_loss_fn/rec_policy_loss.py), step for step
    in NumPy for the modes built here: (the token losses before the aggregation, d loss / d logprob, clip frac)."""
    ratio = np.exp(logprob - old_logprob)  # .detach()
    if clip_mode == "two-side":
        is_in_range = (ratio >= 1 - eps_low) * (ratio <= 1 + eps_high)
    else:  # one-side
        is_in_range = (ratio <= 1 + eps_high) * (adv >= 0) + (adv <= 0) * (ratio >= 1 - eps_low)
    a = adv * ratio if weight == "importance_sampling" else adv
    pg_losses = -a * logprob * is_in_range
    clipfrac = ((~is_in_range.astype(bool)) * mask).sum() / mask.sum()
    return pg_losses, -a * is_in_range, clipfrac


def _batch(seed=0):
    rng = np.random.default_rng(seed)
    shape = (3, 4, 5)
    logp = np.log(rng.uniform(0.05, 0.9, shape))
    logp_old = logp - rng.normal(0.0, 0.4, shape)  # ratios well outside [0.8, 1.2] as well as inside
    adv = rng.normal(size=(3, 4, 1))
    adv[0, 0, 0] = 0.0
    mask = (rng.uniform(size=shape) < 0.8).astype(float)
    return logp, logp_old, adv, mask


@pytest.mark.parametrize("name,clip_mode,weight", [("rec_oneside_nois", "one-side", "none"),
                                                   ("rec_twoside_nois", "two-side", "none"),
                                                   ("rec_twoside_is", "two-side", "importance_sampling")])
def test_matches_the_authors_loss(name, clip_mode, weight):
    logp, logp_old, adv, mask = _batch()
    want, want_grad, want_frac = np_trinity_rec(logp, logp_old, mask, np.broadcast_to(adv, logp.shape), clip_mode,
                                                weight)
    with jax.enable_x64(True):
        hp = Hyper(**EPS)
        fn = SURROGATES[name]
        l, lp, a = jnp.asarray(logp - logp_old), jnp.asarray(logp), jnp.asarray(adv)
        got = fn(l, lp, a, hp)
        g_l, g_p = jax.grad(lambda x, y: fn(x, y, a, hp).sum(), argnums=(0, 1))(l, lp)
        frac = clip_fraction(l, a, jnp.asarray(mask), hp, surrogate=name)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.asarray(g_p), want_grad, rtol=1e-12, atol=1e-14)
    assert np.all(np.asarray(g_l) == 0.0)  # only the mask and the weight read the ratio
    assert float(frac) == pytest.approx(want_frac, abs=1e-12)
    assert 0.0 < want_frac < 1.0  # the batch has tokens on both sides of the range


def test_hand_values():
    """w = 1.5, 0.5 and 1.1 on A = +1 and -1 (eps 0.2 / 0.2), logp = -1: one-side keeps A > 0 below 1.2 and A < 0
    above 0.8; two-side keeps 0.8 <= w <= 1.2 whatever the sign; the IS form scales the kept tokens by w."""
    w = jnp.log(jnp.array([1.5, 0.5, 1.1, 1.5, 0.5, 1.1]))
    a = jnp.array([1.0, 1.0, 1.0, -1.0, -1.0, -1.0])
    lp = -jnp.ones(6)
    hp = Hyper(**EPS)
    one = SURROGATES["rec_oneside_nois"](w, lp, a, hp)
    two = SURROGATES["rec_twoside_nois"](w, lp, a, hp)
    two_is = SURROGATES["rec_twoside_is"](w, lp, a, hp)
    # -A logp = A where kept
    np.testing.assert_allclose(np.asarray(one), [0.0, 1.0, 1.0, -1.0, 0.0, -1.0], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(two), [0.0, 0.0, 1.0, 0.0, 0.0, -1.0], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(two_is), [0.0, 0.0, 1.1, 0.0, 0.0, -1.1], rtol=1e-6)
    frac = clip_fraction(w, a, jnp.ones(6), hp, surrogate="rec_oneside_nois")
    assert float(frac) == pytest.approx(2 / 6)


@pytest.mark.parametrize("name", ["rec_oneside_nois", "rec_twoside_nois", "rec_twoside_is"])
def test_on_policy_is_reinforce(name):
    """At w = 1 every token is in range and the weight is 1: the loss and its gradient are REINFORCE's."""
    logp, _, adv, _ = _batch(1)
    with jax.enable_x64(True):
        hp, lp, a = Hyper(**EPS), jnp.asarray(logp), jnp.asarray(adv)
        zero = jnp.zeros_like(lp)
        got = jax.grad(lambda y: SURROGATES[name](zero, y, a, hp).sum())(lp)
        want = jax.grad(lambda y: SURROGATES["reinforce"](zero, y, a, hp).sum())(lp)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_oneside_is_gradient_is_the_ppo_clip():
    """REC-OneSide-IS (one-side mask, weight w) has the PPO clip's gradient in logp off the boundaries: the
    reason it is the ``clip`` surrogate here rather than a surrogate of its own (the ``rec_oneside_is`` preset)."""
    assert PRESETS["rec_oneside_is"]["algo"]["surrogate"] == "clip"
    logp, logp_old, adv, _ = _batch(2)
    adv = np.broadcast_to(adv, logp.shape)
    _, rec_is_grad, _ = np_trinity_rec(logp, logp_old, np.ones_like(logp), adv, "one-side", "importance_sampling")
    with jax.enable_x64(True):
        hp = Hyper(**EPS)
        lo = jnp.asarray(logp_old)
        g = jax.grad(lambda y: SURROGATES["clip"](y - lo, y, jnp.asarray(adv), hp).sum())(jnp.asarray(logp))
    np.testing.assert_allclose(np.asarray(g), rec_is_grad, rtol=1e-12, atol=1e-14)


def test_opmd_is_the_authors_k2_regulariser():
    """Trinity-RFT's rec with clip_mode none, weight none, regularizer k2: -A logp + c (logp - logp_old)^2 per token
    (values and logp gradients, the log-ratio carrying the gradient as the authors' logprob does); on policy its
    gradient is REINFORCE's; hand value: A = 1, logp = -1, logp_old = -1.5, c = 0.1 gives 1 + 0.025."""
    logp, logp_old, adv, _ = _batch(3)
    adv_t = np.broadcast_to(adv, logp.shape)
    coef = 0.1  # the example's regularizer_coef
    want = -adv_t * logp + coef * (logp - logp_old) ** 2
    want_grad = -adv_t + 2 * coef * (logp - logp_old)  # d/d logprob, logp_old held
    with jax.enable_x64(True):
        hp, lo = Hyper(opmd_coef=coef), jnp.asarray(logp_old)
        fn = SURROGATES["opmd"]
        got = fn(jnp.asarray(logp) - lo, jnp.asarray(logp), jnp.asarray(adv), hp)
        g = jax.grad(lambda y: fn(y - lo, y, jnp.asarray(adv), hp).sum())(jnp.asarray(logp))
        zero = jnp.zeros_like(lo)
        on = jax.grad(lambda y: fn(y - jax.lax.stop_gradient(y), y, jnp.asarray(adv), hp).sum())(jnp.asarray(logp))
        plain = jax.grad(lambda y: SURROGATES["reinforce"](zero, y, jnp.asarray(adv), hp).sum())(jnp.asarray(logp))
        hand = fn(jnp.array([0.5]), jnp.array([-1.0]), jnp.array([1.0]), Hyper(opmd_coef=0.1))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.asarray(g), want_grad, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(np.asarray(on), np.asarray(plain))
    assert float(hand[0]) == pytest.approx(1.025)
    assert PRESETS["opmd"]["algo"]["opmd_coef"] == coef


def test_a_negative_opmd_coefficient_is_refused_in_one_line():
    with pytest.raises(ConfigError) as err:
        resolve({"preset": "opmd", "algo": {"opmd_coef": -0.1}})
    text = str(err.value)
    assert "algo.opmd_coef" in text and "-0.1" in text and len(text.strip().splitlines()) <= 2, text
