"""Expected-update dynamics (``train.dynamics = "expected"``).

Three layers: the one-step expected update against a plain NumPy enumeration of every batch, every
ordered group and every reward draw (float precision); against the mean of the sampled engine's
one-step updates over many seeds (within Monte Carlo error), for every arm and every preset the bandit
supports; and the run interface (tidy frame, refusals).
"""
from __future__ import annotations

import functools
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tabsim as ts
from tabsim.sim import expected as E
from tabsim.sim.algos import ESTIMATORS, AlgoSpec
from tabsim.config import resolve
from tabsim.sim.engine import Schedule
from tabsim.sim.expected import batch
from tabsim.sim.expected.batch import batch_level
from tabsim.sim.envs.bandit import BanditEnv
from tabsim.sim.params import Hyper
from tabsim.sim.rng import seed_array
from tabsim.runtime.run import expected_crossover

from f32_tolerance import f32_bound, f64_bound  # tests/core: the float32 error bounds


# -- a plain NumPy enumeration ------------------------------------------------------------------
def np_softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def np_grpo(r, ddof, eps):
    if r.max() == r.min():
        return np.zeros_like(r)
    return (r - r.mean()) / (r.std(ddof=ddof) + eps)


def np_rewards(arm, answers, correct, fmt, label, bits, tie_label):
    """The rewards of groups of answers ``(..., G)`` (``bits``: the same shape; ``tie_label``: one per group)."""
    tie_label = np.asarray(tie_label)[..., None]
    if arm == "true":
        return correct[answers]
    if arm == "format":
        return (answers == fmt).astype(float)
    if arm in ("random", "noisy"):
        return bits.astype(float)
    if arm == "majority":
        return (answers == tie_label).astype(float)
    if arm == "majority_offline":
        return (answers == label).astype(float)
    if arm == "incorrect":
        return (answers == label) * (1.0 - correct[label])
    raise KeyError(arm)


def np_group_draws(arm, pi, correct, hp, G, tie):
    """Every ordered group with its probability, as arrays over the draws: ``answers (D, G)``, ``bits (D, G)``,
    ``tie label (D,)``, ``prob (D,)``."""
    K = pi.shape[0]
    rho = {"random": np.full(K, hp["gamma"]), "noisy": np.where(correct > 0, 1 - hp["fnr"], hp["fpr"])}.get(arm)
    answers = np.asarray(list(itertools.product(range(K), repeat=G)), int).reshape(-1, G)
    p = np.prod(pi[answers], axis=1)
    if rho is not None:  # every reward bit pattern of every answer tuple
        bits = np.asarray(list(itertools.product((0, 1), repeat=G)), int)
        answers, bits = np.repeat(answers, len(bits), 0), np.tile(bits, (len(answers), 1))
        p = np.repeat(p, 2 ** G) * np.prod(np.where(bits > 0, rho[answers], 1 - rho[answers]), axis=1)
    else:
        bits = np.zeros_like(answers)
    counts = (answers[:, :, None] == np.arange(K)).sum(1)
    is_mode = counts == counts.max(1, keepdims=True)
    if arm != "majority" or tie == "lowest":
        return answers, bits, is_mode.argmax(1), p
    draw, label = np.nonzero(is_mode)  # a random tie: each mode with an equal share
    return answers[draw], bits[draw], label, (p / is_mode.sum(1))[draw]


@functools.cache
def batch_estimator(name):
    """The package's own batch-level estimator on a stack of batches (the reference reads its totals from it)."""
    one = lambda r, valid: ESTIMATORS[name](r, lengths=jnp.ones_like(r), valid=valid, hp=None)
    return jax.jit(jax.vmap(one))


