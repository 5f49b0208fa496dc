"""NGRPO, RAFT, AsymRE and PVPO by hand and by their equivalences, and the context an estimator may read."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tabsim.sim.algos import ESTIMATORS, AlgoSpec, advantages, policy_loss, register_estimator
from tabsim.sim.algos import batch
from tabsim.sim.algos.context import estimator_context, reference_success
from tabsim.sim.envs.bandit import BanditEnv
from tabsim.sim.expected import check
from tabsim.sim.params import Hyper
from tabsim.sim.update import Schedule

from jit_task import init_task  # tests/core: the task from one compiled program

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


def test_grpo_lead_by_hand():
    """1 of 8 right: the success's z-score times w(1/8) = 0.4 + 1.1 / (1 + e^-6.25) = 1.4979, the failures' times
    w(7/8) = 0.4 + 1.1 / (1 + e^1.25) = 0.6449; 7 of 8 right: the mirror image; homogeneous groups 0."""
    one, seven = [1.0] + [0.0] * 7, [1.0] * 7 + [0.0]
    a, z = est("grpo_lead", [one, seven, [0.0] * 8]), est("grpo", [one, seven, [0.0] * 8])
    w_hard, w_easy = 0.4 + 1.1 / (1 + math.exp(-6.25)), 0.4 + 1.1 / (1 + math.exp(1.25))
    np.testing.assert_allclose(a[0], z[0] * np.array([w_hard] + [w_easy] * 7), rtol=1e-6)
    np.testing.assert_allclose(a[1], z[1] * np.array([w_easy] * 7 + [w_hard]), rtol=1e-6)
    np.testing.assert_allclose([w_hard, w_easy], [1.4979, 0.6449], atol=1e-4)
    assert np.all(a[2] == 0.0)


@pytest.mark.parametrize("k", [1, 2, 4, 7])
def test_disco_b_weights_are_flat_in_the_success_rate(k):
    """G / n+ and -G / n-: every mixed group's weights sum to 0 and their magnitudes to 2G whatever its success
    rate (GRPO's z-score weights sum to 2 G sqrt(p (1 - p)) in magnitude, with the population std);
    homogeneous groups get 0."""
    G = 8
    r = [1.0] * k + [0.0] * (G - k)
    a, z = est("disco_b", [r, [1.0] * G]), est("grpo", [r], Hyper(std_ddof=0.0, std_eps=0.0))
    np.testing.assert_allclose(a[0], [G / k] * k + [-G / (G - k)] * (G - k), rtol=1e-6)
    assert abs(a[0].sum()) < 1e-5 and abs(np.abs(a[0]).sum() - 2 * G) < 1e-4
    p = k / G
    np.testing.assert_allclose(np.abs(z).sum(), 2 * G * math.sqrt(p * (1 - p)), rtol=1e-5)
    assert np.all(a[1] == 0.0)


def test_disco_b_with_reinforce_and_seq_mean_token_mean_is_the_authors_score_term():
    """With -A log pi summed as seq-mean-token-mean, the loss is -(1/B) sum_q (mean_{o+} s - mean_{o-} s), s the
    answer's mean token log-probability: DisCO-b's log-L objective (its KL constraint apart)."""
    rng = np.random.default_rng(0)
    B, G, T = 3, 4, 3
    r = np.array([[1.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    lengths = rng.integers(1, T + 1, size=(B, G))
    mask = (np.arange(T) < lengths[..., None]).astype(np.float32)
    logp = np.log(rng.uniform(0.1, 0.9, size=(B, G, T)))
    spec = AlgoSpec(estimator="disco_b", surrogate="reinforce", aggregation="seq-mean-token-mean",
                    kl_placement="none")
    adv = advantages(spec, jnp.asarray(r, jnp.float32), lengths=jnp.asarray(lengths, jnp.float32),
                     valid=jnp.ones(B), hp=Hyper())
    loss, _ = policy_loss(spec, None, jnp.zeros((B, G, T), jnp.int32), jnp.asarray(mask), adv,
                          jnp.asarray(logp, jnp.float32), None, Hyper(), logp=jnp.asarray(logp, jnp.float32))
    s = (logp * mask).sum(-1) / mask.sum(-1)
    want = 0.0
    for q in range(B):
        pos, neg = r[q] == 1, r[q] == 0
        if pos.any() and neg.any():
            want += s[q][pos].mean() - s[q][neg].mean()
    np.testing.assert_allclose(float(loss), -want / B, rtol=1e-5)


def test_edge_divides_by_the_answers_entropy():
    """The z-score times mean_batch(H) / H_i: equal entropies leave GRPO's advantages; a twice as uncertain answer
    gets half the advantage of an equally rewarded confident one (the authors' division, not H_i / mean H)."""
    r = [[1.0, 1.0, 0.0, 0.0]]
    flat = est("edge", r, context={"entropy": jnp.ones((1, 4))})
    np.testing.assert_allclose(flat, est("grpo", r), rtol=1e-6)
    h = jnp.asarray([[1.0, 2.0, 1.0, 1.0]])
    a, z = est("edge", r, context={"entropy": h}), est("grpo", r)
    np.testing.assert_allclose(a[0], z[0] * 1.25 / np.array([1.0, 2.0, 1.0, 1.0]), rtol=1e-6)
    assert a[0, 1] == pytest.approx(a[0, 0] / 2)


def test_s_grpo_gates_unbalanced_groups():
    """p = 0.1, G = 8: 1 right -> t = 0.03125, w* = 0.8 t (1 - t) / (sqrt(q (1 - q)) sqrt(t (1 - t))) = 0.4209; 4 right
    -> w* = 0.8; 7 right mirrors 1; p = 0 leaves the z-score (w* = 1 up to the 1e-8 in the roots); a group within p
    of all-wrong (here p = 0.2 and 1 of 8) gets 0."""
    rows = [[1.0] + [0.0] * 7, [1.0] * 4 + [0.0] * 4, [1.0] * 7 + [0.0]]
    z = est("grpo", rows)
    np.testing.assert_allclose(est("s_grpo", rows, Hyper(std_ddof=1.0, std_eps=1e-6, sgrpo_noise=0.1)),
                               z * np.array([[0.42088], [0.8], [0.42088]]), rtol=1e-4)
    np.testing.assert_allclose(est("s_grpo", rows, Hyper(std_ddof=1.0, std_eps=1e-6, sgrpo_noise=0.0)), z,
                               rtol=1e-6)
    assert np.all(est("s_grpo", rows[:1], Hyper(std_ddof=1.0, std_eps=1e-6, sgrpo_noise=0.2)) == 0.0)


def test_context_fields_on_a_bandit_by_hand():
    """One node per prompt: an answer's seq_logp is log pi(a), its entropy the node's, p0 the prior's mass on the
    correct answers; only the declared fields are computed."""
    env = BanditEnv(n_prompts=3, n_answers=4, n_correct=1, offline_samples=0)
    task = init_task(env, jnp.asarray([0, 1], jnp.uint32), Hyper())
    logits = jnp.asarray(np.random.default_rng(0).normal(size=(3, 4)), jnp.float32)
    idx = jnp.asarray([2, 0])
    # compiled: run eagerly, each operation is compiled on its own
    rollout = jax.jit(env.rollout, static_argnums=3)(jnp.asarray([0, 1], jnp.uint32), 0, logits[idx], 5)
    ctx = jax.jit(lambda task, idx, logits, rollout: estimator_context(
        env, batch.CONTEXT_FIELDS, task=task, idx=idx, every=False, logits=logits, rollout=rollout))(
        task, idx, logits, rollout)
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
    np.testing.assert_allclose(jax.jit(lambda t: reference_success(env, t))(task), p0, rtol=1e-6)
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
    for name in ("ngrpo", "raft", "asymre", "grpo_lead", "disco_b", "s_grpo"):
        check(env, AlgoSpec(estimator=name), sched, ("true",))
    with pytest.raises(ValueError, match="'pvpo' has no exact flow: its baseline is each prompt's reference"):
        check(env, AlgoSpec(estimator="pvpo"), sched, ("true",))
    with pytest.raises(ValueError, match="'edge' has no exact flow: it divides"):
        check(env, AlgoSpec(estimator="edge"), sched, ("true",))
