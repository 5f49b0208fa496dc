"""Expected-update dynamics: ``z_{t+1} = z_t + E[update | z_t]``, computed exactly by enumeration.

The expectation is over everything a training step draws: the batch of prompts, the group of G
answers of each prompt and the reward noise. A group is enumerated by its answer counts (a multinomial
composition: ``C(G + K - 1, K - 1)`` of them, 6,435 for K = 8, G = 8), vectorised in JAX, and the
batch enters through each prompt's chance to be drawn and, for aggregations that normalise over the
batch and the batch-level estimators (GPG, REINFORCE++), through the exact distribution of what the
other kept groups of its batch contribute (:mod:`tabsim.expected.batch`). The iterated map is deterministic: it is the flow
of the mean update, not the mean of the random process (they differ by a Jensen gap, which
``docs/expected.md`` measures).

Two exact paths, chosen when the program is built:

* **linear** (one on-policy update per batch, rewards that do not read the policy): the update is
  linear in each answer's advantage-weighted count, so a step needs only ``P(composition) @ table``
  with tables computed once per run. Every arm is a two-class reward model (each answer is rewarded
  with probability ``rho_0`` or ``rho_1``; the noise is averaged within a class by exchangeability),
  and the online majority arm reads the plurality (and its tie rule) from the composition.
* **general** (off-policy reuse, ``epochs > 1``, or a KL penalty in the reward): every outcome's own
  sequence of updates is run with the engine's loss, vectorised over outcomes. Reward noise is then
  enumerated jointly with the answers (``2K`` symbols).

Refused, with the reason: environments other than the bandit (a small tree has :func:`expected_update`
for one step), Adam (its moments depend on the history of sampled gradients),
the global-norm clip, the batch-level estimators with reuse or the KL in the reward, reuse with prompts
drawn with replacement, and enumerations larger than :data:`MAX_OUTCOMES`.
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from tabsim import arms as arms_mod
from tabsim._precision import full, real, scope
from tabsim.algos import (
    ESTIMATORS,
    KL_ESTIMATORS,
    AlgoSpec,
    closed_form,
    policy_loss,
    take_logp,
    zero_variance,
)
from tabsim.engine import DIAG_KEYS, Schedule, compiler_options
from tabsim.expected import batch
from tabsim.expected.batch import BATCH_LEVEL, batch_scale
from tabsim.envs.bandit import Rollout, compositions, majority_tables, n_compositions
from tabsim.envs.tree import TreeRollout
from tabsim.params import Hyper

EXPECTED_SEED = -1  # the ``seed`` of an expected-dynamics row in a run's frame
MAX_OUTCOMES = 200_000  # group outcomes enumerated per prompt
MAX_BATCH_WORK = 2e9  # operations per step of the distribution of the rest of the batch (batch.work)
CHUNK_BYTES = 512 * 2**20  # the expected flow's conditions per compiled call hold at most this in tables
NOISE_ARMS = arms_mod.NOISE_ARMS


def _refuse(msg: str):
    raise ValueError(f"train.dynamics = 'expected': {msg}")


def n_outcomes(env, algo: AlgoSpec, schedule: Schedule, arms) -> int:
    """Group outcomes enumerated per prompt and step (the largest over ``arms``)."""
    G, K = schedule.group_size, env.n_answers
    if linear_path(algo, schedule):
        return n_compositions(G, K)
    symbols = 2 * K if any(a in NOISE_ARMS for a in arms) else K
    return n_compositions(G, symbols) * (K if "majority" in arms and env.tie == "random" else 1)


def expected_bytes(env, algo: AlgoSpec, schedule: Schedule, arms) -> int:
    """Bytes one condition's flow holds at its peak: the per-prompt outcome tables and probabilities of
    every arm (linear path: about six ``[N, O]`` float32 arrays per arm; general: the outcomes' gradients)."""
    per_arm = 6 if linear_path(algo, schedule) else 4 * env.n_answers * max(1, algo.epochs)
    return max(1, len(arms) * env.n_prompts * n_outcomes(env, algo, schedule, arms) * per_arm * 4)


def linear_path(algo: AlgoSpec, schedule: Schedule) -> bool:
    """Every prompt updated once, on policy, with rewards that do not read the policy: one pass
    (minibatches update disjoint prompts, whose rows nothing else moves; with replacement a prompt
    may sit in two minibatches, so only one minibatch) and no KL in the reward."""
    once = algo.epochs == 1 and (algo.minibatches == 1 or not schedule.replacement)
    return once and algo.kl_placement != "reward"


def check(env, algo: AlgoSpec, schedule: Schedule, arms) -> None:
    """Raise ``ValueError`` (naming the setting and what to change) when the exact flow is not available."""
    if getattr(env, "name", None) != "bandit":
        _refuse(f"only the bandit (task.env = 'bandit') has exact expected dynamics, got {env.name!r}; for "
                "a small tree, tabsim.expected.expected_update gives the exact expected one-step update")
    if algo.optimizer != "sgd":
        _refuse(f"algo.optimizer = {algo.optimizer!r}: Adam's moments depend on the whole history of sampled "
                "gradients, so the expected update is not a function of the logits; use 'sgd'")
    if algo.grad_clip:
        _refuse("algo.max_grad_norm: the global-norm clip couples every prompt's random gradient; leave it unset")
    if algo.estimator in BATCH_LEVEL and not linear_path(algo, schedule):
        why = ("off-policy reuse (algo.epochs or algo.minibatches) makes each outcome's updates depend on the "
               "others' rewards through the batch totals" if algo.kl_placement != "reward" else
               "the KL in the reward makes every reward a real number, so the batch totals are sums of "
               "real numbers over all B groups")
        _refuse(f"algo.estimator = {algo.estimator!r} reads totals over the whole batch, and {why}: about "
                f"{n_compositions(schedule.group_size, env.n_answers)}^{schedule.batch_size} joint outcomes; "
                "use algo.epochs = 1 with algo.kl_placement 'loss' or 'none', a group-level estimator "
                "(grpo, dr_grpo, rloo, opo, passk, sign), or dynamics = 'sampled'")
    if algo.epochs * algo.minibatches > 1 and schedule.replacement:
        _refuse("off-policy reuse with train.replacement = true: a prompt drawn twice is updated by both groups "
                "in turn, which the exact flow does not enumerate; set train.replacement = false or algo.epochs = 1")
    n = n_outcomes(env, algo, schedule, arms)
    if n > MAX_OUTCOMES:
        what = "answers" if linear_path(algo, schedule) else "(answer, reward) symbols"
        _refuse(f"a group of G = {schedule.group_size} over K = {env.n_answers} {what} has {n:,} outcomes per "
                f"prompt (at most {MAX_OUTCOMES:,}); reduce train.group_size or task.n_answers (merge symmetric "
                "answers into classes), or use dynamics = 'sampled'")
    b, s_max = batch_members(env, algo, schedule)
    if b and (w := batch.work(env.n_prompts, b, s_max, schedule.replacement)) > MAX_BATCH_WORK:
        _refuse(f"the exact distribution of the rest of the batch needs about {w:.3g} operations per step (at "
                f"most {MAX_BATCH_WORK:.3g}); reduce task.n_prompts or train.batch_size")


def batch_members(env, algo: AlgoSpec, schedule: Schedule) -> tuple[int, int]:
    """``(b, s_max)``: how many other members of a prompt's batch its update reads (0: none), and the
    largest per-group statistic the batch-level estimators sum over them (0 for the normaliser alone)."""
    if algo.estimator in BATCH_LEVEL:
        return schedule.batch_size - 1, int(batch.statistic(algo.estimator, schedule.group_size).max())
    if algo.aggregation == "group-sum":
        return 0, 0
    return schedule.batch_size // algo.minibatches - 1, 0


# -- the linear path ----------------------------------------------------------------------------
def _advantage_table(algo: AlgoSpec, G: int, hp: Hyper):
    """``A1[m], A0[m]`` (``[G + 1]``): a rewarded / unrewarded answer's advantage in a group with m rewards,
    and the keep indicator ``kappa[m]`` (0 for the homogeneous groups the filter drops). A batch-level
    estimator's advantage depends on the rest of the batch (:mod:`tabsim.expected.batch`): 0 here."""
    m = jnp.arange(G + 1)
    kappa = 1.0 - hp.filter * ((m == 0) | (m == G)).astype(real())
    if algo.estimator in BATCH_LEVEL:
        return jnp.zeros(G + 1), jnp.zeros(G + 1), kappa
    rewards = (jnp.arange(G)[None, :] < m[:, None]).astype(real())  # row m: m ones first
    adv = ESTIMATORS[algo.estimator](rewards, lengths=jnp.ones_like(rewards), valid=jnp.ones(G + 1), hp=hp)
    return adv[:, 0], adv[:, -1], kappa


def _binom_pmf(n_max: int, rho):
    """``pmf[..., n, k] = C(n, k) rho^k (1 - rho)^(n - k)`` for ``n, k in 0..n_max`` (0 where k > n)."""
    n = np.arange(n_max + 1)
    comb = np.asarray([[math.comb(a, b) if b <= a else 0 for b in n] for a in n], np.float32)
    k = jnp.asarray(n, real())
    r = rho[..., None, None]
    return comb * jnp.power(r, k) * jnp.power(1.0 - r, jnp.maximum(n[:, None] - k, 0.0))


def two_class(name: str, env, task, hp: Hyper):
    """The arm as a two-class reward model: ``(cls [N, K] 0/1, rho0 [N], rho1 [N])``, each answer of
    class c rewarded with probability ``rho_c`` independently (None for the online majority arm)."""
    n, K = task.correct.shape
    ones = jnp.ones((n,), real())
    label = jax.nn.one_hot(task.offline_label, K, dtype=real())  # the label -1 (never drawn): all zeros
    if name in ("frozen", "true"):
        return task.correct, 0 * ones, ones
    if name == "random":
        return task.correct, hp.gamma * ones, hp.gamma * ones
    if name == "noisy":
        return task.correct, hp.fpr * ones, (1.0 - hp.fnr) * ones
    if name == "format":
        return jax.nn.one_hot(task.format_answer, K, dtype=real()), 0 * ones, ones
    if name == "majority_offline":
        return label, 0 * ones, ones
    if name == "incorrect":
        return label, 0 * ones, 1.0 - (label * task.correct).sum(-1)
    if name == "majority":
        return None
    raise ValueError(f"unknown arm {name!r}; allowed: {', '.join(arms_mod.ARMS)}")


def linear_tables(name: str, env, task, algo: AlgoSpec, G: int, hp: Hyper, counts, maj):
    """Per-run tables of the linear path for arm ``name`` (they do not depend on the policy).

    Online majority: ``("counts", W [O, 2K + 2], by_m)``, per composition o the columns ``counts * adv / G``
    (each answer's advantage-weighted draws), ``counts * kappa / G``, ``kappa`` and the mean reward, so
    that one product ``P(o) @ W`` gives every expectation a step needs. Two-class arms: ``("class", cls,
    T [N, 4, G + 1], V)`` over the class-1 draws ``n1``: ``E[kappa (k_c / n_c A1 + (1 - k_c / n_c) A0)]``
    for c = 0, 1, ``E[kappa]`` and the mean reward, the reward draws ``k_c ~ Bin(n_c, rho_c)`` summed out.

    A batch-level estimator's advantage is known only at the step (it reads the rest of the batch), so
    its tables keep the group's rewarded count m: ``by_m = (onehot(m) [O, G + 1], onehot(m) kappa,
    [rewarded, unrewarded] kept draws [2, O, K])`` and ``V [N, 4, G + 1 (n1), G + 1 (m)]``, the kept
    rewarded / unrewarded shares of class 0 and class 1 (``None`` for the other estimators).
    """
    A1, A0, kappa = _advantage_table(algo, G, hp)
    level = algo.estimator in BATCH_LEVEL
    model = two_class(name, env, task, hp)
    if model is None:  # online majority: the composition's plurality (credit splits random ties)
        credit, mx = maj
        adv = credit * A1[mx][:, None] + (1.0 - credit) * A0[mx][:, None]  # [O, K]
        kap = kappa[mx]
        W = jnp.concatenate([counts * adv * kap[:, None], counts * kap[:, None], kap[:, None] * G,
                             mx[:, None] * 1.0], axis=1) / G
        if not level:
            return "counts", W, None
        by_m = jax.nn.one_hot(mx, G + 1, dtype=real())
        split = jnp.stack([counts * credit, counts * (1.0 - credit)]) * kap[:, None] / G
        return "counts", W, (by_m, by_m * kap[:, None], split)
    cls, rho0, rho1 = model
    k = jnp.arange(G + 1, dtype=real())
    p0, p1 = _binom_pmf(G, rho0), _binom_pmf(G, rho1)  # [N, n, k]
    n1 = jnp.arange(G + 1)
    joint = p0[:, G - n1, :][:, :, :, None] * p1[:, n1, :][:, :, None, :]  # [N, n1, k0, k1]
    m = (k[:, None] + k[None, :]).astype(jnp.int32)  # [k0, k1]
    n1f = n1.astype(real())[:, None, None]
    shape = (G + 1,) * 3
    frac1 = jnp.broadcast_to(k[None, None, :] / jnp.maximum(n1f, 1.0), shape)  # rewarded share of class-1 draws
    frac0 = jnp.broadcast_to(k[None, :, None] / jnp.maximum(G - n1f, 1.0), shape)
    shares = jnp.stack([frac0, 1 - frac0, frac1, 1 - frac1])  # [4, n1, k0, k1]
    to_m = np.add.outer(np.arange(G + 1), np.arange(G + 1))[..., None] == np.arange(G + 1)  # [k0, k1, m]
    V = jnp.einsum("nakl,wakl,klm->nwam", joint, shares, jnp.asarray(to_m, real())) * kappa  # [N, 4, n1, m]
    Tadv = jnp.einsum("nwam,wm->nwa", V, jnp.stack([A1, A0, A1, A0]))
    T = jnp.stack([Tadv[:, 0] + Tadv[:, 1], Tadv[:, 2] + Tadv[:, 3], (V[:, 0] + V[:, 1]).sum(-1),
                   (joint * m / G).sum((-2, -1))], axis=1)  # [N, 4, n1]
    return "class", cls, T, (V if level else None)


def node_gradient(algo: AlgoSpec, pi, logq, ref, nu, hp: Hyper):
    """The KL and entropy part of the expected gradient, given ``nu [N, K]``, the expected keep weight of
    each answer's draws (``sum_a nu = q``, the chance the group is kept)."""
    g = jnp.zeros_like(pi)
    q = nu.sum(-1, keepdims=True)
    if algo.kl_placement == "loss":
        if algo.kl in closed_form.KL_TOKEN_DERIVATIVES:
            c = nu * closed_form.KL_TOKEN_DERIVATIVES[algo.kl](logq - ref)
            g = g + hp.beta * (c - pi * c.sum(-1, keepdims=True))
        else:
            g = g + hp.beta * q * closed_form.KL_NODE_GRADIENTS[algo.kl](pi, logq, ref)
    if algo.entropy_bonus:
        g = g + hp.ent_coef * q * pi * (logq - (pi * logq).sum(-1, keepdims=True))
    return g


def linear_step(algo, schedule, counts, lmc, logits, ref, tables, hp, n_prompts, level=None):
    """One expected step of the linear path for one arm: ``(new logits [N, K], diagnostics)``.

    The step needs each answer's expected advantage-weighted draws ``g_adv``, expected kept draws ``nu``,
    the keep probability ``q`` and the mean reward. Online majority: one product of the compositions'
    probabilities with the run's table. Two-class arms need no enumeration: the class-1 draws are
    ``n1 ~ Bin(G, pi_1)`` and, given ``n1``, an answer of class 1 has ``E[n_a | n1] = n1 pi_a / pi_1``, so
    ``E[n_a f(n1)] = pi_a / pi_1 E[n1 f(n1)]`` (class 0 likewise with ``G - n1``).

    ``level``: a batch-level estimator's tables (:func:`tabsim.expected.batch.advantage_tables` and the
    statistic), whose expected advantages, aggregation weight included, come from the rest of the batch.
    """
    G = schedule.group_size
    logq = jax.nn.log_softmax(logits, axis=-1)
    pi = jnp.exp(logq)
    K = pi.shape[-1]
    if tables[0] == "counts":
        P = jnp.exp(lmc[None, :] + logq @ counts.T)  # [N, O]
        out = P @ tables[1]
        g_adv, nu, q, r = out[:, :K], out[:, K:2 * K], out[:, 2 * K], out[:, 2 * K + 1]
        if level is not None:
            by_m, kept_m, split = tables[2]
            H1, H0 = batch.expected_advantages(level, P @ kept_m, schedule.replacement)
            g_adv = (P * (H1 @ by_m.T)) @ split[0] + (P * (H0 @ by_m.T)) @ split[1]
    else:
        _, cls, T, V = tables
        pi1 = (pi * cls).sum(-1, keepdims=True)
        pi0 = 1.0 - pi1
        n1 = jnp.arange(G + 1, dtype=real())
        logc = jnp.asarray([math.lgamma(G + 1) - math.lgamma(j + 1) - math.lgamma(G - j + 1) for j in range(G + 1)])
        xlog = lambda n, p: jnp.where(n > 0, n * jnp.log(jnp.maximum(p, 1e-38)), 0.0)
        B = jnp.exp(logc + xlog(n1, pi1) + xlog(G - n1, pi0))  # [N, n1]: P(n1 class-1 draws)
        B = jnp.where(pi1 <= 0.0, (n1 == 0), jnp.where(pi0 <= 0.0, (n1 == G), B))
        if level is not None:  # the advantage rows from the rest of the batch
            H1, H0 = batch.expected_advantages(level, jnp.einsum("na,nam->nm", B, V[:, 0] + V[:, 1]),
                                               schedule.replacement)
            Tadv = jnp.einsum("nwam,nwm->nwa", V, jnp.stack([H1, H0, H1, H0], axis=1))
            T = jnp.concatenate([jnp.stack([Tadv[:, 0] + Tadv[:, 1], Tadv[:, 2] + Tadv[:, 3]], 1), T[:, 2:]], 1)
        e1 = (B[:, None, :] * n1 * T).sum(-1)  # [N, 4]: E[n1 f(n1)]
        e0 = (B[:, None, :] * (G - n1) * T).sum(-1)  # E[n0 f(n1)]
        w1, w0 = cls * pi / jnp.maximum(pi1, 1e-38), (1 - cls) * pi / jnp.maximum(pi0, 1e-38)
        g_adv = (w1 * e1[:, 1:2] + w0 * e0[:, 0:1]) / G
        nu = (w1 * e1[:, 2:3] + w0 * e0[:, 2:3]) / G
        q, r = (B * T[:, 2]).sum(-1), (B * T[:, 3]).sum(-1)
    incl, pm = batch_scale(algo, schedule, q, n_prompts)
    scale = incl if pm is None else incl * (pm / (1.0 + jnp.arange(pm.shape[-1]))).sum(-1, keepdims=True)
    adv_scale = incl if level is not None else scale  # a batch-level advantage carries its weight already
    grad = -adv_scale * (g_adv - pi * g_adv.sum(-1, keepdims=True)) + scale * node_gradient(algo, pi, logq, ref, nu, hp)
    new = logits - hp.lr * grad
    return new, {"reward_mean": r.mean(), "kept_frac": q.mean(), "clip_frac": jnp.zeros((), real())}


# -- the general path: every outcome's own updates ------------------------------------------------
def symbol_table(env, noise: bool) -> dict:
    """What a group draws, one row per symbol: ``answer [S]``, ``tokens``/``nodes``/``mask`` ``[S, T]``
    and the reward bit ``bit [S]`` (``noise``: each answer twice, unrewarded then rewarded).

    Bandit symbols are answers; tree symbols are leaves (terminal (node, action) pairs) with their paths.
    """
    if getattr(env, "name", None) == "tree":
        b, D = env.branching, env.depth
        paths = {0: ([], [])}  # node -> (tokens, nodes) from the root to it
        for node in range(env.n_nodes):
            toks, nodes = paths[node]
            for a in range(1, b):
                if not env.terminal[node, a]:
                    paths[int(env.child[node, a])] = (toks + [a], nodes + [node])
        rows = [(node, a) for node in range(env.n_nodes) for a in range(b) if env.terminal[node, a]]
        T = D
        tokens = np.zeros((len(rows), T), np.int32)
        nodes = np.zeros((len(rows), T), np.int32)
        mask = np.zeros((len(rows), T), np.float32)
        answer = np.zeros(len(rows), np.int32)
        for r, (node, a) in enumerate(rows):
            toks, path = paths[node]
            L = len(toks) + 1
            tokens[r, :L], nodes[r, :L], mask[r, :L] = toks + [a], path + [node], 1.0
            answer[r] = env.pair_answer[node, a]
    else:
        answer = np.arange(env.n_answers, dtype=np.int32)
        tokens, nodes, mask = answer[:, None], np.zeros_like(answer)[:, None], np.ones((env.n_answers, 1), np.float32)
    bit = np.zeros(answer.shape[0], np.float32)
    if noise:
        twice = lambda x: np.repeat(x, 2, axis=0)
        answer, tokens, nodes, mask = twice(answer), twice(tokens), twice(nodes), twice(mask)
        bit = np.tile(np.asarray([0.0, 1.0], np.float32), answer.shape[0] // 2)
    return {"answer": answer, "tokens": tokens, "nodes": nodes, "mask": mask, "bit": bit, "noise": noise}


def outcome_table(env, name: str, G: int, symbols: dict) -> dict:
    """The group outcomes of arm ``name``: compositions of G draws over the symbols, their log multinomial
    coefficients, the canonical group (symbols in order), and for the online majority its label (a random
    tie becomes one row per tied label, each with its share of the probability)."""
    S = symbols["answer"].shape[0]
    counts = compositions(G, S)
    lmc = math.lgamma(G + 1) - np.asarray([sum(math.lgamma(c + 1) for c in row) for row in counts])
    label = np.full(len(counts), -1, np.int32)
    if name == "majority":
        K = env.n_answers
        ans_counts = np.zeros((len(counts), K), np.int64)
        np.add.at(ans_counts.T, symbols["answer"], counts.T)
        rows, labels, logw = [], [], []
        for o, c in enumerate(ans_counts):
            modes = np.flatnonzero(c == c.max())
            if env.tie == "lowest":
                modes = modes[:1]
            for m in modes:
                rows.append(o), labels.append(m), logw.append(-math.log(len(modes)))
        counts, lmc, label = counts[rows], lmc[rows] + np.asarray(logw), np.asarray(labels, np.int32)
    group = np.stack([np.repeat(np.arange(S), c) for c in counts]).astype(np.int32)  # [O, G]
    return {"counts": counts.astype(np.float32), "lmc": lmc, "group": group, "label": label}  # lmc: float64


def _rollout(env, symbols, group):
    """A one-prompt rollout ``[1, G, ...]`` of the canonical group ``group [G]`` (symbol indices)."""
    take = lambda k: jnp.asarray(symbols[k])[group][None]
    mask = take("mask").astype(real())
    common = {"answers": take("answer"), "tokens": take("tokens"), "mask": mask, "lengths": mask.sum(-1)}
    if getattr(env, "name", None) == "tree":
        return TreeRollout(nodes=take("nodes"), **common)
    return Rollout(**common)


def general_delta(env, algo: AlgoSpec, name: str, symbols, table, logits, ref, task_row, hp: Hyper, scales=None,
                  weights=None):
    """Expected change of one prompt's table given that it is in the batch, over every group outcome.

    Args:
      logits, ref: the prompt's table and reference, ``env.table_shape[1:]``.
      task_row: the prompt's row of the task (a pytree of ``[1, ...]`` arrays).
      scales, weights: ``[M]`` the loss weight ``1 / (1 + M)`` (1 for ``group-sum``) and its probability
        (``None``: only the keep probability is wanted; ``delta`` is then None).
    Returns:
      ``(delta, kept probability, expected mean reward)``.
    """
    table_b, ref_b = logits[None], ref[None]
    logq = jax.nn.log_softmax(logits, axis=-1).reshape(-1, logits.shape[-1])
    sym_logp = (logq[symbols["nodes"], symbols["tokens"]] * symbols["mask"]).sum(-1)  # [S]
    if symbols["noise"]:
        cls, rho0, rho1 = two_class(name, env, task_row, hp)
        rho = (cls[0] * rho1[0] + (1 - cls[0]) * rho0[0])[symbols["answer"]]
        bit = jnp.asarray(symbols["bit"])
        sym_logp = sym_logp + jnp.log(jnp.maximum(jnp.where(bit > 0, rho, 1.0 - rho), 1e-30))
    logP = jnp.asarray(table["lmc"], real()) + table["counts"] @ jnp.maximum(sym_logp, -1e30)
    P = jnp.exp(logP)  # [O]

    def outcome(group, label):
        rollout = _rollout(env, symbols, group)
        answers = rollout.answers
        if symbols["noise"]:
            rewards = jnp.asarray(symbols["bit"], real())[group][None]
        elif name == "majority":
            rewards = (answers == label).astype(real())
        elif name == "frozen":
            rewards = jnp.zeros(answers.shape, real())
        else:
            rewards = arms_mod.arm_rewards(name, None, None, env, task_row, answers, hp, None)
        logq_old = env.token_logq(table_b, rollout)
        logp_old = take_logp(logq_old, rollout.tokens)
        logq_ref = env.token_logq(ref_b, rollout)
        if algo.kl_placement == "reward":
            kl = KL_ESTIMATORS[algo.kl](logp_old, take_logp(logq_ref, rollout.tokens), logq_old, logq_ref)
            rewards = rewards - hp.beta * (kl * rollout.mask).sum(-1)
        kappa = 1.0 - hp.filter * zero_variance(rewards)
        adv = ESTIMATORS[algo.estimator](rewards, lengths=rollout.lengths, valid=kappa, hp=hp)
        mask = rollout.mask * kappa[:, None, None]

        def loss(z):
            return policy_loss(algo, env.token_logq(z, rollout), rollout.tokens, mask, adv, logp_old, logq_ref, hp)[0]

        def run(scale):
            z = table_b
            for _ in range(algo.epochs):  # the prompt's own update in each pass (it sits in one minibatch)
                z = z - hp.lr * scale * jax.grad(loss)(z)
            return z[0] - logits

        if scales is None:
            return None, kappa[0], rewards.mean()
        delta = jnp.tensordot(weights, jax.vmap(run)(scales), 1)
        return delta, kappa[0], rewards.mean()

    delta, kappa, rmean = jax.vmap(outcome)(jnp.asarray(table["group"]), jnp.asarray(table["label"]))
    return (None if delta is None else jnp.tensordot(P, delta, 1)), P @ kappa, P @ rmean


def general_step(env, algo, schedule, name, symbols, table, logits, ref, task, hp):
    """One expected step of the general path for one arm: ``(new tables [N, ...], diagnostics)``."""
    n = logits.shape[0]
    rows = lambda i: jax.tree_util.tree_map(lambda x: jax.lax.dynamic_slice_in_dim(x, i, 1), task)
    one = jnp.ones((1,), real())
    if algo.aggregation == "group-sum":
        incl, pm = schedule.batch_size / n, None
    else:  # a first pass for each prompt's keep probability: the batch's normaliser reads the others'
        _, q, _ = jax.vmap(lambda i: general_delta(env, algo, name, symbols, table, logits[i], ref[i], rows(i),
                                                   hp))(jnp.arange(n))
        incl, pm = batch_scale(algo, schedule, q, n)
    if pm is None:
        scales, weights = one[None].repeat(n, 0), one[None].repeat(n, 0)
    elif algo.epochs == 1:  # one update: linear in its weight, so the mean weight suffices
        scales = (pm / (1.0 + jnp.arange(pm.shape[-1]))).sum(-1, keepdims=True)
        weights = jnp.ones_like(scales)
    else:
        scales = jnp.broadcast_to(1.0 / (1.0 + jnp.arange(pm.shape[-1], dtype=real())), pm.shape)
        weights = pm
    delta, q, r = jax.vmap(lambda i: general_delta(env, algo, name, symbols, table, logits[i], ref[i], rows(i), hp,
                                                   scales[i], weights[i]))(jnp.arange(n))
    clip = jnp.zeros((), real()) if algo.epochs * algo.minibatches == 1 else jnp.asarray(jnp.nan, real())
    return logits + incl * delta, {"reward_mean": r.mean(), "kept_frac": q.mean(), "clip_frac": clip}


def expected_update(env, algo: AlgoSpec, schedule: Schedule, arm: str, task, logits, hp: Hyper, *,
                    precision: str = "float32"):
    """The exact expected table after one step from ``logits``: ``E[logits after the step]``.

    Compiled once per ``(env, algo, schedule, arm, precision)``. A bandit takes the path
    :func:`make_expected_train` takes (:func:`check` first). A small tree (or any
    environment with :func:`symbol_table`) enumerates every group of G leaves by its counts
    (``C(G + L - 1, L - 1)`` for L leaves) and applies the engine's loss to each (the general path; long
    tree runs are not offered); the tests compare both with the sampled engine. ``precision="float64"``
    traces and runs the step in double precision (:func:`tabsim._precision.scope`; numpy inputs and
    Python floats enter as float64, and the result is a float64 array).
    """
    with scope(precision):
        return _expected_update(env, algo, schedule, arm, task, logits, hp)


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3))
@full  # every product at full float32 precision, on every backend
def _expected_update(env, algo: AlgoSpec, schedule: Schedule, arm: str, task, logits, hp: Hyper):
    logits = jnp.asarray(logits, real())
    task = task.__class__(**{**task.__dict__, "prior_logits": jnp.asarray(task.prior_logits, real())})
    if arm == "frozen":
        return logits
    if getattr(env, "name", None) == "bandit":
        check(env, algo, schedule, (arm,))
    G = schedule.group_size
    if getattr(env, "name", None) == "bandit" and linear_path(algo, schedule):
        counts_np = compositions(G, env.n_answers)
        _, lmc, credit = majority_tables(G, env.n_answers, env.tie)
        maj = (jnp.asarray(credit, real()), jnp.asarray(counts_np.max(1)))
        counts = jnp.asarray(counts_np, real())
        tables = linear_tables(arm, env, task, algo, G, hp, counts, maj)
        return linear_step(algo, schedule, counts, jnp.asarray(lmc, real()), logits, task.prior_logits, tables, hp,
                           env.n_prompts, level_tables(algo, schedule))[0]
    symbols = symbol_table(env, arm in NOISE_ARMS)
    n_out = n_compositions(G, symbols["answer"].shape[0])
    if n_out > MAX_OUTCOMES:
        _refuse(f"{n_out:,} group outcomes per prompt (at most {MAX_OUTCOMES:,}): use a smaller tree or group")
    table = outcome_table(env, arm, G, symbols)
    return general_step(env, algo, schedule, arm, symbols, table, logits, task.prior_logits, task, hp)[0]