def np_advantages(estimator, rewards, kept, hp):
    """The advantages of stacked batches ``rewards (J, B, G)`` with their groups' ``kept (J, B)``."""
    if batch_level(estimator):
        return np.asarray(batch_estimator(estimator)(jnp.asarray(rewards, jnp.float32),
                                                     jnp.asarray(kept, jnp.float32)), np.float64)
    tied = rewards.max(-1, keepdims=True) == rewards.min(-1, keepdims=True)
    centred = (rewards - rewards.mean(-1, keepdims=True)) / (rewards.std(-1, ddof=hp["std_ddof"], keepdims=True)
                                                             + hp["std_eps"])
    return np.where(tied, 0.0, centred)


def np_expected_step(arm, z, ref, correct, fmt, label, hp, *, B, G, tie, agg, kl, epochs=1, surrogate="reinforce",
                     estimator="grpo", spread=False):
    """``E[z after one step]`` by enumerating every batch (uniform B-subsets) and every joint outcome; with
    ``spread``, also ``E|z after one step - z|`` (the size of the terms the expectation sums, for its error).
    Each batch's joint outcomes are stacked along a leading axis and updated together."""
    N, K = z.shape
    pis = np_softmax(z)
    per_prompt = [np_group_draws(arm, pis[i], correct[i], hp, G, tie) for i in range(N)]
    subsets = list(itertools.combinations(range(N), B))
    out, size = np.zeros_like(z), np.zeros_like(z)
    for S in subsets:
        # every joint outcome of the batch's groups: index j over the product of the members' draws
        idx = [g.ravel() for g in np.meshgrid(*(np.arange(len(per_prompt[i][3])) for i in S), indexing="ij")]
        prob = np.prod([per_prompt[i][3][d] for i, d in zip(S, idx)], axis=0) / len(subsets)
        answers = np.stack([per_prompt[i][0][d] for i, d in zip(S, idx)], 1)  # (J, B, G)
        rewards = np.stack([np_rewards(arm, per_prompt[i][0][d], correct[i], fmt[i], label[i], per_prompt[i][1][d],
                                       per_prompt[i][2][d]) for i, d in zip(S, idx)], 1).astype(float)
        kept = 1.0 - hp["filter"] * (rewards.max(-1) == rewards.min(-1))  # (J, B)
        n_kept = np.maximum(kept.sum(1), 1.0)
        adv = np_advantages(estimator, rewards, kept, hp)
        out += prob.sum() * z  # the prompts outside the batch keep their logits
        for b, i in enumerate(S):
            a, A = answers[:, b], adv[:, b]
            onehot = np.eye(K)[a]  # (J, G, K)
            w = kept[:, b] / G if agg == "group-sum" else kept[:, b] / (G * n_kept)  # (J,)
            zi, old = np.broadcast_to(z[i], (len(prob), K)).copy(), np.log(pis[i])
            for _ in range(epochs):
                pi = np_softmax(zi)
                logq = np.log(pi)
                coef = -A * w[:, None]  # d loss / d log pi(a_g)
                if surrogate == "clip":
                    ratio = np.exp(np.take_along_axis(logq, a, 1) - old[a])
                    clipped = ((A > 0) & (ratio > 1 + hp["eps_high"])) | ((A < 0) & (ratio < 1 - hp["eps_low"]))
                    coef = np.where(clipped, 0.0, coef * ratio)
                g = np.einsum("jg,jgk->jk", coef, onehot) - coef.sum(1, keepdims=True) * pi
                if kl == "ref_ce":
                    g += hp["beta"] * G * w[:, None] * (pi - np.exp(ref[i]))
                elif kl == "k3":
                    d = hp["beta"] * w[:, None] * (1 - np.exp(-(np.take_along_axis(logq, a, 1) - ref[i][a])))
                    g += np.einsum("jg,jgk->jk", d, onehot) - d.sum(1, keepdims=True) * pi
                zi = zi - hp["lr"] * g
            out[i] += prob @ (zi - z[i])
            size[i] += prob @ np.abs(zi - z[i])
    return (out, size) if spread else out


