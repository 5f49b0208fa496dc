"""The engine's closed-form one-node gradient against ``jax.grad`` of the loss it replaces.

Every composition the closed form claims (:func:`tabsim.sim.algos.closed_form.supports`) is compared in
float64 with the autodiff gradient of :func:`tabsim.sim.algos.policy_loss` on the same batch (a filtered
group included), to 1e-10; then whole runs through each path are compared in float32.
"""
from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tabsim as ts
from tabsim.sim.algos import AGGREGATIONS, AlgoSpec, closed_form, policy_loss
from tabsim.sim.envs.bandit import BanditEnv
from tabsim.sim.params import Hyper

from f32_tolerance import f32_bound, f64_bound  # tests/core: the float32 error bounds
from jit_task import init_task  # tests/core: the task from one compiled program
from update_tolerance import engine_update_tolerance, loss_derivative_bound

KL_CHOICES = [("none", "k3")] + [("loss", k) for k in ("k1", "k2", "k3", "low_var_kl", "exact", "ref_ce")] + [("reward", "k1")]
SPECS = [AlgoSpec(surrogate=s, aggregation=agg, kl_placement=place, kl=kl, entropy_bonus=ent)
         for s, agg, (place, kl), ent in itertools.product(("reinforce", "cispo"), sorted(AGGREGATIONS), KL_CHOICES,
                                                           (False, True))]


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def batch(seed=0, B=5, G=6, A=7):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(B, A))
    answers = rng.integers(0, A, size=(B, G))
    valid = np.ones(B)
    valid[1] = 0.0  # a group removed by the filter
    mask = np.broadcast_to(valid[:, None, None], (B, G, 1)).copy()
    adv = rng.normal(size=(B, G)) * valid[:, None]
    logq_old = log_softmax(logits + rng.normal(scale=0.4, size=(B, A)))
    logp_old = np.take_along_axis(logq_old, answers, 1)[..., None]
    ref = log_softmax(rng.normal(size=(B, A)))  # normalised (in float64), as a task prior
    return logits, answers, mask, adv, logp_old, ref


def hyper():
    return Hyper(beta=0.3, ent_coef=0.05, eps_low=0.1, eps_high=0.15)


def _pairwise(spec):
    """Whether ``spec`` is in the default run: 48 of the 192 specs, one per (aggregation, KL) pair, with the
    surrogate and the entropy bonus chosen so that every pair of values of any two of the four choices
    appears (a covering array of strength 2); the whole product runs with ``-m heavy``."""
    a, k = sorted(AGGREGATIONS).index(spec.aggregation), KL_CHOICES.index((spec.kl_placement, spec.kl))
    return ("reinforce", "cispo").index(spec.surrogate) == (a + k) % 2 and int(spec.entropy_bonus) == (a + k // 2) % 2


@pytest.mark.parametrize("spec", [pytest.param(s, marks=() if _pairwise(s) else pytest.mark.heavy) for s in SPECS],
                         ids=lambda s: f"{s.surrogate}-{s.aggregation}-{s.kl_placement}-{s.kl}"
                         f"-{'ent' if s.entropy_bonus else 'noent'}")
def test_closed_form_equals_autodiff(spec):
    assert closed_form.supports(spec)
    logits, answers, mask, adv, logp_old, ref = batch()
    hp = hyper()
    with jax.enable_x64(True):
        args = [jnp.asarray(x) for x in (logits, answers, mask, adv, logp_old, ref)]
        lg, ans, m, a, lpo, rf = args

        def loss(z):
            return policy_loss(spec, jax.nn.log_softmax(z, -1)[:, None, None, :], ans[..., None], m, a, lpo,
                               rf[:, None, None, :], hp)

        want, aux_want = jax.grad(loss, has_aux=True)(lg)
        got, aux = closed_form.gradient(spec, lg, ans, m, a, lpo if closed_form.needs_old_logp(spec) else None,
                                        rf, hp)
    assert np.abs(np.asarray(want)).max() > 1e-3  # a real gradient
    # float64, two summation orders: a row sums the G answers' terms c_g (onehot - pi) / G (group-sum; the
    # means weigh less), with mean |c_g| <= c (update_tolerance's bound scaled by max|adv|, for the
    # unnormalised advantages drawn here), each term through
    # the row's log-softmax (3A roundings) and about 10 of the loss chain; the clip fraction is a count
    # (exact) over a count, one rounding, then a mean over answers and groups (two more)
    G, A = answers.shape[1], logits.shape[1]
    c = loss_derivative_bound(logits, ref, G, hp) * max(1.0, np.abs(adv).max())
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=0, atol=2 * f64_bound(G + 3 * A + 10, c))
    np.testing.assert_allclose(float(aux["clip_frac"]), float(aux_want["clip_frac"]), rtol=0,
                               atol=2 * f64_bound(3, 1.0))


