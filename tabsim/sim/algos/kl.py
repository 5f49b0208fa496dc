"""KL-to-reference estimators, per token: ``kl(logp, logp_ref, logq, logq_ref) -> [B, G, T]``.

``logp``/``logp_ref`` are the sampled tokens' log-probabilities under the policy and the reference;
``logq``/``logq_ref`` are the full next-token log-distributions ``[B, G, T, A]`` at the visited
nodes, which a tabular simulator has and so can use for the exact KL.
"""
from __future__ import annotations

import jax.numpy as jnp

from tabsim.base import choices
from tabsim.base.registry import Registry

KL_ESTIMATORS = Registry("kl", builtin=choices.KL_ESTIMATORS)
register_kl = KL_ESTIMATORS.register  # ``@register_kl(name)`` adds a function under a new name


@register_kl("k1")
def k1(logp, logp_ref, logq, logq_ref):
    """``k1 = l_ref = logp - logp_ref`` (unbiased, high variance; Schulman 2020)."""
    return logp - logp_ref


@register_kl("k2")
def k2(logp, logp_ref, logq, logq_ref):
    """``k2 = l_ref^2 / 2``."""
    return 0.5 * (logp - logp_ref) ** 2


@register_kl("k3")
def k3(logp, logp_ref, logq, logq_ref):
    """``k3 = exp(-l_ref) + l_ref - 1`` (verl ``low_var_kl``, DeepSeekMath)."""
    l = logp - logp_ref
    return jnp.exp(-l) + l - 1.0


# verl's numerical guards of ``low_var_kl`` (``kl_penalty`` in ``verl/trainer/ppo/core_algos.py``)
LOW_VAR_KL_LOG_RATIO_CLAMP = 20.0
LOW_VAR_KL_CLAMP = 10.0


@register_kl("low_var_kl")
def low_var_kl(logp, logp_ref, logq, logq_ref):
    """``k3`` as verl computes it: ``clip(exp(-l') + l' - 1, -10, 10)`` with ``l' = clip(l_ref, -20, 20)``.

    The clamp binds whenever ``k3 > 10``, i.e. when the sampled token's reference probability is more
    than about 13.6 times its policy probability (``l_ref < -2.6``): there the value is 10 and the
    gradient 0, where ``k3`` keeps growing (policy 0.02 and reference 0.5: ``k3 = 20.78`` with
    ``dk3/dlogp = -24``). TRL's k3 has no clamp (``k3``).
    """
    l = jnp.clip(logp - logp_ref, -LOW_VAR_KL_LOG_RATIO_CLAMP, LOW_VAR_KL_LOG_RATIO_CLAMP)
    return jnp.clip(jnp.exp(-l) + l - 1.0, -LOW_VAR_KL_CLAMP, LOW_VAR_KL_CLAMP)


@register_kl("exact")
def exact(logp, logp_ref, logq, logq_ref):
    """Exact ``KL(pi || pi_ref)`` of the next-token distribution at each visited node."""
    return (jnp.exp(logq) * (logq - logq_ref)).sum(-1)


@register_kl("ref_ce")
def ref_ce(logp, logp_ref, logq, logq_ref):
    """Cross-entropy ``-sum pi_ref log pi`` at the node; its logit gradient is ``pi - pi_ref``.

    This is the reference simulator's simplified KL surrogate ``-beta (pi - pi_ref)`` written as a
    loss (it is the gradient of ``KL(pi_ref || pi)``, not of ``KL(pi || pi_ref)``).
    """
    return -(jnp.exp(logq_ref) * logq).sum(-1)