def step_tolerance(z, size, *, B, G, symbols, epochs=1):
    """The float32 error bound of one expected step ``z + E[delta]`` against the float64 enumeration.

    * ``2 eps |z|``: z rounded into float32 (``u |z|``), carried through the step (its Jacobian is
      ``I + lr dE[delta]/dz``, within a factor 2 of I here) and the rounding of the sum (``u |z'|``).
    * ``n_ops eps max E|delta|`` (``size``: the sum of |terms| of the expectation): each prompt's update
      sums its outcomes' updates, ``C(G + S - 1, S - 1)`` compositions of G answers over S symbols, for
      each of the B members of a batch (the others' kept counts); each outcome's probability is
      ``exp(log multinomial + counts . log pi)``, an exponent of K + 1 terms of size ``G |log pi|``, so a
      relative error of ``(K + 1) G max|log pi|`` eps; each epoch recomputes the policy and sums G answers.
    """
    return f32_bound(2, z) + f32_bound(step_ops(z, B=B, G=G, symbols=symbols, epochs=epochs), size)


def step_ops(z, *, B, G, symbols, epochs=1):
    """``n_ops`` of :func:`step_tolerance`: the outcomes summed, the exponent of their probabilities, the epochs."""
    K = z.shape[-1]
    log_pi = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return B * math.comb(G + symbols - 1, symbols - 1) + (K + 1) * G * np.abs(log_pi).max() + epochs * (G + K)


HP = {"lr": 0.7, "beta": 0.2, "std_ddof": 0, "std_eps": 1e-8, "filter": 1.0, "gamma": 0.4, "fpr": 0.2, "fnr": 0.3,
      "eps_low": 0.05, "eps_high": 0.05}
CASES = {  # name: (AlgoSpec, aggregation for the reference, KL, epochs, surrogate, hp changes)
    "paper": (AlgoSpec(surrogate="reinforce", aggregation="group-sum", kl="ref_ce", kl_placement="loss"),
              "group-sum", "ref_ce", 1, "reinforce", {}),
    "dapo-like": (AlgoSpec(surrogate="clip", aggregation="token-mean"), "mean", None, 1, "reinforce",
                  {"std_ddof": 1, "std_eps": 1e-6}),
    "grpo-k3": (AlgoSpec(surrogate="clip", aggregation="seq-mean-token-mean", kl="k3", kl_placement="loss"),
                "mean", "k3", 1, "reinforce", {"filter": 0.0}),
    "reuse-clip": (AlgoSpec(surrogate="clip", aggregation="token-mean", epochs=3), "mean", None, 3, "clip", {}),
}


@functools.cache
def _small_env_task(tie, K, seed):
    """One environment object per setting: expected_update's compiled program is keyed by the environment
    object, so the tests of one case and arm (float32 here and in the float64 test) share it."""
    env = BanditEnv(n_prompts=3, n_answers=K, n_correct=1, tie=tie, offline_samples=3)
    hp = Hyper(prior_strength=0.45, format_boost=0.3)
    task = env.init_task(jnp.asarray(seed_array([seed])[0]), hp)
    z = np.asarray(task.prior_logits, np.float64) + np.random.default_rng(seed).normal(0, 0.4, (3, K))
    return env, task, z


def _small_task(tie="lowest", K=3, seed=0):
    env, task, z = _small_env_task(tie, K, seed)
    return env, task, z.copy()


ARM_CASES = [("true", "lowest", 3), ("majority", "lowest", 3), ("majority", "random", 3), ("format", "lowest", 3),
             ("random", "lowest", 2), ("noisy", "lowest", 2), ("majority_offline", "lowest", 3),
             ("incorrect", "lowest", 3)]
# every arm with the paper's composition by default; the other compositions with a few arms (all: heavy)
# (the true reward with dapo-like and reuse-clip: heavy; grpo-k3's true reward and every arm of paper cover it)
DEFAULT = {"paper": {c[:2] for c in ARM_CASES}, "dapo-like": {("majority", "random"), ("noisy", "lowest")},
           "grpo-k3": {("true", "lowest"), ("random", "lowest")},
           "reuse-clip": {("majority", "random"), ("noisy", "lowest")}}
