"""Clip-Cov (arXiv 2505.22617, verl's compute_policy_loss_clip_cov): verl's procedure with the step's uniforms as
its random permutation, hand values, the reductions, the draw's uniformity and its delivery by the update."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tabsim.config import ConfigError, resolve
from tabsim.sim.algos import SURROGATES, batch, register_surrogate
from tabsim.sim.algos.clip_cov import clip_cov_cut, step_uniforms
from tabsim.sim.params import Hyper

from test_algos import TOL, make_batch, np_clip_cov_batch  # tests/core: verl's procedure in NumPy

HP = dict(eps_low=0.2, eps_high=0.28, clip_cov_ratio=0.05, clip_cov_lb=0.05, clip_cov_ub=1.0)


def jax_loss(b, hp, uniforms):
    mask = b["mask"] * b["valid"][:, None, None]
    with jax.enable_x64(True):
        old, adv, m = jnp.asarray(b["logp_old"]), jnp.asarray(b["adv"])[..., None], jnp.asarray(mask)
        u = None if uniforms is None else jnp.asarray(uniforms)

        def loss(lp):
            return batch.surrogate("clip_cov", (lp - old) * m, lp, adv, Hyper(**hp), mask=m, logp_old=old, uniforms=u)

        value, grad = jax.jit(lambda lp: (loss(lp), jax.grad(lambda x: (loss(x) * m).sum())(lp)))(
            jnp.asarray(b["logp"]))
    return mask, np.asarray(value), np.asarray(grad)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_verl_with_the_uniforms_as_its_permutation(seed):
    """Values and gradients against verl's steps in NumPy, the candidates ordered by the step's uniforms; three
    draws cut different tokens."""
    b = make_batch(seed=12)
    u = np.random.default_rng(seed).random(b["logp"].shape)
    mask, got, grad = jax_loss(b, HP, u)
    want, want_grad = np_clip_cov_batch(b["logp"], b["logp_old"], mask, b["adv"], HP, uniforms=u)
    np.testing.assert_allclose(got * mask, want * mask, **TOL)
    np.testing.assert_allclose(grad, want_grad * mask, **TOL)


def test_the_draws_differ_and_cut_the_share_asked():
    b = make_batch(seed=12)
    mask = b["mask"] * b["valid"][:, None, None]
    hp = Hyper(**HP)
    cuts = []
    for seed in range(3):
        u = jnp.asarray(np.random.default_rng(seed).random(mask.shape))
        cuts.append(np.asarray(clip_cov_cut(jnp.asarray(b["adv"])[..., None], jnp.asarray(b["logp"]),
                                            jnp.asarray(b["logp"] - b["logp_old"]), jnp.asarray(mask), hp, u)))
    assert all(c.sum() == int(0.05 * mask.sum()) == 3 for c in cuts)  # 3 of the 13 candidates
    assert len({c.tobytes() for c in cuts}) == 3


def test_by_hand():
    """Four tokens, A = (2, 2, -2, 0), logp = log(0.5, 0.25, 0.5, 0.5), on-policy (w = 1, nothing held): mean A
    = 0.5, mean logp = log(0.5) - log(2)/4; cov = (1.5 x 0.173, 1.5 x -0.520, -2.5 x 0.173, -0.5 x 0.173) = (0.260,
    -0.780, -0.433, -0.087). The band (0.1, 5) holds token 0 alone: its loss -2 w is cut, the rest is -A w."""
    logp = jnp.log(jnp.asarray([[[0.5, 0.25], [0.5, 0.5]]]))
    adv = jnp.asarray([[[2.0, 2.0], [-2.0, 0.0]]])
    mask = jnp.ones((1, 2, 2))
    hp = Hyper(eps_low=0.2, eps_high=0.2, clip_cov_ratio=0.5, clip_cov_lb=0.1, clip_cov_ub=5.0)
    got = batch.surrogate("clip_cov", jnp.zeros_like(logp), logp, adv, hp, mask=mask)
    np.testing.assert_allclose(np.asarray(got), [[[0.0, -2.0], [2.0, 0.0]]], rtol=1e-6)


def test_reductions():
    """A band no covariance reaches gives the clip surrogate; a share of 1 cuts every candidate of the band."""
    b = make_batch(seed=13)
    mask = b["mask"] * b["valid"][:, None, None]
    u = np.random.default_rng(5).random(mask.shape)
    _, empty, _ = jax_loss(b, dict(HP, clip_cov_lb=50.0, clip_cov_ub=60.0), u)
    with jax.enable_x64(True):
        clip = batch.surrogate("clip", jnp.asarray(b["logp"] - b["logp_old"]), jnp.asarray(b["logp"]),
                               jnp.asarray(b["adv"])[..., None], Hyper(**HP), mask=jnp.asarray(mask))
    np.testing.assert_allclose(empty * mask, np.asarray(clip) * mask, **TOL)
    _, full, _ = jax_loss(b, dict(HP, clip_cov_ratio=1.0, clip_cov_lb=-50.0, clip_cov_ub=50.0), u)
    a = b["adv"][..., None] * np.ones_like(mask)
    w = np.exp(b["logp"] - b["logp_old"])
    held = -a * np.clip(w, 0.8, 1.28) > -a * w
    np.testing.assert_allclose(full * mask, np.where(held, np.asarray(clip), 0.0) * mask, **TOL)


def test_the_draw_is_uniform_over_the_candidates():
    """Three candidates with one cut: over 3000 steps' uniforms each is cut with frequency 1/3 within 4 standard
    errors, sqrt((1/3)(2/3)/3000) = 0.0086 (seed words [0, 7], fixed)."""
    logp = jnp.log(jnp.asarray([[[0.5, 0.5, 0.5, 0.05]]]))
    adv = jnp.asarray([[[2.0, 2.0, 2.0, -2.0]]])  # the first three share one covariance, the fourth is outside
    mask = jnp.ones((1, 1, 4))
    hp = Hyper(clip_cov_ratio=0.25, clip_cov_lb=0.0, clip_cov_ub=1.0)  # covariances 0.576 x 3 and 5.18
    seed = jnp.asarray([0, 7], jnp.uint32)
    cut = jax.jit(jax.vmap(lambda s: clip_cov_cut(adv, logp, jnp.zeros_like(logp), mask, hp,
                                                  step_uniforms(seed, s, mask.shape, "fast"))))(jnp.arange(3000))
    freq = np.asarray(cut).reshape(3000, 4).mean(0)
    assert np.all(np.asarray(cut).reshape(3000, 4).sum(1) == 1) and freq[3] == 0.0
    np.testing.assert_allclose(freq[:3], 1 / 3, atol=4 * np.sqrt(2 / 9 / 3000))


def test_step_uniforms_are_a_function_of_seed_and_step():
    seed = jnp.asarray([0, 3], jnp.uint32)
    a, b, c = (np.asarray(step_uniforms(seed, s, (2, 3, 4), "fast")) for s in (5, 5, 6))
    assert (a == b).all() and not (a == c).all() and ((0 <= a) & (a < 1)).all()


@pytest.mark.heavy  # one compiled update (about 10 s on the shared cores)
def test_the_update_hands_the_step_uniforms_to_the_surrogate():
    """A surrogate registered with reads_uniforms=True finds the step's uniforms in its Batch (the update draws them
    only for such a surrogate): one update on a bandit runs and moves the policy by them."""
    from tabsim.config.static import make_env, schedule
    from tabsim.runtime.run import algo_spec
    from tabsim.sim.engine import init_state
    from tabsim.sim.update import make_update

    @register_surrogate("uniform_probe", clipped=False, batch=True, reads_uniforms=True)
    def probe(b):
        return -b.uniforms * b.logp  # fails on None: the update did not hand them over

    try:
        cfg = resolve({"task": {"n_prompts": 2, "n_answers": 4, "n_correct": 1},
                       "train": {"steps": 1, "batch_size": 2, "group_size": 4, "seeds": 1, "pass_k": [1],
                                 "maj_k": [], "metrics": ["pass1"]},
                       "algo": {"surrogate": "uniform_probe"}, "arms": {"arms": ["frozen", "true"]}})
        env, algo = make_env(cfg), algo_spec(cfg)
        hp = Hyper(**{k: np.float32(v) for k, v in cfg.hyper_values().items()})
        update = make_update(env, algo, schedule(cfg), tuple(cfg.arms.arms))
        with jax.disable_jit():
            task, state = init_state(env, algo, jnp.asarray([0, 1], jnp.uint32), hp)
        after, _ = jax.jit(update)(state, task, 1, hp)  # one compile: faster than op by op
        assert np.abs(np.asarray(after.logits) - np.asarray(state.logits)).max() > 0
    finally:
        SURROGATES.unregister("uniform_probe")


def test_a_band_upside_down_is_refused_in_one_line():
    with pytest.raises(ConfigError, match=r"algo.clip_cov_lb: .*clip_cov_lb < clip_cov_ub = 1, got 2$"):
        resolve({"algo": {"surrogate": "clip_cov", "clip_cov_lb": 2.0, "clip_cov_ub": 1.0}})
