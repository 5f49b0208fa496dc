"""Behaviour policies and their importance-sampling corrections (tabsim.sim.behaviour), and the KL / reference
schedules (tabsim.sim.kl_schedule): NumPy references, values by hand, TRL's and verl's forms reimplemented from
their source, one engine step replayed outside the engine, and the config's refusals."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tabsim as ts
from tabsim.config import Config
from tabsim.runtime.run import schedule
from tabsim.sim import arms as arms_mod
from tabsim.sim import behaviour, kl_schedule
from tabsim.sim.algos import AlgoSpec, policy_loss
from tabsim.sim.engine import init_state
from tabsim.sim.params import Hyper
from tabsim.sim.update import make_update
from tabsim.sim.rng import seed_words
from tabsim.config.static import algo_spec

from jit_task import init_task  # tests/core: the task from one compiled program

# one batch of 2 prompts x 2 answers x 3 tokens: policy-at-batch-start and sampler log-probs, the last token of
# the second answer padding
LOGP_OLD = np.log(np.array([[[0.5, 0.4, 0.9], [0.2, 0.3, 0.7]], [[0.6, 0.1, 0.5], [0.9, 0.8, 0.2]]]))
LOGP_MU = np.log(np.array([[[0.25, 0.4, 0.3], [0.4, 0.1, 0.7]], [[0.2, 0.2, 0.5], [0.9, 0.2, 0.9]]]))
MASK = np.array([[[1, 1, 1], [1, 1, 0]], [[1, 1, 1], [1, 1, 1]]], float)
CAP = 2.5


def np_weights(mode, old, mu, mask, cap):
    """The four corrections written out with loops over answers and tokens."""
    B, G, T = old.shape
    if mode.startswith("token"):
        w = np.zeros((B, G, T))
        for b in range(B):
            for g in range(G):
                for t in range(T):
                    r = np.exp((old[b, g, t] - mu[b, g, t]) * mask[b, g, t])
                    w[b, g, t] = min(r, cap) if mode == "token_truncate" else (0.0 if r > cap else r)
        return w
    w = np.zeros((B, G))
    for b in range(B):
        for g in range(G):
            r = np.exp(sum((old[b, g, t] - mu[b, g, t]) * mask[b, g, t] for t in range(T)))
            w[b, g] = min(r, cap) if mode == "sequence_truncate" else (0.0 if r > cap else r)
    return w


def trl_importance_ratio(old, sampling, mask, mode, cap):
    """TRL GRPOTrainer._generate_and_score_completions' vLLM importance-sampling ratio, reimplemented from its
    source (NumPy for torch): the masked log-prob difference, summed per sequence (keepdim) for the sequence
    modes, exp, then clamp(max=cap) for *_truncate or masked_fill(ratio > cap, 0) for *_mask."""
    diff = (old - sampling) * mask
    if mode in ("sequence_mask", "sequence_truncate"):
        diff = diff.sum(-1, keepdims=True)
    ratio = np.exp(diff)
    if mode in ("sequence_truncate", "token_truncate"):
        return np.minimum(ratio, cap)
    return np.where(ratio > cap, 0.0, ratio)


def verl_is_weights(old, rollout, mask, level, threshold):
    """verl compute_rollout_correction_weights (rollout_corr_helper.py), reimplemented from its source: the log
    ratio (summed over the response for 'sequence'), clamped to +-20, exp, times the response mask, clamped
    above at the threshold."""
    log_ratio = old - rollout
    if level == "sequence":
        log_ratio = (log_ratio * mask).sum(-1, keepdims=True)
    w = np.exp(np.clip(log_ratio, -20.0, 20.0))
    w = np.broadcast_to(w, mask.shape) * mask
    return np.minimum(w, threshold)


@pytest.mark.parametrize("mode", ["token_truncate", "token_mask", "sequence_truncate", "sequence_mask"])
def test_weights_match_numpy_trl_and_verl(mode):
    w, stats = behaviour.weights(mode, jnp.asarray(LOGP_OLD), jnp.asarray(LOGP_MU), jnp.asarray(MASK), CAP)
    w = np.asarray(w)
    np.testing.assert_allclose(w, np_weights(mode, LOGP_OLD, LOGP_MU, MASK, CAP), rtol=1e-6)
    trl = trl_importance_ratio(LOGP_OLD, LOGP_MU, MASK, mode, CAP)
    np.testing.assert_allclose(w if mode.startswith("token") else w[..., None], trl, rtol=1e-6)
    if mode.endswith("truncate"):  # verl's rollout_is = token / sequence, on the answers' valid tokens
        verl = verl_is_weights(LOGP_OLD, LOGP_MU, MASK, mode.split("_")[0], CAP)
        mine = w if mode.startswith("token") else np.broadcast_to(w[..., None], MASK.shape)
        np.testing.assert_allclose(mine * MASK, verl, rtol=1e-6)
    assert 0.0 < float(stats["is_over_cap"]) < 1.0  # the batch has weights on both sides of the cap


def test_weights_by_hand():
    """Token 0 of answer (0, 0): 0.5 / 0.25 = 2 (under the cap); token 2: 0.9 / 0.3 = 3 (over 2.5). Answer (0, 0)'s
    sequence ratio 2 x 1 x 3 = 6; answer (0, 1): 0.5 x 3 = 1.5 (its padding token ignored)."""
    args = (jnp.asarray(LOGP_OLD), jnp.asarray(LOGP_MU), jnp.asarray(MASK), CAP)
    tt = np.asarray(behaviour.weights("token_truncate", *args)[0])
    tm = np.asarray(behaviour.weights("token_mask", *args)[0])
    st = np.asarray(behaviour.weights("sequence_truncate", *args)[0])
    sm = np.asarray(behaviour.weights("sequence_mask", *args)[0])
    np.testing.assert_allclose(tt[0, 0], [2.0, 1.0, 2.5], rtol=1e-6)
    np.testing.assert_allclose(tm[0, 0], [2.0, 1.0, 0.0], rtol=1e-6)
    np.testing.assert_allclose([st[0, 0], st[0, 1]], [2.5, 1.5], rtol=1e-6)
    np.testing.assert_allclose([sm[0, 0], sm[0, 1]], [0.0, 1.5], rtol=1e-6)
    assert behaviour.weights("none", *args) == (None, {})


def test_weighted_loss_is_trls():
    """TRL's _compute_loss with the correction on: per_token_loss = -min(coef_1 A, clip(coef_1) A) times the
    importance ratio, plus beta k3 (not weighted), then the 'grpo' loss (per-sequence token mean, mean over
    sequences). tabsim: the advantages times the weights, through policy_loss. Values and gradients agree."""
    rng = np.random.default_rng(0)
    B, G, T = MASK.shape
    logp_new = LOGP_OLD + rng.normal(0, 0.3, LOGP_OLD.shape)
    logp_ref = LOGP_OLD + rng.normal(0, 0.3, LOGP_OLD.shape)
    adv = np.array([[1.0, -1.0], [-0.5, 0.5]])
    beta, eps, mode = 0.04, 0.2, "token_truncate"
    ratio_is = trl_importance_ratio(LOGP_OLD, LOGP_MU, MASK, mode, CAP)

    def trl_loss(lp):
        coef_1 = jnp.exp(lp - LOGP_OLD)
        a = adv[..., None]
        per_token = -jnp.minimum(coef_1 * a, jnp.clip(coef_1, 1 - eps, 1 + eps) * a) * ratio_is
        per_token = per_token + beta * (jnp.exp(logp_ref - lp) - (logp_ref - lp) - 1)
        return ((per_token * MASK).sum(-1) / MASK.sum(-1)).mean()

    spec = AlgoSpec(aggregation="seq-mean-token-mean", kl="k3", kl_placement="loss")
    hp = Hyper(beta=beta, eps_low=eps, eps_high=eps)
    w, _ = behaviour.weights(mode, jnp.asarray(LOGP_OLD), jnp.asarray(LOGP_MU), jnp.asarray(MASK), CAP)
    a_w = behaviour.weigh(jnp.asarray(adv), w)
    logq_ref = jnp.asarray(logp_ref)[..., None]  # the KL reads the tokens' reference log-probs only (k3)

    def mine(lp):
        return policy_loss(spec, None, jnp.zeros((B, G, T), jnp.int32), jnp.asarray(MASK), a_w, jnp.asarray(LOGP_OLD),
                           logq_ref, hp, logp=lp)[0]

    lp = jnp.asarray(logp_new)
    (v_mine, g_mine), (v_trl, g_trl) = (jax.jit(jax.value_and_grad(f))(lp) for f in (mine, trl_loss))
    np.testing.assert_allclose(float(v_mine), float(v_trl), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(g_mine), np.asarray(g_trl), rtol=1e-5, atol=1e-7)


def test_weigh_shapes():
    adv = jnp.array([[1.0, 2.0]])
    np.testing.assert_allclose(behaviour.weigh(adv, jnp.array([[[3.0], [0.5]]])), [[3.0, 1.0]])  # one token: [B, G]
    np.testing.assert_allclose(behaviour.weigh(adv, jnp.array([[[3.0, 1.0], [0.5, 2.0]]])), [[[3, 1], [1, 4]]])
    np.testing.assert_allclose(behaviour.weigh(adv, jnp.array([[2.0, 0.0]])), [[2.0, 0.0]])
    assert behaviour.weigh(adv, None) is adv


def test_hinted_sampler_by_hand():
    """pi = (1/2, 1/4, 1/4), answers 1 and 2 correct, lambda 1/2: mu = (1/4, 1/8 + 1/4, 1/8 + 1/4)."""
    logits = jnp.log(jnp.array([[0.5, 0.25, 0.25]]))
    mu = np.exp(np.asarray(behaviour.hinted(logits, jnp.array([[0.0, 1.0, 1.0]]), 0.5)))
    np.testing.assert_allclose(mu, [[0.25, 0.375, 0.375]], rtol=1e-6)


def test_hints_redraw_only_the_all_wrong_groups():
    """hint_when = all_wrong (Guide): prompt 0's policy never answers correctly, so its group is drawn again from
    the hinted sampler (lambda = 1: the correct answer); prompt 1's policy always does, so its group is the
    policy's own draw and its sampler is the policy (weight 1)."""
    from tabsim.sim.update import Schedule, behaviour_roll_out, roll_out, update_plan
    cfg = ts.resolve({"preset": "grpo", "task": {"n_prompts": 2, "n_answers": 4, "n_correct": 1},
                      "train": {"batch_size": 2, "group_size": 4},
                      "algo": {"behaviour": "hint", "hint_when": "all_wrong", "hint_lambda": 1.0}})
    spec, env = algo_spec(cfg), ts.make_env(cfg)
    hp = Hyper(**cfg.hyper_values())
    seed = seed_words(3)
    task = init_task(env, seed, hp)
    correct = np.asarray(task.correct)
    logits = jnp.asarray(np.where(correct > 0, np.array([[-30.0], [30.0]]), 0.0), jnp.float32)
    plan = update_plan(env, spec, Schedule(batch_size=2, group_size=4), ("true",), None)
    idx = jnp.arange(2)

    @jax.jit  # one program: run eagerly, each operation is compiled on its own
    def draw(logits, task, seed, hp):
        mu = behaviour.table(spec, logits, task, None, seed, 0, hp)
        _, rollout, logq_old, _, _, logq_mu = behaviour_roll_out(env, spec, plan, logits, mu, task, idx, seed, 0)
        return rollout, logq_old, logq_mu, roll_out(env, spec, plan, logits, task, idx, seed, 0)[1]

    rollout, logq_old, logq_mu, first = draw(logits, task, seed, hp)
    ans = np.asarray(rollout.answers)
    assert correct[0, ans[0]].all()  # redrawn from the hint
    np.testing.assert_array_equal(ans[1], np.asarray(first.answers)[1])  # the policy's draw, kept
    np.testing.assert_array_equal(np.asarray(logq_mu)[1], np.asarray(logq_old)[1])
    np.testing.assert_allclose(np.exp(np.asarray(logq_mu)[0, 0, 0]), correct[0], atol=1e-6)