ENUMERATION_CASES = [pytest.param(case, *arm, id=f"{case}-{arm[0]}-{arm[1]}",
                                  marks=() if arm[:2] in DEFAULT[case] else pytest.mark.heavy)
                     for case in sorted(CASES) for arm in ARM_CASES]


@pytest.mark.parametrize("case,arm,tie,G", ENUMERATION_CASES)
def test_one_step_equals_numpy_enumeration(case, arm, tie, G):
    algo, agg, kl, epochs, surrogate, changes = CASES[case]
    hp_d = {**HP, **changes}
    env, task, z = _small_task(tie)
    sched = Schedule(steps=1, batch_size=2, group_size=G, eval_every=1)
    hp = Hyper(**hp_d)
    label = np.asarray(task.offline_label)
    if arm == "incorrect":  # make one prompt's label wrong so the arm pays something
        label = np.where(np.arange(3) == 0, np.argmin(np.asarray(task.correct[0])), label)
        task = task.__class__(**{**task.__dict__, "offline_label": jnp.asarray(label, jnp.int32)})
    got = np.asarray(E.expected_update(env, algo, sched, arm, task, jnp.asarray(z, jnp.float32), hp), np.float64)
    want, size = np_expected_step(arm, z, np.asarray(task.prior_logits, np.float64),
                                  np.asarray(task.correct, np.float64), np.asarray(task.format_answer), label, hp_d,
                                  B=2, G=G, tie=tie, agg=agg, kl=kl, epochs=epochs, surrogate=surrogate, spread=True)
    move = np.abs(want - z).max()
    # the step does something, except a random reward with no KL: in groups of 2 its two reward orders
    # cancel exactly, on policy and with the clip alike
    assert move > 1e-3 or (arm == "random" and kl is None)
    # float32 against float64 (about 1e-6 here, a hundredth of the step): the general path enumerates the
    # reward draws with the answers, 2K symbols
    symbols = 2 * z.shape[-1] if arm in E.NOISE_ARMS else z.shape[-1]
    tol = step_tolerance(z, size, B=2, G=G, symbols=symbols, epochs=epochs)
    np.testing.assert_allclose(got, want, atol=tol, rtol=0)


def test_linear_and_general_paths_agree():
    """The linear path's class and majority tables give the general path's enumeration over outcomes."""
    env, task, z = _small_task("random", K=4)
    sched = Schedule(steps=1, batch_size=2, group_size=4, eval_every=1)
    hp = Hyper(**HP)
    algo = AlgoSpec(surrogate="clip", aggregation="token-mean", kl="k3", kl_placement="loss", entropy_bonus=True)
    hp = Hyper(**{**HP, "ent_coef": 0.05})
    for arm in ("true", "majority"):
        lin = E.expected_update(env, algo, sched, arm, task, jnp.asarray(z, jnp.float32), hp)
        symbols = E.symbol_table(env, arm in E.NOISE_ARMS)
        table = E.outcome_table(env, arm, 4, symbols)
        step = jax.jit(lambda z_, t, h, arm=arm, symbols=symbols, table=table: E.general_step(
            env, algo, sched, arm, symbols, table, z_, t.prior_logits, t, h)[0])
        gen = step(jnp.asarray(z, jnp.float32), task, hp)
        # The same float32 z: each path rounds z + delta (u |z'| each) and errs by step_ops eps E|delta| in
        # its expectation (step_tolerance); they differ by at most the sum (about 7e-6 here, 3e-8 seen).
        # The size of the terms, E|delta|: a batch of one prompt gives each group the largest weight 1 / G
        # (a batch of 2 includes a prompt twice as often, with a weight 1 / (G n_kept) <= 1 / G), and the
        # entropy bonus adds at most lr ent_coef max|log pi| (pi_a |log pi_a - sum pi log pi| <= max|log pi|).
        _, size = np_expected_step(arm, z, np.asarray(task.prior_logits, np.float64),
                                   np.asarray(task.correct, np.float64), np.asarray(task.format_answer),
                                   np.asarray(task.offline_label), HP, B=1, G=4, tie="random", agg="mean", kl="k3",
                                   spread=True)
        log_pi = z - np.log(np.exp(z).sum(-1, keepdims=True))
        size = 2 * size.max() + hp.lr * hp.ent_coef * np.abs(log_pi).max()
        tol = f32_bound(1, z) + 2 * f32_bound(step_ops(z, B=2, G=4, symbols=4), size)
        np.testing.assert_allclose(lin, gen, atol=tol, rtol=0)


