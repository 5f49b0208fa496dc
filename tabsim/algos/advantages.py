"""Advantage estimators: rewards ``[B, G]`` -> advantages ``[B, G]``.

Every estimator has the signature ``estimator(rewards, *, lengths, valid, hp)`` where

* ``rewards``: ``[B, G]`` float scalar rewards of the G answers of each of B groups;
* ``lengths``: ``[B, G]`` number of tokens of each answer (1 in a bandit);
* ``valid``: ``[B]`` float, 1 for groups that are part of the batch (0 for groups removed by the
  dynamic-sampling filter); only batch-level estimators (REINFORCE++) read it;
* ``hp``: the traced :class:`tabsim.algos.AlgoParams`.

Register a new estimator with :func:`register_estimator`.
"""
from __future__ import annotations

from typing import Callable

import jax.numpy as jnp

ESTIMATORS: dict[str, Callable] = {}


def register_estimator(name: str):
    def deco(fn):
        ESTIMATORS[name] = fn
        return fn

    return deco


def group_std(rewards, ddof):
    """Group standard deviation with ``ddof`` 0 (population) or 1 (Bessel / unbiased)."""
    g = rewards.shape[-1]
    centred = rewards - rewards.mean(-1, keepdims=True)
    return jnp.sqrt((centred**2).sum(-1, keepdims=True) / (g - ddof))


@register_estimator("grpo")
def grpo(rewards, *, lengths, valid, hp):
    """Group z-score: ``A = (r - mean_g) / (std_g + eps)`` (DeepSeekMath, arXiv 2402.03300).

    ``hp.std_ddof`` picks the population (0; reference simulator) or Bessel (1; TRL, verl) std and
    ``hp.std_eps`` the epsilon (1e-8 reference, 1e-4 TRL, 1e-6 verl).
    """
    centred = rewards - rewards.mean(-1, keepdims=True)
    return centred / (group_std(rewards, hp.std_ddof) + hp.std_eps)


@register_estimator("dr_grpo")
def dr_grpo(rewards, *, lengths, valid, hp):
    """Centred reward ``A = r - mean_g`` with no std scaling (Dr. GRPO, arXiv 2503.20783)."""
    return rewards - rewards.mean(-1, keepdims=True)


@register_estimator("rloo")
def rloo(rewards, *, lengths, valid, hp):
    """Leave-one-out baseline ``A_i = r_i - mean_{j != i} r_j = G/(G-1) (r_i - mean_g)``.

    Ahmadian et al., arXiv 2402.14740.
    """
    g = rewards.shape[-1]
    return (rewards.sum(-1, keepdims=True) - rewards) * (-1.0 / (g - 1)) + rewards


def _masked_whiten(x, weights, eps):
    """Whiten ``x`` over all entries with weight 1, unbiased variance (verl ``masked_whiten``)."""
    n = weights.sum()
    mean = (x * weights).sum() / jnp.maximum(n, 1.0)
    var = (((x - mean) ** 2) * weights).sum() / jnp.maximum(n - 1.0, 1.0)
    return (x - mean) * jnp.reciprocal(jnp.sqrt(var + eps)) * weights


@register_estimator("reinforce_pp")
def reinforce_pp(rewards, *, lengths, valid, hp):
    """Return whitened over the whole batch: ``A = (r - mean_B) / sqrt(var_B + 1e-8)``.

    REINFORCE++ (Hu, arXiv 2501.03262); masked, unbiased variance as in verl.
    """
    w = jnp.broadcast_to(valid[:, None], rewards.shape)
    return _masked_whiten(rewards, w, 1e-8)


@register_estimator("reinforce_pp_baseline")
def reinforce_pp_baseline(rewards, *, lengths, valid, hp):
    """Group mean subtracted first, then whitened over the batch (REINFORCE++-baseline)."""
    w = jnp.broadcast_to(valid[:, None], rewards.shape)
    return _masked_whiten(rewards - rewards.mean(-1, keepdims=True), w, 1e-8)


@register_estimator("opo")
def opo(rewards, *, lengths, valid, hp):
    """Length-weighted group baseline ``A_i = r_i - sum_j |o_j| r_j / sum_j |o_j|`` (OPO)."""
    lengths = lengths.astype(rewards.dtype)
    base = (lengths * rewards).sum(-1, keepdims=True) / jnp.maximum(lengths.sum(-1, keepdims=True), 1.0)
    return rewards - base


@register_estimator("gpg")
def gpg(rewards, *, lengths, valid, hp):
    """Group-mean baseline scaled by ``alpha = batch size / #nonzero-reward samples`` (GPG).

    Chu et al., arXiv 2504.02546; counts run over the groups in the batch.
    """
    w = jnp.broadcast_to(valid[:, None], rewards.shape)
    n = w.sum()
    m = ((rewards != 0) * w).sum()
    alpha = n / jnp.maximum(m, 1.0)
    return alpha * (rewards - rewards.mean(-1, keepdims=True))


@register_estimator("passk")
def passk(rewards, *, lengths, valid, hp):
    """Pass@k advantage: only the best answer gets ``r_max - r_second``; all others 0.

    Ties for the best go to the lowest index, so a group with two best answers gives 0.
    """
    g = rewards.shape[-1]
    best = jnp.argmax(rewards, axis=-1)
    r_max = jnp.max(rewards, axis=-1)
    is_best = jnp.arange(g) == best[..., None]
    r_second = jnp.max(jnp.where(is_best, -jnp.inf, rewards), axis=-1)
    return jnp.where(is_best, (r_max - r_second)[..., None], 0.0)


@register_estimator("sign")
def sign(rewards, *, lengths, valid, hp):
    """``A = 2 r - 1``: homogeneous groups still move (no group baseline)."""
    return 2.0 * rewards - 1.0
