"""HölderPO's ratio: the power (Hölder) mean of an answer's token ratios, one ratio per answer.

Hölder Policy Optimisation (Chen, Liang, Chen et al., arXiv 2605.12058), as its authors' released trainer
(github.com/YihangChen9/HolderPO, ``train_zero_math_holder.py``, ``critic_type_modify == "holder"``, read at
1d27a37): with ``w_t = pi(o_t) / pi_old(o_t)`` the answer's token ratios and ``|o|`` its length,

    ``rho_p = ((1/|o|) sum_t w_t^p)^(1/p)``,   and ``rho_0 = exp((1/|o|) sum_t log w_t)`` for ``|p| < 1e-6``,

and their loss is PPO's clip of that one ratio, ``max(-A rho_p, -A clip(rho_p, 1 - eps, 1 + eps))`` per answer,
averaged over answers: here the ``holder`` ratio with the ``clip`` surrogate and ``seq-mean-token-mean`` (the
answer's loss broadcast to its tokens). Checked against their code: the ``|p| < 1e-6`` switch to the geometric
mean, the mask-weighted mean over the answer's tokens, the sequence-level (not per-token) clip. The reductions:
``p = 1`` the arithmetic mean of the token ratios, ``p -> 0`` the geometric mean (``sequence``, GSPO), one-token
answers the ``token`` ratio for every ``p``. ``p`` is the traced ``hp.holder_p`` (constant over a run: the
authors' ``holder_p_schedule = "constant"``; their released script anneals it, ``linear_dec`` from 2 to -2
over 500 steps, which is not built here).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from tabsim.sim.algos.ratios import register_ratio

P_ZERO = 1e-6  # |p| below this: the geometric mean (the authors' threshold)


def holder_log_ratio(l, mask, p):
    """``[B, G, 1]`` ``log rho_p`` of the token log-ratios ``l [B, G, T]`` over the mask's tokens: ``(1/p)
    (logsumexp_t(p l_t) - log |o|)``, or the mean of ``l`` where ``|p| < 1e-6``; 0 for an answer with no token."""
    n = jnp.maximum(mask.sum(-1, keepdims=True), 1.0)
    geometric = (l * mask).sum(-1, keepdims=True) / n
    small = jnp.abs(p) < P_ZERO
    q = jnp.where(small, 1.0, p)  # a safe divisor on the branch the where drops (no NaN in its gradient)
    on, any_on = mask > 0, mask.sum(-1, keepdims=True) > 0
    x = q * l
    m = jax.lax.stop_gradient(jnp.where(any_on, jnp.max(jnp.where(on, x, -jnp.inf), -1, keepdims=True), 0.0))
    # padding enters exp as the shift itself (exp 0, then dropped): no overflow, no 0 * inf in the gradient
    total = jnp.where(on, jnp.exp(jnp.where(on, x, m) - m), 0.0).sum(-1, keepdims=True)
    power = (m + jnp.log(jnp.where(any_on, total, 1.0)) - jnp.log(n)) / q
    return jnp.where(small, geometric, power)


@register_ratio("holder", batch=True)
def holder_ratio(batch):
    """HölderPO: ``log ((1/|o|) sum_t w_t^p)^(1/p)``, one log-ratio per answer broadcast to its tokens (see the
    module docstring; ``p = hp.holder_p``). The gradient flows through every token, weighted by ``w_t^p /
    sum_s w_s^p``: ``p > 1`` leans on the tokens whose ratio grew most, ``p < 0`` on those that shrank most.

    Args:
      batch: a :class:`tabsim.sim.algos.batch.Batch`; reads ``logp``, ``logp_old``, ``mask`` and ``hp.holder_p``.
    Returns:
      ``[B, G, T]`` the answer's log-ratio on each of its tokens (0 on padding).
    """
    logp, mask = batch.logp, batch.mask
    l = (logp - batch.logp_old) * mask
    return jnp.broadcast_to(holder_log_ratio(l, mask, batch.hp.holder_p), logp.shape) * mask