def np_others(F0, F1, b, replacement):
    """``P(M, S)`` of the other b members of each prompt's batch, by enumerating every batch and outcome."""
    N, s_max = len(F0), F1.shape[1] - 1
    out = np.zeros((N, b + 1, b * s_max + 1))
    options = [[(0, 0, F0[j])] + [(1, s, F1[j, s]) for s in range(s_max + 1)] for j in range(N)]
    for i in range(N):
        if replacement:
            batches = [(sel, N ** -b) for sel in itertools.product(range(N), repeat=b)]
        else:
            subsets = list(itertools.combinations([j for j in range(N) if j != i], b))
            batches = [(sel, 1 / len(subsets)) for sel in subsets]
        for sel, p_sel in batches:
            for res in itertools.product(*(options[j] for j in sel)):
                out[i, sum(r[0] for r in res), sum(r[1] for r in res)] += p_sel * np.prod([r[2] for r in res])
    return out


def others_tolerance(N, b, s_max, want):
    """The float32 error bound of :func:`tabsim.sim.expected.batch.others` (about 2e-6; 4e-8 seen): each of at
    most N + b steps (N prompts absorbed or averaged, b divided out again) rounds a cell s_max + 5 times
    (add_group's s_max + 2 products and s_max + 1 sums of non-negative terms, the mixture's two scalings
    and sum), each by u = eps / 2 of a cell <= max(want); dividing a prompt out multiplies the error by
    n / (n - k) <= 2."""
    return f32_bound((N + b) * (s_max + 5), want)


@pytest.mark.parametrize("N,b,replacement", [(5, 2, False), (7, 3, False), (5, 3, False), (4, 3, False),
                                             (4, 2, True), (6, 0, False)])
def test_rest_of_the_batch_matches_enumeration(N, b, replacement):
    """The distribution of the others' kept count and summed statistic, by deconvolution (2b <= N - 1),
    one prompt at a time (larger b) and with replacement, against enumerating every batch and outcome."""
    F = np.random.default_rng(N * 10 + b).dirichlet(np.ones(4), size=N)
    got = np.asarray(batch.others(jnp.asarray(F[:, 0], jnp.float32), jnp.asarray(F[:, 1:], jnp.float32), b,
                                  replacement))
    want = np_others(F[:, 0], F[:, 1:], b, replacement)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, atol=others_tolerance(N, b, F.shape[1] - 2, want), rtol=0)


def test_others_kept_matches_enumeration():
    q = jnp.asarray([0.9, 0.2, 0.5, 0.7, 0.35])
    got = np.asarray(batch.others_kept(q, 3, replacement=False))
    for i in range(5):
        want = np.zeros(3)
        others = [j for j in range(5) if j != i]
        pairs = list(itertools.combinations(others, 2))
        for pair in pairs:
            for kept in itertools.product((0, 1), repeat=2):
                p = np.prod([float(q[j]) if k else 1 - float(q[j]) for j, k in zip(pair, kept)])
                want[sum(kept)] += p / len(pairs)
        # the others' (M, S) with S = 0 (s_max = 0) for b = 2 of N = 5
        np.testing.assert_allclose(got[i], want, atol=others_tolerance(5, 2, 0, want), rtol=0)


