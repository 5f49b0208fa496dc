"""Importance log-ratios ``l = logp - logp_old`` at token or sequence level.

Signature: ``ratio(logp, logp_old, mask) -> log_ratio`` with all arrays ``[B, G, T]``. A sequence
ratio is broadcast to the answer's tokens; the surrogate then treats it as one unit (every token of
an answer is clipped or not together), and any aggregation of the broadcast copies gives the
per-answer objective (verl's GSPO-token form has the same value and gradient).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from tabsim.base import choices
from tabsim.base.registry import Registry

RATIOS = Registry("ratio", builtin=choices.RATIOS)
register_ratio = RATIOS.register  # ``@register_ratio(name)`` adds a function under a new name


@register_ratio("token")
def token_ratio(logp, logp_old, mask):
    """Per-token log-ratio ``l_t = logp_t - logp_old_t`` (PPO, GRPO, DAPO)."""
    return (logp - logp_old) * mask


@register_ratio("sequence")
def sequence_ratio(logp, logp_old, mask):
    """One log-ratio per answer, ``mean_t l_t``, broadcast to its tokens (GSPO, arXiv 2507.18071).

    The gradient flows through every token: ``d s_i / d logp_t = s_i / |o_i|``.
    """
    n = jnp.maximum(mask.sum(-1, keepdims=True), 1.0)
    seq = ((logp - logp_old) * mask).sum(-1, keepdims=True) / n
    return jnp.broadcast_to(seq, logp.shape) * mask


@register_ratio("sequence-sum")
def sequence_sum_ratio(logp, logp_old, mask):
    """One log-ratio per answer, the full likelihood ratio ``sum_t l_t`` (TRL ``RLOOTrainer``).

    Ahmadian et al., arXiv 2402.14740: the whole completion is one action.
    """
    seq = ((logp - logp_old) * mask).sum(-1, keepdims=True)
    return jnp.broadcast_to(seq, logp.shape) * mask


@register_ratio("cumulative")
def cumulative_ratio(logp, logp_old, mask):
    """CTPO's cumulative token log-ratio: the value ``sum_{k <= t} l_k``, the gradient through ``logp_t`` alone.

    Cumulative Token Policy Optimization (Zhang et al., arXiv 2605.07331), as its authors' released
    ``_compute_policy_loss_cum_token_la_impl`` with ``ratio_mode="cumprod"`` (github.com/horizon-llm/CTPO,
    ``verl/trainer/ppo/core_algos.py``): ``log r_t = sg(sum_{k <= t} l_k) + logp_t - sg(logp_t)``, each ``l_k =
    logp_k - logp_old_k`` clamped to ``[-20, 20]`` and ``log r_t`` to at most 10, as theirs. The product of the
    prefix's ratios corrects the state distribution of token ``t`` (the prefix) as well as its action; with
    one-token answers it is the ``token`` ratio.
    """
    l = jnp.clip(logp - logp_old, -20.0, 20.0) * mask
    prefix = jax.lax.stop_gradient(jnp.cumsum(l, axis=-1))
    return jnp.minimum(prefix + logp - jax.lax.stop_gradient(logp), 10.0) * mask
