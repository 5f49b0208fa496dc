"""NGRPO, RAFT, AsymRE and PVPO by hand and by their equivalences, and the context an estimator may read."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tabsim.sim.algos import ESTIMATORS, AlgoSpec, advantages, register_estimator
from tabsim.sim.algos import batch
from tabsim.sim.algos.context import estimator_context, reference_success
from tabsim.sim.envs.bandit import BanditEnv
from tabsim.sim.expected import check
from tabsim.sim.params import Hyper
from tabsim.sim.update import Schedule

BESSEL = Hyper(std_ddof=1.0, std_eps=1e-6)  # NGRPO's released trainer: torch.std, eps 1e-6


def est(name, rewards, hp=BESSEL, context=None):
    r = jnp.asarray(rewards, jnp.float32)
    return np.asarray(batch.estimate(name, r, lengths=jnp.ones_like(r), valid=jnp.ones(r.shape[0]), hp=hp,
                                     context=context))


def test_ngrpo_by_hand():
    """1 of 8 right: mean 2/9 and Bessel std sqrt(14/72) over the 9 values -> +1.764 / -0.504 (GRPO gives
    +2.475 / -0.354); all wrong: -(1/9) / (1/3) = -1/3 = -1/sqrt(G + 1); all right: 0."""
    one = [1.0] + [0.0] * 7
    a = est("ngrpo", [one, [0.0] * 8, [1.0] * 8])
    std = math.sqrt(14 / 72)
    np.testing.assert_allclose(a[0], [(7 / 9) / (std + 1e-6)] + [-(2 / 9) / (std + 1e-6)] * 7, rtol=1e-5)
    np.testing.assert_allclose(a[0, :2], [1.7638, -0.5040], atol=1e-4)
    np.testing.assert_allclose(a[1], -1.0 / 3.0, rtol=1e-5)
    assert np.all(a[2] == 0.0)
    assert np.isfinite(est("ngrpo", [[1.0] * 4], hp=Hyper(std_ddof=1.0, std_eps=0.0))).all()


@pytest.mark.parametrize("G,k", [(4, 0), (4, 1), (8, 3), (8, 7)])
def test_ngrpo_is_grpo_on_the_group_with_the_virtual_answer(G, k):
    """The equivalence that holds: NGRPO on k of G right is GRPO on k + 1 of G + 1 right, real answers only."""
    r = [1.0] * k + [0.0] * (G - k)
    np.testing.assert_allclose(est("ngrpo", [r])[0], est("grpo", [r + [1.0]])[0, :G], rtol=1e-6, atol=1e-7)


def test_ngrpo_is_not_grpo_on_mixed_groups():
    """What does not hold: NGRPO leaves GRPO's mixed groups unchanged (only homogeneous ones gaining a signal).
    The virtual answer moves every group's mean and std, and the real answers' advantages no longer sum to 0."""
    r = [[1.0, 1.0, 0.0, 0.0]]
    n, g = est("ngrpo", r), est("grpo", r)
    assert np.abs(n - g).max() > 0.1
    assert abs(g.sum()) < 1e-6 and n.sum() < -0.1


def test_raft_keeps_only_rewarded_answers():
    np.testing.assert_array_equal(est("raft", [[1.0, 0.0, 1.0, 0.0], [0.0] * 4]), [[1, 0, 1, 0], [0] * 4])
    np.testing.assert_array_equal(est("raft", [[1.0, -1.0, 0.5]]), [[1.0, 0.0, 0.5]])  # max(r, 0), as released


def test_asymre_shifts_the_baseline():
    r = [[1.0, 0.0, 0.0, 0.0], [0.0] * 4]
    np.testing.assert_allclose(est("asymre", r, Hyper(baseline_shift=-0.1)),
                               [[0.85, -0.15, -0.15, -0.15], [0.1] * 4], rtol=1e-6)
    np.testing.assert_array_equal(est("asymre", r, Hyper(baseline_shift=0.0)), est("dr_grpo", r, Hyper()))


def test_pvpo_subtracts_the_reference_success_rate():
    got = est("pvpo", [[1.0, 0.0], [0.0, 0.0]], context={"p0": jnp.asarray([0.25, 0.6])})
    np.testing.assert_allclose(got, [[0.75, -0.25], [-0.6, -0.6]], rtol=1e-6)


def test_context_fields_on_a_bandit_by_hand():
    """One node per prompt: an answer's seq_logp is log pi(a), its entropy the node's, p0 the prior's mass on the
    correct answers; only the declared fields are computed."""
    env = BanditEnv(n_prompts=3, n_answers=4, n_correct=1, offline_samples=0)
    task = env.init_task(jnp.asarray([0, 1], jnp.uint32), Hyper())
    logits = jnp.asarray(np.random.default_rng(0).normal(size=(3, 4)), jnp.float32)
    idx = jnp.asarray([2, 0])
    rollout = env.rollout(jnp.asarray([0, 1], jnp.uint32), 0, logits[idx], 5)
    ctx = estimator_context(env, batch.CONTEXT_FIELDS, task=task, idx=idx, every=False, logits=logits,
                            rollout=rollout)
    logpi = np.asarray(jax.nn.log_softmax(logits[idx], -1))
    answers = np.asarray(rollout.answers)
    np.testing.assert_array_equal(np.asarray(ctx["answers"]), answers)
    np.testing.assert_array_equal(np.asarray(ctx["prompts"]), [2, 0])
    np.testing.assert_allclose(ctx["seq_logp"], np.take_along_axis(logpi, answers, 1), rtol=1e-6)
    ref = np.asarray(task.prior_logits)[[2, 0]]
    np.testing.assert_allclose(ctx["seq_logp_ref"], np.take_along_axis(ref, answers, 1), rtol=1e-6)
    np.testing.assert_allclose(ctx["entropy"], np.broadcast_to(-(np.exp(logpi) * logpi).sum(-1)[:, None], (2, 5)),
                               rtol=1e-6)
    p0 = (np.exp(np.asarray(task.prior_logits)) * np.asarray(task.correct)).sum(-1)
    np.testing.assert_allclose(ctx["p0"], p0[[2, 0]], rtol=1e-6)
    np.testing.assert_allclose(reference_success(env, task), p0, rtol=1e-6)
    only = estimator_context(env, ("p0",), task=task, idx=idx, every=False, logits=logits, rollout=rollout)
    assert set(only) == {"p0"}


def test_reads_are_checked_in_one_line():
    try:
        register_estimator("ctx_bad_field", batch=True, reads=("correct",))(lambda b: b.rewards)
        with pytest.raises(ValueError, match="reads=.*'correct'.*may read answers"):
            batch.context_reads("ctx_bad_field")
        register_estimator("ctx_no_batch", reads=("p0",))(lambda r, **kw: r)
        with pytest.raises(ValueError, match="needs batch=True"):
            batch.context_reads("ctx_no_batch")
    finally:
        for n in ("ctx_bad_field", "ctx_no_batch"):
            if n in ESTIMATORS:
                ESTIMATORS.unregister(n)


def test_a_users_context_estimator_is_probed_and_needs_its_context():
    """The probe hands a user's context estimator plausible fields (a histogram reader runs); called without
    the context it declared, advantages() refuses in one line."""
    def histogram(b):  # the share of the group that drew the same answer
        same = (b.answers[:, :, None] == b.answers[:, None, :]).mean(-1)
        return (b.rewards - b.rewards.mean(-1, keepdims=True)) * same

    register_estimator("ctx_hist", batch=True, reads=("answers",))(histogram)
    try:
        r = jnp.asarray([[1.0, 0.0, 0.0, 1.0]])
        adv = advantages(AlgoSpec(estimator="ctx_hist"), r, lengths=jnp.ones_like(r), valid=jnp.ones(1), hp=Hyper(),
                         context={"answers": jnp.asarray([[0, 1, 2, 0]])})
        np.testing.assert_allclose(adv, [[0.25, -0.125, -0.125, 0.25]], rtol=1e-6)
        traced = jax.jit(lambda r, a: advantages(AlgoSpec(estimator="ctx_hist"), r, lengths=jnp.ones_like(r),
                                                 valid=jnp.ones(1), hp=Hyper(), context={"answers": a}))
        np.testing.assert_allclose(traced(r, jnp.asarray([[0, 1, 2, 0]])), adv, rtol=1e-6)  # probed while traced
        with pytest.raises(ValueError, match="reads answers, which this caller does not compute"):
            advantages(AlgoSpec(estimator="ctx_hist"), r, lengths=jnp.ones_like(r), valid=jnp.ones(1), hp=Hyper())
    finally:
        ESTIMATORS.unregister("ctx_hist")


def test_expected_flow_runs_the_count_only_ones_and_refuses_pvpo():
    env, sched = BanditEnv(n_prompts=4, n_answers=4, n_correct=1, offline_samples=0), Schedule(batch_size=4,
                                                                                               group_size=4)
    for name in ("ngrpo", "raft", "asymre"):
        check(env, AlgoSpec(estimator=name), sched, ("true",))
    with pytest.raises(ValueError, match="'pvpo' has no exact flow: its baseline is each prompt's reference"):
        check(env, AlgoSpec(estimator="pvpo"), sched, ("true",))