BATCH_CASES = [  # (estimator, aggregation for the engine / the reference, filter, B, arm, tie)
    ("gpg", "token-mean", "mean", 0.0, 2, "true", "lowest"),
    ("gpg", "group-sum", "group-sum", 1.0, 3, "majority", "random"),
    ("reinforce_pp", "token-mean", "mean", 0.0, 3, "true", "lowest"),
    ("reinforce_pp", "group-sum", "group-sum", 1.0, 2, "noisy", "lowest"),
    ("reinforce_pp_baseline", "token-mean", "mean", 1.0, 2, "majority", "random"),
    ("reinforce_pp_baseline", "group-sum", "group-sum", 0.0, 2, "random", "lowest"),
]


@pytest.mark.parametrize("estimator,aggregation,agg,filt,B,arm,tie", BATCH_CASES,
                         ids=[f"{c[0]}-{c[1]}-f{c[3]:.0f}-B{c[4]}-{c[5]}" for c in BATCH_CASES])
def test_batch_level_estimators_equal_numpy_enumeration(estimator, aggregation, agg, filt, B, arm, tie):
    """GPG and REINFORCE++ read totals over the whole batch: the exact step against every batch and every
    joint outcome of its groups, the advantages from the package's estimators on each enumerated batch.
    B = 2 of 3 prompts takes the deconvolution, B = 3 the one-prompt-at-a-time path (and groups of 2)."""
    G = 2 if arm in ("random", "noisy") or B == 3 else 3  # the reference enumerates (K^G)^B joint groups
    hp_d = {**HP, "filter": filt, "beta": 0.1}
    env, task, z = _small_task(tie)
    algo = AlgoSpec(estimator=estimator, surrogate="reinforce", aggregation=aggregation, kl="ref_ce",
                    kl_placement="loss")
    sched = Schedule(steps=1, batch_size=B, group_size=G, eval_every=1)
    got = np.asarray(E.expected_update(env, algo, sched, arm, task, jnp.asarray(z, jnp.float32), Hyper(**hp_d)),
                     np.float64)
    want, size = np_expected_step(arm, z, np.asarray(task.prior_logits, np.float64),
                                  np.asarray(task.correct, np.float64), np.asarray(task.format_answer),
                                  np.asarray(task.offline_label), hp_d, B=B, G=G, tie=tie, agg=agg, kl="ref_ce",
                                  estimator=estimator, spread=True)
    assert np.abs(want - z).max() > 1e-3
    # the batch's totals: the others' outcomes enter through their B compositions (step_tolerance)
    symbols = 2 * z.shape[-1] if arm in E.NOISE_ARMS else z.shape[-1]
    np.testing.assert_allclose(got, want, atol=step_tolerance(z, size, B=B, G=G, symbols=symbols), rtol=0)