def test_stale_ring_reads_the_policy_k_updates_old():
    spec = AlgoSpec(behaviour="stale", behaviour_lag=3)
    tables = [jnp.full((2, 3), float(t)) for t in range(6)]
    ring = behaviour.init(spec, tables[0])
    assert ring.shape == (3, 2, 3)
    for t in range(6):
        mu = behaviour.table(spec, tables[t], None, ring, None, t, Hyper())
        assert float(mu[0, 0]) == max(t - 3, 0), t  # pi_{t-3}, the prior for the first 3 steps
        ring = behaviour.advance(spec, ring, tables[t], t)
    assert behaviour.init(AlgoSpec(), tables[0]) is None


def test_mismatch_noise_has_sigma():
    """The sampler's logits differ from the policy's by sigma N(0, 1): 4096 draws, mean within 4 s.e. of 0 and
    std within 4 s.e. (sigma / sqrt(2 n)) of sigma."""
    spec, sigma, n = AlgoSpec(behaviour="mismatch"), 0.3, 4096
    logits = jnp.zeros((64, 64))
    table = jax.jit(lambda step: behaviour.table(spec, logits, None, None, seed_words(1), step,
                                                 Hyper(mismatch_sigma=sigma)))
    mu = table(5)
    d = np.asarray(mu - logits).ravel()
    assert abs(d.mean()) < 4 * sigma / np.sqrt(n)
    assert abs(d.std() - sigma) < 4 * sigma / np.sqrt(2 * n)
    again = table(6)
    assert not np.allclose(np.asarray(again), np.asarray(mu))  # a fresh draw every step


