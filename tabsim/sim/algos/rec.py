"""REC: REINFORCE with clipping as a regulariser, with or without the importance weight (arXiv 2509.24203).

Yao et al., "Group-Relative REINFORCE Is Secretly an Off-Policy Algorithm" (arXiv 2509.24203), name a family of
group-relative REINFORCE losses (REC) in which the PPO clip is kept as a mask on the plain REINFORCE gradient and
the importance weight is optional. The formulas below were read from the authors' released loss, Trinity-RFT's
``trinity/algorithm/policy_loss_fn/rec_policy_loss.py`` (``RECPolicyLossFn``; the same at agentscope-ai/Trinity-RFT
1d7fae4 and the first author's fork yaochaorui/Trinity-RFT 0aa43a4), and the settings of each variant from the
example that the paper names, ``examples/rec_gsm8k/README.md`` (REC-OneSide-NoIS: ``clip_mode = "one-side"``,
``weight = "none"``, epsilon 0.2 / 0.2, ``std_normalize: false``). With the detached token ratio
``w = sg(exp(logp - logp_old))`` the per-token loss is

    -A c(w) logp M(w, A)

with ``c = 1`` (``weight = "none"``: NoIS) or ``c = w`` (``weight = "importance_sampling"``: IS), and the mask

* one-side: ``M = 1[A >= 0, w <= 1 + eps_high] + 1[A <= 0, w >= 1 - eps_low]``;
* two-side: ``M = 1[1 - eps_low <= w <= 1 + eps_high]`` whatever the sign of ``A``.

Only the mask and the weight are read from the ratio; its gradient flows through ``logp`` alone. REC-OneSide-IS's
gradient, ``-A w grad(logp)`` where the mask holds, is the PPO clip's (the ``clip`` surrogate) except on the
measure-zero boundaries ``w = 1 +- eps``, so it is not a surrogate of its own here. A token the mask drops counts
as clipped (Trinity-RFT's ``pg_clipfrac``: the share of tokens out of range). The paper's body was not readable
here (its stored copies hold the abstract); the family's names and settings come from the authors' code and
example. The ring variant (``epsilon_low_prime``, ``epsilon_high_prime``) and the ``"forward-kl"`` regulariser are not
built; the ``"k2"`` regulariser with no clip and no weight, the example's "Kimi's OPMD", is :func:`opmd`.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from tabsim.sim.algos.surrogates import register_surrogate


def _w(log_ratio):
    return jax.lax.stop_gradient(jnp.exp(log_ratio))


def oneside_in_range(log_ratio, adv, hp):
    """REC's one-side mask: ``w <= 1 + eps_high`` where ``A >= 0``, ``w >= 1 - eps_low`` where ``A <= 0``."""
    w = _w(log_ratio)
    return ((adv >= 0) & (w <= 1.0 + hp.eps_high)) | ((adv <= 0) & (w >= 1.0 - hp.eps_low))


def twoside_in_range(log_ratio, adv, hp):
    """REC's two-side mask: ``1 - eps_low <= w <= 1 + eps_high`` (``adv`` only sets the shape)."""
    w = _w(log_ratio)
    return jnp.broadcast_to((w >= 1.0 - hp.eps_low) & (w <= 1.0 + hp.eps_high), jnp.broadcast_shapes(w.shape, adv.shape))


def _dropped(in_range):
    return lambda log_ratio, adv, hp: ~in_range(log_ratio, adv, hp)


@register_surrogate("rec_oneside_nois", clipped=_dropped(oneside_in_range))
def rec_oneside_nois(log_ratio, logp, adv, hp):
    """REC-OneSide-NoIS (arXiv 2509.24203, Trinity-RFT ``rec``: ``clip_mode = "one-side"``, ``weight = "none"``):
    ``-A logp M`` with the one-side mask ``M`` of the detached ratio (module docstring)."""
    return -adv * logp * oneside_in_range(log_ratio, adv, hp)


@register_surrogate("rec_twoside_nois", clipped=_dropped(twoside_in_range))
def rec_twoside_nois(log_ratio, logp, adv, hp):
    """REC-TwoSide-NoIS (arXiv 2509.24203, Trinity-RFT ``rec``: ``clip_mode = "two-side"``, ``weight = "none"``):
    ``-A logp M`` with the two-side mask ``M = 1[1 - eps_low <= w <= 1 + eps_high]``."""
    return -adv * logp * twoside_in_range(log_ratio, adv, hp)


@register_surrogate("rec_twoside_is", clipped=_dropped(twoside_in_range))
def rec_twoside_is(log_ratio, logp, adv, hp):
    """REC-TwoSide-IS (arXiv 2509.24203, Trinity-RFT ``rec``: ``clip_mode = "two-side"``,
    ``weight = "importance_sampling"``): ``-A sg(w) logp M`` with the two-side mask."""
    return -adv * _w(log_ratio) * logp * twoside_in_range(log_ratio, adv, hp)


@register_surrogate("opmd", clipped=False)
def opmd(log_ratio, logp, adv, hp):
    """OPMD as arXiv 2509.24203 reinterprets it, REINFORCE plus a squared log-ratio regulariser:
    ``-A logp + c (logp - logp_old)^2`` per token, ``c = opmd_coef``.

    Read from the authors' loss (Trinity-RFT ``RECPolicyLossFn``, ``regularizer = "k2"``: ``pg_losses +
    regularizer_coef * (logprob - old_logprob).square()``, whose comment says the 1/2 of Kimi's form is absorbed
    into the coefficient) with the example's settings (``clip_mode = "none"``, ``weight = "none"``,
    ``regularizer_coef = 0.1``). Kimi k1.5's own statement of OPMD was not read here. ``log_ratio`` is the ratio
    component's (``logp - logp_old`` for the token ratio) and carries the gradient, as the authors' ``logprob``
    does; on policy it is 0 with gradient 0, so the update is REINFORCE's. No token is clipped.
    """
    return -adv * logp + hp.opmd_coef * log_ratio**2


__all__ = ["oneside_in_range", "opmd", "rec_oneside_nois", "rec_twoside_is", "rec_twoside_nois", "twoside_in_range"]
