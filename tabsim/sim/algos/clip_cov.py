"""Clip-Cov: PPO's clip, with the gradient of a few randomly drawn tokens of large covariance cut.

Cui et al., "The Entropy Mechanism of Reinforcement Learning for Reasoning Language Models", arXiv 2505.22617, as
verl's ``compute_policy_loss_clip_cov`` (``verl/trainer/ppo/core_algos.py``, adapted there from the authors'
PRIME-RL/Entropy-Mechanism-of-RL; read in verl's current source). Over the batch's ``n`` valid tokens:

* ``L_t = max(-A_t w_t, -A_t clip(w_t, 1 - eps_low, 1 + eps_high))`` (no dual clip), ``w_t`` from the ratio
  component (verl: per token);
* ``cov_t = (A_t - mean A)(logp_t - mean logp)`` (means over the valid tokens; ``logp`` the current policy's,
  detached), left out where the clip already holds the token (``-A clip(w) > -A w``, strictly);
* the candidates are the tokens with ``clip_cov_lb < cov_t < clip_cov_ub``; ``max(1, floor(n clip_cov_ratio))`` of
  them (all if fewer) are drawn uniformly at random without replacement, and their loss is multiplied by 0 (value
  and gradient).

verl draws them with ``torch.randperm``; here the draw is a function of the step's seed words: each token carries
a uniform of the step (``Batch.uniforms``, drawn by the update at its own address,
:func:`step_uniforms`) and the candidates with the smallest uniforms are cut, which is a uniformly random subset of
that size, reproducible from the seed. Without uniforms (a direct call of the loss) the earliest candidates in
``[B, G, T]`` order are cut. verl applies it per micro-batch, tabsim over the (mini)batch, as ``kl_cov``. The
clip fraction reported is PPO's (the tokens the clip holds), not verl's fraction of cut tokens. With no candidate
(or ``clip_cov_lb`` above every covariance) it is the ``clip`` surrogate.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from tabsim.sim import rng as R
from tabsim.sim.algos.surrogates import SURROGATES, register_surrogate

UNIFORMS_TAG = 0x636C6376  # the address of the step's token uniforms ("clcv"), apart from tabsim.sim.rng's tags


def reads_uniforms(surrogate: str) -> bool:
    """Whether surrogate ``surrogate`` draws tokens at random and reads ``Batch.uniforms``."""
    return bool(SURROGATES.meta(surrogate).get("reads_uniforms", False)) if surrogate in SURROGATES else False


def step_uniforms(seed, step, shape, rng: str):
    """``shape`` uniforms in ``[0, 1)`` of the step ``(seed, step)`` at :data:`UNIFORMS_TAG` (``rng``: the run's
    generator): the same seed and step give the same draw."""
    return R.uniform(seed, tuple(shape), step=step, tag=UNIFORMS_TAG, rng=rng)


def clip_cov_cut(adv, logp, log_ratio, mask, hp, uniforms=None):
    """``[B, G, T]`` bool: the tokens whose loss Clip-Cov multiplies by 0 (see the module docstring)."""
    a = jnp.broadcast_to(adv, logp.shape)
    lp = jax.lax.stop_gradient(logp)
    on = mask > 0
    n = mask.sum()
    mean = lambda x: (x * mask).sum() / jnp.maximum(n, 1.0)  # noqa: E731  (verl's masked_mean)
    w = jnp.exp(jax.lax.stop_gradient(log_ratio))
    held = (-a * jnp.clip(w, 1.0 - hp.eps_low, 1.0 + hp.eps_high) > -a * w) & on
    cov = (a - mean(a)) * (lp - mean(lp))
    candidate = on & ~held & (cov > hp.clip_cov_lb) & (cov < hp.clip_cov_ub)
    u = jnp.zeros(logp.shape, logp.dtype) if uniforms is None else uniforms.astype(logp.dtype)
    order = jnp.argsort(jnp.where(candidate, u, jnp.inf).reshape(-1), stable=True)
    rank = jnp.zeros_like(order).at[order].set(jnp.arange(order.size, dtype=order.dtype)).reshape(logp.shape)
    k = jnp.maximum(jnp.floor(n * hp.clip_cov_ratio), 1.0)
    return candidate & (rank < k)


@register_surrogate("clip_cov", batch=True, reads_uniforms=True,
                    no_expected="it cuts tokens drawn at random among the whole batch's tokens of large covariance, "
                                "which the expected flow's per-prompt groups do not see")
def clip_cov(batch):
    """Clip-Cov: ``max(-A w, -A clip(w, 1 - eps_low, 1 + eps_high))``, times 0 on the drawn tokens of large
    covariance (module docstring; verl ``loss_mode=clip_cov``).

    Args:
      batch: a :class:`tabsim.sim.algos.batch.Batch`; reads ``log_ratio``, ``logp``, ``adv``, ``mask``, ``uniforms``
        and ``hp`` (``eps_low``, ``eps_high``, ``clip_cov_ratio``, ``clip_cov_lb``, ``clip_cov_ub``).
    Returns:
      ``[B, G, T]`` per-token losses.
    """
    l, adv, hp = batch.log_ratio, batch.adv, batch.hp
    w = jnp.exp(l)
    loss = jnp.maximum(-adv * w, -adv * jnp.clip(w, 1.0 - hp.eps_low, 1.0 + hp.eps_high))
    cut = clip_cov_cut(adv, batch.logp, l, batch.mask, hp, batch.uniforms)
    return jnp.where(cut, 0.0, loss)
