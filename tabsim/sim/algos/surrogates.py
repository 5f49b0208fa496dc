"""Per-token policy losses (minimised): ``surrogate(log_ratio, logp, adv, hp) -> [B, G, T]``.

``log_ratio`` comes from :mod:`tabsim.sim.algos.ratios`, ``adv`` is ``[B, G, 1]`` (broadcast over
tokens) and ``logp`` the differentiable token log-probabilities, needed by the ratio-free losses.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from tabsim.base.registry import Registry

SURROGATES = Registry("surrogate")


def register_surrogate(name: str, *, clipped: bool = True):
    """Register ``fn(log_ratio, logp, adv, hp)``; ``clipped=False`` for losses with no hard clip (they never
    zero a token's gradient, so their clip fraction is 0)."""
    return SURROGATES.register(name, clipped=clipped)


@register_surrogate("clip")
def ppo_clip(log_ratio, logp, adv, hp):
    """PPO clip: ``max(-A w, -A clip(w, 1 - eps_low, 1 + eps_high))`` (Schulman et al. 2017).

    DAPO's clip-higher is ``eps_high > eps_low`` (arXiv 2503.14476). This is TRL's GRPO loss;
    verl's ``vanilla`` loss always adds the dual clip (``dual_clip``).
    """
    w = jnp.exp(log_ratio)
    return jnp.maximum(-adv * w, -adv * jnp.clip(w, 1.0 - hp.eps_low, 1.0 + hp.eps_high))


@register_surrogate("dual_clip")
def dual_clip(log_ratio, logp, adv, hp):
    """PPO clip plus the dual clip: for ``A < 0`` the loss is capped at ``-A c`` (verl, c = 3).

    Ye et al., arXiv 1912.09729.
    """
    clipped = ppo_clip(log_ratio, logp, adv, hp)
    return jnp.where(adv < 0, jnp.minimum(clipped, -adv * hp.dual_clip_c), clipped)


@register_surrogate("cispo", clipped=False)
def cispo(log_ratio, logp, adv, hp):
    """CISPO: ``-sg(clip(w, 1 - eps_low, 1 + eps_high)) A logp`` (MiniMax-M1, arXiv 2506.13585).

    The weight is clipped and detached, so every token keeps a gradient (verl ``cispo``). The paper
    and TRL (``torch.clamp(w, max=epsilon_high)``) have no lower bound: ``eps_low = 1`` (TRL's
    ``epsilon_high`` is this ``1 + eps_high``).
    """
    w = jax.lax.stop_gradient(jnp.clip(jnp.exp(log_ratio), 1.0 - hp.eps_low, 1.0 + hp.eps_high))
    return -w * adv * logp


@register_surrogate("sapo", clipped=False)
def sapo(log_ratio, logp, adv, hp):
    """SAPO soft gate: ``-A (4 / tau) sigmoid(tau (w - 1))``, tau_pos for A > 0, tau_neg else.

    Soft Adaptive Policy Optimization (arXiv 2511.20347; TRL/verl ``sapo``). The gate has slope 1
    at ``w = 1``, so on-policy its gradient equals the plain policy gradient.
    """
    w = jnp.exp(log_ratio)
    tau = jnp.where(adv > 0, hp.sapo_tau_pos, hp.sapo_tau_neg)
    return -adv * (4.0 / tau) * jax.nn.sigmoid(tau * (w - 1.0))


@register_surrogate("importance", clipped=False)
def importance(log_ratio, logp, adv, hp):
    """Unclipped importance-weighted policy gradient ``-A w``."""
    return -adv * jnp.exp(log_ratio)


@register_surrogate("reinforce", clipped=False)
def reinforce(log_ratio, logp, adv, hp):
    """Plain REINFORCE / GPG: ``-A logp`` with no ratio (the reference simulator's update)."""
    return -adv * logp


def clip_fraction(log_ratio, adv, mask, hp, surrogate: str = "clip"):
    """Fraction of valid tokens whose PPO clip is active (the gradient is zeroed); 0 for a surrogate
    registered with ``clipped=False`` (REINFORCE, the unclipped ratio, CISPO's detached weight, SAPO's
    soft gate: every token keeps its gradient)."""
    if not SURROGATES.meta(surrogate).get("clipped", True):
        return jnp.zeros((), jnp.float32)
    w = jnp.exp(log_ratio)
    active = ((adv > 0) & (w > 1.0 + hp.eps_high)) | ((adv < 0) & (w < 1.0 - hp.eps_low))
    return (active * mask).sum() / jnp.maximum(mask.sum(), 1.0)