def level_tables(algo: AlgoSpec, schedule: Schedule):
    """A batch-level estimator's tables for :func:`linear_step` (``None`` for the other estimators)."""
    if algo.estimator not in BATCH_LEVEL:
        return None
    A1, A0 = batch.advantage_tables(algo, schedule)  # float64: cast to the program's type where used
    return A1, A0, batch.statistic(algo.estimator, schedule.group_size)


# -- the program ----------------------------------------------------------------------------------
def make_expected_train(env, algo: AlgoSpec, schedule: Schedule, arms: tuple[str, ...]):
    """Build ``train(seeds [S, 2], hypers [C]) -> history`` of the expected flow, like
    :func:`tabsim.engine.make_train` (same metrics, ``[C, S, A, E + 1]``). A seed only draws the task
    (answer positions, offline label); the flow itself has no randomness.

    Raises:
      ValueError: the configuration has no exact expected flow (:func:`check` says why).
    """
    check(env, algo, schedule, arms)
    if schedule.steps % schedule.eval_every:
        raise ValueError(f"train.eval_every: must divide steps={schedule.steps}, got {schedule.eval_every}")
    if schedule.batch_size % algo.minibatches:
        raise ValueError(f"algo.minibatches: must divide batch_size={schedule.batch_size}, got {algo.minibatches}")
    n_evals = schedule.steps // schedule.eval_every
    G, K, N = schedule.group_size, env.n_answers, env.n_prompts
    lin = linear_path(algo, schedule)
    level = level_tables(algo, schedule)
    if lin:
        # numpy here, arrays of the program's floating type where traced (float64 under precision="float64")
        counts_np = compositions(G, K)
        _, lmc_np, credit = majority_tables(G, K, env.tie)
    else:
        symbols = {noise: symbol_table(env, noise) for noise in (False, True)}
        tables = {a: outcome_table(env, a, G, symbols[a in NOISE_ARMS]) for a in arms if a != "frozen"}

    frozen = {"reward_mean": 0.0, "kept_frac": None, "clip_frac": 0.0}  # the engine's record of a frozen arm
    # the two-class arms of the linear path share one vmapped step (one copy of its code to compile)
    classed = [a for a in arms if a not in ("frozen", "majority")] if lin else []

    def train_one(seed, hp: Hyper):
        task = env.init_task(seed, hp)
        ref = task.prior_logits
        if lin:
            counts, lmc = jnp.asarray(counts_np, real()), jnp.asarray(lmc_np, real())
            maj = (jnp.asarray(credit, real()), jnp.asarray(counts_np.max(1)))
            maj_table = linear_tables("majority", env, task, algo, G, hp, counts, maj) if "majority" in arms else None
            cls_tables = [linear_tables(a, env, task, algo, G, hp, counts, maj) for a in classed]
            cls_stack = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *[t[1:] for t in cls_tables]) if classed else None

        def step(zs, _):
            new, diags = [None] * len(arms), [None] * len(arms)
            if classed:
                pos = [arms.index(a) for a in classed]
                z2, d2 = jax.vmap(lambda z, t: linear_step(algo, schedule, counts, lmc, z, ref, ("class", *t), hp, N,
                                                           level))(zs[jnp.asarray(pos)], cls_stack)
                for j, i in enumerate(pos):
                    new[i], diags[i] = z2[j], {k: v[j] for k, v in d2.items()}
            for i, a in enumerate(arms):
                if a == "frozen":
                    new[i], diags[i] = zs[i], {**frozen, "kept_frac": 1.0 - hp.filter}
                elif a == "majority" and lin:
                    new[i], diags[i] = linear_step(algo, schedule, counts, lmc, zs[i], ref, maj_table, hp, N, level)
                elif not lin:
                    new[i], diags[i] = general_step(env, algo, schedule, a, symbols[a in NOISE_ARMS], tables[a], zs[i],
                                                    ref, task, hp)
            return jnp.stack(new), {k: jnp.stack([jnp.asarray(d[k], real()) for d in diags]) for k in DIAG_KEYS}

        def chunk(zs, _):
            zs, diag = jax.lax.scan(step, zs, None, length=schedule.eval_every)
            return zs, (zs, {k: v.mean(0) for k, v in diag.items()})

        z0 = jnp.stack([ref for _ in arms])
        _, (tables_e, hist) = jax.lax.scan(chunk, z0, None, length=n_evals)
        # every eval point's tables evaluated together: one copy of the evaluation in the program
        all_tables = jnp.concatenate([z0[None], tables_e])  # [E + 1, A, N, K]
        metrics = jax.vmap(jax.vmap(lambda z: env.evaluate(z, task, hp)))(all_tables)
        out = {k: v.T for k, v in metrics.items()}
        nan = jnp.full((len(arms), 1), jnp.nan, real())
        out.update({k: jnp.concatenate([nan, hist[k].T], axis=1) for k in DIAG_KEYS})
        return out  # metric -> [A, E + 1]

    options = compiler_options(False)

    @functools.partial(jax.jit, compiler_options=options)
    @full  # every product at full float32 precision, on every backend
    def train(seeds, hypers):
        leaves, treedef = jax.tree_util.tree_flatten(hypers)
        n_cond = next((x.shape[0] for x in leaves if jnp.ndim(x) > 0), 1)
        axes = jax.tree_util.tree_unflatten(treedef, [0 if jnp.ndim(x) else None for x in leaves])
        per_cond = jax.vmap(lambda hp: jax.vmap(lambda s: train_one(s, hp))(seeds), in_axes=(axes,))
        if n_cond == 1 and not any(jnp.ndim(x) for x in leaves):
            return jax.tree_util.tree_map(lambda x: x[None], jax.vmap(lambda s: train_one(s, hypers))(seeds))
        return per_cond(hypers)

    train.xla_options = options  # read by tabsim.runtime.executables
    return train