def test_cispo_weight_clips_in_the_test_batch():
    """The CISPO cases above exercise the clipped weight (else they would only test REINFORCE twice)."""
    logits, answers, mask, adv, logp_old, ref = batch()
    logp = np.take_along_axis(log_softmax(logits), answers, 1)
    w = np.exp(logp - logp_old[..., 0])
    hp = hyper()
    assert (w < 1 - hp.eps_low).any() and (w > 1 + hp.eps_high).any()


@pytest.mark.parametrize("surrogate", ["clip", "dual_clip", "importance", "sapo"])
def test_surrogates_with_a_ratio_gradient_fall_back(surrogate):
    assert not closed_form.supports(AlgoSpec(surrogate=surrogate))


def test_a_registered_kl_without_a_closed_form_falls_back():
    from tabsim.sim.algos import KL_ESTIMATORS, register_kl

    register_kl("custom_kl")(lambda *args: KL_ESTIMATORS["k3"](*args))
    try:
        spec = AlgoSpec(surrogate="reinforce", kl_placement="loss", kl="custom_kl")
        assert not closed_form.supports(spec)
        assert closed_form.supports(AlgoSpec(surrogate="reinforce", kl_placement="none", kl="custom_kl"))
    finally:
        KL_ESTIMATORS.unregister("custom_kl")


UPDATES = [
    {"preset": "paper"},
    {"preset": "cispo", "algo": {"kl_placement": "loss", "kl": "exact", "beta": 0.05, "ent_coef": 0.01,
                                 "epochs": 2, "minibatches": 2}},
    {"preset": "gpg", "algo": {"kl_placement": "reward", "kl": "k1", "beta": 0.02}, "train": {"replacement": True}},
    {"preset": "paper", "task": {"env": "tree", "tree": {"depth": 1, "branching": 6}}},
]


# the depth-1 tree's closed form is the bandit's (test_closed_form_equals_autodiff checks every composition)
@pytest.mark.parametrize("cfg", [*UPDATES[:3], pytest.param(UPDATES[3], marks=pytest.mark.heavy)],
                         ids=["paper", "cispo-reuse-exact-kl", "gpg-reward-kl-replacement", "depth1-tree"])
