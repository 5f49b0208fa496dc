"""The general path of the expected flow: every group outcome's own sequence of updates.

Used with off-policy reuse (``epochs > 1``) or a KL penalty in the reward: every outcome is run with the
engine's loss, vectorised over outcomes. Reward noise is then enumerated jointly with the answers (``2K``
symbols). A small tree enumerates its leaves the same way.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from tabsim.sim import arms as arms_mod
from tabsim.base.precision import real
from tabsim.sim.algos import KL_ESTIMATORS, AlgoSpec, advantages, policy_loss, take_logp, zero_variance
from tabsim.sim.expected.batch import batch_scale
from tabsim.sim.expected.linear import two_class
from tabsim.sim.envs.bandit import Rollout, compositions
from tabsim.sim.envs.tree import TreeRollout
from tabsim.sim.params import Hyper


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
        adv = advantages(algo, rewards, lengths=rollout.lengths, valid=kappa, hp=hp)
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