def np_grpo_adv(r, eps=1e-6):
    return (r - r.mean(-1, keepdims=True)) / (r.std(-1, ddof=1, keepdims=True) + eps)


def test_stale_engine_step_replayed():
    """Step 1 of a stale (lag 1) run with token_truncate: the answers are drawn from the prior (the policy one
    update old), and the REINFORCE token-mean update is -lr mean_{b,g} w A grad log pi, w = min(pi_1 / pi_0, C):
    replayed outside the engine in NumPy."""
    cfg = ts.resolve({"preset": "grpo", "task": {"n_prompts": 4, "n_answers": 4, "n_correct": 1},
                      "train": {"steps": 2, "batch_size": 4, "group_size": 4},
                      "algo": {"surrogate": "reinforce", "kl_placement": "none", "aggregation": "token-mean",
                               "behaviour": "stale", "is_correction": "token_truncate", "is_cap": 1.05}})
    env = ts.make_env(cfg)
    spec = algo_spec(cfg)
    hp = jax.tree_util.tree_map(jnp.asarray, Hyper(**cfg.hyper_values()))
    seed = seed_words(7)
    # compiled programs throughout: run eagerly, each operation is compiled on its own
    task, state = jax.jit(lambda seed, hp: init_state(env, spec, seed, hp))(seed, hp)
    update = jax.jit(make_update(env, spec, schedule(cfg), ("true",)), static_argnums=2)
    arm = 0
    s1, _ = update(state, task, arm, hp)
    s2, _ = update(s1, task, arm, hp)
    pi0, pi1 = np.asarray(state.logits, np.float64), np.asarray(s1.logits, np.float64)
    np.testing.assert_array_equal(np.asarray(s2.behaviour[0]), np.asarray(s1.logits))  # the ring holds pi_1
    # replay step 1: every prompt in order (B = N), answers from pi_0's rows
    roll = jax.jit(env.rollout, static_argnums=3)(seed, 1, jnp.asarray(pi0, jnp.float32), 4)
    ans = np.asarray(roll.answers)
    r = np.asarray(jax.jit(lambda seed, task, answers, hp: arms_mod.rewards(arm, seed, 1, env, task, answers, hp,
                                                                            ("true",)))(seed, task, roll.answers, hp))
    adv = np_grpo_adv(r)
    lsm = lambda z: z - np.log(np.exp(z - z.max(-1, keepdims=True)).sum(-1, keepdims=True)) - z.max(-1, keepdims=True)  # noqa: E731
    l0, l1 = lsm(pi0), lsm(pi1)
    new = pi1.copy()
    for b in range(4):
        p1 = np.exp(l1[b])
        for g in range(4):
            a = ans[b, g]
            w = min(np.exp(l1[b, a] - l0[b, a]), 1.05)
            onehot = np.eye(4)[a]
            new[b] += float(hp.lr) * w * adv[b, g] * (onehot - p1) / 16
    assert np.abs(new - pi1).max() > 1e-3  # the step moved the policy
    assert (np.exp(l1[np.arange(4)[:, None], ans] - l0[np.arange(4)[:, None], ans]) > 1.05).any()  # the cap binds
    np.testing.assert_allclose(np.asarray(s2.logits), new, rtol=0, atol=2e-5)


