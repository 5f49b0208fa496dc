"""PPO's critic as a table: a value per state learned from the sampled returns (``algo.tracker = "value"``).

PPO (arXiv 1707.06347) with verl's ``gae`` advantage estimator at ``gamma = lambda = 1`` on a terminal reward. Every
state ``s`` (a prompt of the bandit; a (prompt, node) of the tree: the state before each token) carries a value
``V(s)``, 0 at the start. An answer's reward ``R`` arrives after its last token, so GAE's

    delta_t = r_t + gamma V(s_{t+1}) - V(s_t),      A_t = sum_k (gamma lambda)^k delta_{t+k}

telescopes at ``gamma = lambda = 1`` to ``A_t = R - V(s_t)``, and the return is ``R`` at every token. The advantages
are whitened over every valid token of the batch, ``(A - mean A) / sqrt(var A + 1e-8)`` (Bessel variance), and
enter PPO's clipped surrogate (``algo.surrogate = "clip"``). After the step each visited state moves toward the
mean return of its visits in the batch,

    V(s) <- V(s) + alpha mean_{visits of s}(R - V(s))      (alpha: ``algo.value_lr``, traced),

an every-visit Monte-Carlo regression with its own step size (the regression of the critic's squared error
``(V(s_t) - R)^2`` by one step per batch, per state).

Checked against verl's ``core_algos.compute_gae_advantage_return`` (the backward recursion ``delta = r_t + gamma
nextvalues - values_t``, ``lastgaelam = delta + gamma lam lastgaelam``, ``nextvalues`` 0 after the last position,
``returns = advantages + values``, then ``verl_F.masked_whiten(advantages, response_mask)``: masked mean, Bessel
``masked_var``, ``rsqrt(var + 1e-8)``) and verl's placement of an outcome score on the response's last token; verl's
critic is a neural value head whose values are masked by the response mask, so the value after the last token is 0,
as here. What is PPO here and what is not: the advantage, its whitening, the clipped surrogate and a critic learned
from the sampled returns are; the critic is a table (one free value per state, no function approximation, no value
clipping ``cliprange_value``, no shared trunk with the policy, no critic warm-up), and it is updated once per batch
by the step above rather than by minibatch SGD on verl's clipped value loss.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from tabsim.sim.pytree import pytree_dataclass

WHITEN_EPS = 1e-8  # verl's masked_whiten: rsqrt(var + 1e-8)


@pytree_dataclass
class ValueTable:
    """``V [N, n_nodes]``: the value of each state (a bandit's prompts have one node)."""

    v: jax.Array

    def advantages(self, idx, rewards, rollout):
        return advantages(self, idx, rewards, rollout)

    def advance(self, idx, rewards, rollout, hp):
        return advance(self, idx, rewards, rollout, hp.value_lr)


def init(n_prompts: int, n_nodes: int, dtype=jnp.float32) -> ValueTable:
    """Every state's value 0 at the start."""
    return ValueTable(v=jnp.zeros((n_prompts, n_nodes), dtype))


def visited(table: ValueTable, idx, rollout):
    """``([B, G, T] values of the states before each token, [B, G, T] nodes, [B, G, T] mask)``."""
    nodes = getattr(rollout, "nodes", None)
    if nodes is None:  # the bandit: one state per prompt
        nodes = jnp.zeros(rollout.tokens.shape, jnp.int32)
    return table.v[idx[:, None, None], nodes], nodes, rollout.mask


def whiten(adv, mask):
    """verl's ``masked_whiten``: ``(A - mean) / sqrt(var + 1e-8)`` over the mask, Bessel variance."""
    n = mask.sum()
    mean = (adv * mask).sum() / n
    var = (((adv - mean) ** 2) * mask).sum() / n * n / (n - 1)
    return (adv - mean) * jax.lax.rsqrt(var + WHITEN_EPS)


def advantages(table: ValueTable, idx, rewards, rollout):
    """GAE at ``gamma = lambda = 1``: ``R - V(s_t)`` per token, whitened over the batch's valid tokens; ``[B, G]``
    for one-token answers, else ``[B, G, T]`` (0 on padding)."""
    values, _, mask = visited(table, idx, rollout)
    adv = whiten(rewards[..., None] - values, mask) * mask
    return adv[..., 0] if adv.shape[-1] == 1 else adv


def advance(table: ValueTable, idx, rewards, rollout, lr):
    """Each visited state moved by ``lr`` toward the mean return of its visits in the batch."""
    values, nodes, mask = visited(table, idx, rollout)
    err = (rewards[..., None] - values) * mask
    flat = (idx[:, None, None] * table.v.shape[1] + nodes).reshape(-1)
    total = jnp.zeros(table.v.size, table.v.dtype).at[flat].add(err.reshape(-1))
    count = jnp.zeros(table.v.size, table.v.dtype).at[flat].add(mask.reshape(-1))
    step = jnp.where(count > 0, total / jnp.maximum(count, 1.0), 0.0).reshape(table.v.shape)
    return ValueTable(v=table.v + lr * step)