def test_engine_updates_agree_between_the_two_paths(cfg, monkeypatch):
    """One engine update (sampling, rewards, advantages, epochs x minibatches, optimizer, scatter into the
    table) from the same trained state, through the closed form and through autodiff.

    SGD only: Adam's first step is ``g / (|g| + eps)``, which turns the float32 noise of a logit whose
    gradient is zero in exact arithmetic (sum_g A_g = 0) into a step of size ``lr`` with either path.
    Whole runs are not compared either: an ulp of difference in the logits can flip an inverse-CDF draw
    whose uniform sits on a boundary, after which the trajectories differ by design.
    """
    from tabsim.runtime import run as api
    from tabsim.sim.engine import TrainState, make_update, optimizer
    from tabsim.sim.rng import seed_array
    from tabsim.sim.update import sample_prompts

    base = {**cfg, "task": {"n_prompts": 12, "n_answers": 6, "n_correct": 2, "heterogeneity": 8.0,
                            **cfg.get("task", {})},
            "arms": {"arms": ["random", "majority", "true"]},
            "train": {**cfg.get("train", {}), "seeds": 1, "steps": 10, "batch_size": 8}}
    c = ts.config.resolve(base)
    env, spec, sched = api.make_env(c), api.algo_spec(c), api.schedule(c)
    assert env.single_node and closed_form.supports(spec)
    hp = Hyper(**c.hyper_values(c.grid()[0]))
    seed = jnp.asarray(seed_array([5])[0])
    task = init_task(env, seed, hp)
    rng = np.random.default_rng(0)
    logits = task.prior_logits + jnp.asarray(rng.normal(scale=0.5, size=task.prior_logits.shape), jnp.float32)
    results = {}
    for path in ("closed", "autodiff"):
        if path == "autodiff":
            monkeypatch.setattr(closed_form, "supports", lambda s: False)
        update = jax.jit(make_update(env, spec, sched, tuple(c.arms.arms)))  # the arm traced, as in the engine
        outs = []
        for step in range(4):
            state = TrainState(logits=logits, opt_state=optimizer(spec, hp).init(logits), seed=seed,
                               step=jnp.asarray(step, jnp.int32))
            for arm in range(3):
                new, diag = update(state, task, jnp.asarray(arm, jnp.int32), hp)
                outs.append((np.asarray(new.logits), float(diag["clip_frac"])))
        results[path] = outs
    # float32 on both paths: the bound of the update's terms (update_tolerance), with a prompt drawn
    # `repeats` times into one batch at most; the clip fraction counts the same 0/1 indicators (exact
    # sums) and rounds only its means over tokens and over the steps
    repeats = max(np.bincount(np.asarray(sample_prompts(env, sched, seed, jnp.asarray(s)))).max() for s in range(4))
    moved = max(np.abs(b - np.asarray(logits)).max() for b, _ in results["autodiff"])
    tol = engine_update_tolerance(spec, sched, hp, logits, task.prior_logits, repeats, moved)["table"]
    for (a, ca), (b, cb) in zip(results["closed"], results["autodiff"]):
        np.testing.assert_allclose(a, b, rtol=0, atol=tol)
        assert ca == pytest.approx(cb, abs=f32_bound(spec.epochs * spec.minibatches + 1, 1.0))
    assert moved > 1e-3  # the updates do move the table


def test_offline_label_is_drawn_only_when_an_arm_reads_it():
    from tabsim.sim.params import Hyper as H
    from tabsim.sim.rng import seed_array

    seed = jnp.asarray(seed_array([3])[0])
    with_label = init_task(BanditEnv(n_prompts=6, n_answers=5, offline_samples=16), seed, H())
    without = init_task(BanditEnv(n_prompts=6, n_answers=5, offline_samples=0), seed, H())
    assert (np.asarray(with_label.offline_label) >= 0).all()
    np.testing.assert_array_equal(np.asarray(without.offline_label), -1)
    np.testing.assert_array_equal(np.asarray(without.prior_logits), np.asarray(with_label.prior_logits))
    cfg = {"arms": {"arms": ["majority_offline", "incorrect", "true"]},
           "task": {"n_prompts": 8, "n_answers": 5}, "train": {"seeds": 2, "steps": 5, "batch_size": 4}}
    fin = ts.run(cfg, progress=False).final()
    assert fin["reward_mean"].gt(0).groupby(fin["arm"], observed=True).any().all()  # offline arms pay


def test_max_grad_norm_clips_the_update():
    """``algo.max_grad_norm`` compiles the global-norm clip: a tiny norm slows learning, a huge one is
    the unclipped run exactly."""
    base = {"preset": "paper", "arms": {"arms": ["true"]}, "task": {"n_prompts": 8},
            "train": {"seeds": 2, "steps": 20, "batch_size": 8}}
    free = ts.run(base, progress=False).final()["pass1"].values
    huge = ts.run({**base, "algo": {"max_grad_norm": 1e6}}, progress=False).final()["pass1"].values
    tiny = ts.run({**base, "algo": {"max_grad_norm": 1e-3}}, progress=False).final()["pass1"].values
    frozen = ts.run({**base, "arms": {"arms": ["frozen"]}}, progress=False).final()["pass1"].values
    # the clip's factor min(1, 1e6 / |g|) is exactly 1.0 (|g| < 10: each of 8 prompts' rows is at most
    # 2 + 2 beta) and g * 1.0 is g: the clipped program adds the same steps to the same logits, so every
    # draw and every pass@1 is the same, bit for bit
    np.testing.assert_array_equal(huge, free)
    # each step moves the logits by at most lr * 1e-3: 20 steps change pass@1 by well under 1e-2
    assert np.abs(tiny - frozen).max() < 1e-2 < np.abs(free - frozen).max()