@pytest.mark.heavy  # two compiled tree updates (about 10 s on a busy 2-core machine)
@pytest.mark.parametrize("algo", [{"behaviour": "mismatch", "mismatch_sigma": 0.5, "is_correction": "token_truncate"},
                                  {"behaviour": "stale", "behaviour_lag": 2, "is_correction": "sequence_mask",
                                   "is_cap": 1.5}])
def test_tree_behaviour_sparse_equals_dense(algo):
    """On a depth-3 tree the sparse path (the visited rows, read from mu for the rollout and from pi for the loss)
    and the dense path give the same update, with the behaviour sampler and its correction on."""
    cfg = ts.resolve({"preset": "grpo", "task": {"env": "tree", "n_prompts": 4, "n_answers": 4, "n_correct": 1,
                                                 "tree": {"depth": 3, "branching": 3}},
                      "train": {"steps": 3, "batch_size": 4, "group_size": 4}, "algo": {**algo, "beta": 0.04}})
    spec, env = algo_spec(cfg), ts.make_env(cfg)
    hp = jax.tree_util.tree_map(jnp.asarray, Hyper(**cfg.hyper_values()))
    task, state = init_state(env, spec, seed_words(4), hp)
    out = {}
    for sparse in (True, False):
        update = jax.jit(make_update(env, spec, schedule(cfg), ("true",), sparse=sparse), static_argnums=2)
        s = state
        for _ in range(3):
            s, _ = update(s, task, 0, hp)
        out[sparse] = np.asarray(s.logits)
    assert np.abs(out[True] - np.asarray(state.logits)).max() > 1e-3
    np.testing.assert_allclose(out[True], out[False], rtol=0, atol=1e-5)