# -- the run interface --------------------------------------------------------------------------
def test_run_expected_gives_the_tidy_frame_with_the_expected_seed():
    res = ts.run({"preset": "paper", "train": {"dynamics": "expected", "steps": 20, "eval_every": 10},
                  "sweep": {"prior_strength": [0.35, 0.65]}})
    f = res.frame
    assert set(f.seed) == {E.EXPECTED_SEED}
    sampled = ts.run({"preset": "paper", "train": {"steps": 20, "eval_every": 10, "seeds": 1},
                      "sweep": {"prior_strength": [0.35, 0.65]}}).frame
    assert list(f.columns) == list(sampled.columns) and len(f) == len(sampled)
    assert res.provenance["dynamics"] == "expected"
    frozen = f[f.arm == "frozen"]
    assert np.allclose(frozen.pass1, frozen.pass1.iloc[0]) or frozen.groupby("prior_strength").pass1.nunique().max() == 1
    # one on-policy update with a centred advantage: a random reward moves nothing but the KL (at the prior: 0)
    rnd = f[f.arm == "random"].pivot(index="step", columns="prior_strength", values="pass1")
    # float32: its expected advantage is 0 at every policy (the rewards ignore the answers), so each of 20
    # steps moves z by rounding only: z + step (u |z|) and the step's sums (class tables over (G + 1)^2 +
    # 2 (G + 1) draws, K answers, binomial weights exp(G log pi)) of terms <= lr sqrt(G - 1); the KL only
    # pulls back. pass@1 moves by <= max|dz| / 2 and rounds on its own (N + K terms <= 1)
    cfg = ts.resolve({"preset": "paper"})
    env, G, K, lr = ts.make_env(cfg), cfg.train.group_size, cfg.task.n_answers, cfg.algo.lr
    z_max = max(np.abs(np.asarray(env.init_task(jnp.asarray(seed_array([cfg.train.seed])[0]), Hyper(
        **cfg.hyper_values({"prior_strength": p}))).prior_logits)).max() for p in (0.35, 0.65))
    n_ops = (G + 1) ** 2 + 2 * (G + 1) + K + G * z_max + 10  # z: the prior's log-probabilities
    per_step = f32_bound(1, z_max) + lr * f32_bound(n_ops, 2 * math.sqrt(G - 1))
    tol = 20 * per_step / 2 + 2 * f32_bound(cfg.task.n_prompts + K, 1.0)
    np.testing.assert_allclose(rnd.to_numpy(), np.broadcast_to(rnd.iloc[0].to_numpy(), rnd.shape), rtol=0, atol=tol)
    # deterministic: the same numbers twice
    again = ts.run({"preset": "paper", "train": {"dynamics": "expected", "steps": 20, "eval_every": 10},
                    "sweep": {"prior_strength": [0.35, 0.65]}}).frame
    np.testing.assert_array_equal(again.pass1, f.pass1)


def test_sampled_config_is_written_as_before():
    cfg = resolve({"preset": "paper"})
    assert "dynamics" not in cfg.model_dump()["train"]
    assert resolve({"preset": "paper", "train": {"dynamics": "expected"}}).model_dump()["train"]["dynamics"] == "expected"
    with pytest.raises(ts.ConfigError, match=r"train.dynamics.*'sampled' or 'expected'"):
        resolve({"train": {"dynamics": "exact"}})


@pytest.mark.parametrize("over,match", [
    ({"algo": {"optimizer": "adam"}}, r"algo.optimizer = 'adam'.*use 'sgd'"),
    ({"algo": {"max_grad_norm": 1.0}}, r"algo.max_grad_norm"),
    ({"preset": "reinforce_pp"}, r"algo.estimator = 'reinforce_pp'.*KL in the reward.*group-level estimator"),
    ({"preset": "gpg", "algo": {"epochs": 2}}, r"algo.estimator = 'gpg'.*off-policy reuse.*algo.epochs = 1"),
    ({"preset": "gpg", "task": {"n_prompts": 200}, "train": {"batch_size": 64}},
     r"rest of the batch needs about .* operations per step.*reduce task.n_prompts or train.batch_size"),
    ({"train": {"group_size": 40}}, r"G = 40 over K = 8 answers has 62,891,499 outcomes.*reduce train.group_size"),
    ({"preset": "spurious_rewards"}, r"\(answer, reward\) symbols has .* outcomes"),
    ({"algo": {"epochs": 2}, "train": {"replacement": True}}, r"train.replacement"),
    ({"task": {"env": "tree"}}, r"only the bandit.*expected_update"),
])
def test_refusals_say_why_and_what_to_change(over, match):
    base = {"preset": "paper", "train": {"dynamics": "expected", "steps": 2}}
    cfg = {**base, **over, "train": {**base["train"], **over.get("train", {})}}
    with pytest.raises(ValueError, match=match):
        ts.run(cfg)