@pytest.mark.heavy  # two compiled bandit updates
def test_noiseless_mismatch_is_the_on_policy_update():
    """mismatch with sigma = 0 draws from mu = pi: every weight is 1 and three updates (two passes each, so the
    ratio moves off 1 and the clip can bind) equal the on-policy program's to float32 rounding."""
    base = {"preset": "grpo", "task": {"n_prompts": 4, "n_answers": 4, "n_correct": 1},
            "train": {"steps": 3, "batch_size": 4, "group_size": 4}}
    out = []
    for algo in ({"epochs": 2}, {"epochs": 2, "behaviour": "mismatch", "mismatch_sigma": 0.0,
                                 "is_correction": "sequence_truncate"}):
        cfg = ts.resolve({**base, "algo": algo})
        spec, env = algo_spec(cfg), ts.make_env(cfg)
        hp = jax.tree_util.tree_map(jnp.asarray, Hyper(**cfg.hyper_values()))
        task, s = init_state(env, spec, seed_words(6), hp)
        update = jax.jit(make_update(env, spec, schedule(cfg), ("true",)), static_argnums=2)
        for _ in range(3):
            s, _ = update(s, task, 0, hp)
        out.append(np.asarray(s.logits))
    assert np.abs(out[0] - np.asarray(task.prior_logits)).max() > 1e-2
    np.testing.assert_allclose(out[1], out[0], rtol=0, atol=1e-6)


def test_adaptive_kl_is_verls_controller():
    """verl AdaptiveKLController.update reimplemented from its source: proportional error clipped to +-0.2, times
    n_steps / horizon. By hand: KL 0.2 at target 0.1 gives error 0.2, so beta 0.1 x (1 + 0.2 x 128 / 1000) =
    0.10256; KL 0.09 gives -0.1: 0.1 x (1 - 0.0128) = 0.09872."""
    def verl(value, current_kl, n_steps, target, horizon):
        return value * (1 + np.clip(current_kl / target - 1, -0.2, 0.2) * n_steps / horizon)

    for kl, expect in ((0.2, 0.10256), (0.09, 0.09872)):
        got = float(kl_schedule.adapt(jnp.float32(0.1), jnp.float32(kl), 128, 0.1, 1000.0))
        np.testing.assert_allclose(got, expect, rtol=1e-6)
        np.testing.assert_allclose(got, verl(0.1, kl, 128, 0.1, 1000.0), rtol=1e-6)
    # verl's current_kl: the mean over responses of each response's masked token mean
    kl_tok = jnp.array([[[0.2, 0.4, 9.0], [0.1, 0.1, 0.1]]])
    mask = jnp.array([[[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]])
    np.testing.assert_allclose(float(kl_schedule.batch_kl(kl_tok, mask)), (0.3 + 0.1) / 2, rtol=1e-6)


@pytest.mark.heavy  # a compiled update (3 s on a busy 2-core machine)
def test_adaptive_beta_in_the_engine():
    """Step 0 starts at the reference (k1 KL exactly 0): the error clips at -0.2 and beta becomes
    beta (1 - 0.2 n / horizon), n = 4 x 4 answers; at step 1 the KL is far above a target of 1e-6: + 0.2."""
    cfg = ts.resolve({"preset": "reinforce_pp", "task": {"n_prompts": 4, "n_answers": 4, "n_correct": 1},
                      "train": {"steps": 2, "batch_size": 4, "group_size": 4},
                      "algo": {"kl_schedule": "adaptive", "kl_target": 1e-6, "kl_horizon": 100.0, "beta": 0.05}})
    spec, env = algo_spec(cfg), ts.make_env(cfg)
    hp = jax.tree_util.tree_map(jnp.asarray, Hyper(**cfg.hyper_values()))
    task, state = init_state(env, spec, seed_words(5), hp)
    update = jax.jit(make_update(env, spec, schedule(cfg), ("true",)), static_argnums=2)
    s1, _ = update(state, task, 0, hp)
    s2, _ = update(s1, task, 0, hp)
    np.testing.assert_allclose(float(s1.kl_state.beta), 0.05 * (1 - 0.2 * 16 / 100), rtol=1e-6)
    np.testing.assert_allclose(float(s2.kl_state.beta), 0.05 * (1 - 0.032) * (1 + 0.032), rtol=1e-6)


@pytest.mark.heavy  # a compiled Adam update (3 s on a busy 2-core machine)
def test_reference_reset_every_n_steps_with_adam_restart():
    """ProRL: after updates N, 2N, ... the reference is the policy's log-softmax and Adam's moments restart."""
    cfg = ts.resolve({"preset": "grpo", "task": {"n_prompts": 4, "n_answers": 4, "n_correct": 1},
                      "train": {"steps": 3, "batch_size": 4, "group_size": 4},
                      "algo": {"optimizer": "adam", "lr": 0.05, "ref_reset_every": 2}})
    spec, env = algo_spec(cfg), ts.make_env(cfg)
    hp = jax.tree_util.tree_map(jnp.asarray, Hyper(**cfg.hyper_values()))
    task, state = init_state(env, spec, seed_words(2), hp)
    update = jax.jit(make_update(env, spec, schedule(cfg), ("true",)), static_argnums=2)
    arm = 0
    s1, _ = update(state, task, arm, hp)
    np.testing.assert_array_equal(np.asarray(s1.kl_state.ref), np.asarray(task.prior_logits))  # not yet
    assert int(s1.opt_state.count) == 1
    s2, _ = update(s1, task, arm, hp)
    np.testing.assert_allclose(np.asarray(s2.kl_state.ref), np.asarray(jax.nn.log_softmax(s2.logits)), atol=1e-6)
    assert int(s2.opt_state.count) == 0 and not np.asarray(s2.opt_state.mu).any()  # restarted
    s3, _ = update(s2, task, arm, hp)
    np.testing.assert_array_equal(np.asarray(s3.kl_state.ref), np.asarray(s2.kl_state.ref))


def test_reference_sync_is_trls_parameter_mix():
    """TRL SyncRefModelCallback._sync_target_model, reimplemented from its source: target <- target (1 - alpha) +
    alpha source, on the logit tables, then renormalised. alpha = 1 is a hard reset to the policy."""
    ref = jnp.log(jnp.array([[0.5, 0.25, 0.25]]))
    z = jnp.array([[2.0, 0.0, -1.0]])
    trl = np.asarray(ref) * (1 - 0.6) + np.asarray(z) * 0.6
    trl = trl - np.log(np.exp(trl).sum(-1, keepdims=True))
    np.testing.assert_allclose(np.asarray(kl_schedule.synced(ref, z, 0.6)), trl, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(kl_schedule.synced(ref, z, 1.0)), np.asarray(jax.nn.log_softmax(z)),
                               rtol=1e-6)
    spec = AlgoSpec(kl_placement="loss", ref_reset_every=2, ref_reset_optimizer=False)
    state = kl_schedule.KLState(ref=ref, beta=None)
    new, reset = kl_schedule.advance(spec, state, None, None, z, 1, Hyper(ref_mixup_alpha=0.6))
    assert reset is None  # TRL's sync leaves the optimizer alone
    np.testing.assert_allclose(np.asarray(new.ref), trl, rtol=1e-6)
    kept, _ = kl_schedule.advance(spec, state, None, None, z, 2, Hyper(ref_mixup_alpha=0.6))
    np.testing.assert_array_equal(np.asarray(kept.ref), np.asarray(ref))  # step 2 is not a sync step


@pytest.mark.parametrize("algo, task, train, needle", [
    ({"behaviour": "stal"}, {}, {}, "algo.behaviour"),
    ({"is_correction": "token_truncate"}, {}, {}, "algo.is_correction"),
    ({"behaviour": "stale", "is_correction": "token_mask", "behaviour_old": "behaviour"}, {}, {}, "algo.is_correction"),
    ({"kl_schedule": "adaptive"}, {}, {}, "algo.kl_schedule"),
    ({"ref_reset_every": 10}, {}, {}, "algo.ref_reset_every"),
    ({"behaviour": "hint"}, {"env": "tree"}, {}, "algo.behaviour"),
    ({"behaviour": "stale"}, {}, {"dynamics": "expected"}, "train.dynamics"),
    ({"behaviour_lag": 0}, {}, {}, "behaviour_lag"),
    ({"hint_when": "all_wrong"}, {}, {}, "algo.hint_when"),
    ({"behaviour": "stale"}, {}, {"refill": 2}, "train.refill"),
    ({"kl_placement": "loss", "ref_reset_every": 2, "ref_mixup_alpha": 0.0}, {}, {}, "ref_mixup_alpha"),
])
def test_config_refusals(algo, task, train, needle):
    with pytest.raises(ValueError, match=needle):
        Config.model_validate({"algo": algo, "task": task, "train": train})


def test_defaults_leave_the_config_and_the_program_unchanged():
    cfg = ts.resolve({"preset": "grpo"})
    dumped = cfg.model_dump(mode="json")["algo"]
    for name in ("behaviour", "is_correction", "kl_schedule", "ref_reset_every", "is_cap", "hint_lambda",
                 "ref_mixup_alpha", "ref_reset_optimizer"):
        assert name not in dumped  # the digest of a config written before these knobs is unchanged
    spec = algo_spec(cfg)
    assert not behaviour.active(spec) and not kl_schedule.active(spec)
    stale = algo_spec(ts.resolve({"preset": "grpo", "algo": {"behaviour": "stale", "behaviour_lag": 4}}))
    assert stale.behaviour_lag == 4 and stale != spec