def test_expected_crossover_is_the_root_of_the_flows_d_elicit():
    cfg = {"preset": "paper", "train": {"steps": 40, "eval_every": 40}}
    root = expected_crossover(cfg, task_seeds=2, xtol=1e-6)

    def d_elicit(p):
        seeds = {"seed": 0}
        out = []
        for s in range(2):
            seeds["seed"] = s
            f = ts.run(cfg, train={"dynamics": "expected", **seeds, "steps": 40, "eval_every": 40},
                       sweep={"prior_strength": [p]}).final().set_index("arm").pass1
            out.append(f["majority"] - f["random"])
        return np.mean(out)

    assert 0.3 < root < 0.6
    assert d_elicit(root - 0.01) < 0 < d_elicit(root + 0.01)
    with pytest.raises(ValueError, match="term: unknown term 'd_x'"):
        expected_crossover(cfg, term="d_x")
    with pytest.raises(ValueError, match="same sign"):
        expected_crossover(cfg, bracket=(0.6, 0.8), task_seeds=2)  # the program compiled above


F64_CASES = [("paper", "true", "lowest", 3), ("paper", "majority", "random", 3), ("paper", "noisy", "lowest", 2),
             ("dapo-like", "majority", "random", 3), ("reuse-clip", "noisy", "lowest", 2)]
# paper's true reward: heavy (paper's majority and noisy arms take the same linear path in float64)
F64_PARAMS = [pytest.param(*c, id=f"{c[0]}-{c[1]}-{c[2]}", marks=pytest.mark.heavy if c[:2] == ("paper", "true") else ())
              for c in F64_CASES]


@pytest.mark.parametrize("case,arm,tie,G", F64_PARAMS)
def test_float64_step_equals_numpy_enumeration_to_float64_rounding(case, arm, tie, G):
    """``precision="float64"``: the linear (paper, dapo-like) and general (reuse-clip) paths against the
    float64 enumeration, within both sides' float64 error bound (about 1e-12 here), far below float32's
    1e-7 (the same step in float32 misses by about 1e-7)."""
    algo, agg, kl, epochs, surrogate, changes = CASES[case]
    hp_d = {**HP, **changes}
    env, task, z = _small_task(tie)
    sched = Schedule(steps=1, batch_size=2, group_size=G, eval_every=1)
    got = E.expected_update(env, algo, sched, arm, task, z, Hyper(**hp_d), precision="float64")
    assert got.dtype == np.float64
    want, size = np_expected_step(arm, z, np.asarray(task.prior_logits, np.float64),
                                  np.asarray(task.correct, np.float64), np.asarray(task.format_answer),
                                  np.asarray(task.offline_label), hp_d, B=2, G=G, tie=tie, agg=agg, kl=kl,
                                  epochs=epochs, surrogate=surrogate, spread=True)
    # step_tolerance's count in float64 for the step, plus the reference's: it adds prob * (z + delta) over
    # C(3, 2) batches of two groups' outcomes (K^G answers, 2^G reward bits, K tie labels), each outcome's
    # term through about 4G + epochs (G K + K + 5) roundings
    symbols = 2 * z.shape[-1] if arm in E.NOISE_ARMS else z.shape[-1]
    K = z.shape[-1]
    outcomes = K ** G * (2 ** G if arm in E.NOISE_ARMS else 1) * (K if (arm, tie) == ("majority", "random") else 1)
    n_ref = math.comb(3, 2) * outcomes ** 2 + 4 * G + epochs * (G * K + K + 5)
    tol = (f64_bound(2, z) + f64_bound(step_ops(z, B=2, G=G, symbols=symbols, epochs=epochs), size)
           + f64_bound(n_ref, np.abs(z).max() + size.max()))
    np.testing.assert_allclose(np.asarray(got), want, atol=tol, rtol=0)
    f32 = E.expected_update(env, algo, sched, arm, task, jnp.asarray(z, jnp.float32), Hyper(**hp_d))
    assert f32.dtype == np.float32 and jax.dtypes.canonicalize_dtype(np.float64) == np.float32  # scoped, not global
