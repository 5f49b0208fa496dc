"""The logit gradient of a one-node policy (a bandit) written out, for losses linear in ``log p``.

When every answer of a group is drawn at one node (a bandit, or a one-node tree) and the surrogate's
only dependence on the policy is ``coef * logp`` with a constant ``coef`` (REINFORCE: ``-A``; CISPO:
``-sg(clip(w)) A``), the loss gradient needs no autodiff. With ``c_bg`` the aggregation's weight of
answer ``g`` in group ``b`` (the aggregations are linear in the token losses) and ``pi`` the policy at
the prompt:

    d/dz [sum_g c_bg coef_bg log pi(a_bg)] = sum_g c_bg coef_bg (onehot(a_bg) - pi)

plus the node-level terms, each times ``n_b = sum_g c_bg`` (the term is broadcast to every answer):
``beta grad KL`` for a KL in the loss and ``-ent_coef grad H`` for the entropy bonus, with

    grad KL(pi || pi_ref) = pi (log pi - log pi_ref - KL)      (``exact``)
    grad CE(pi_ref, pi)   = pi - pi_ref                          (``ref_ce``)
    grad H(pi)            = -pi (log pi + H)

and for the per-token estimators ``k(l)``, ``l = log pi(a) - log pi_ref(a)``, a coefficient ``beta c k'(l)``
on ``log pi(a)``. It is the same gradient as ``jax.grad`` of :func:`tabsim.sim.algos.policy_loss`
(``tests/core/test_closed_form.py`` checks every supported composition) but costs a fraction of it to
trace and compile: the engine takes this path whenever :func:`supports` says so.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from tabsim.sim.ops import take_rows, weighted_counts
from tabsim.sim.algos.kl import LOW_VAR_KL_CLAMP, LOW_VAR_KL_LOG_RATIO_CLAMP
from tabsim.sim.algos.batch import aggregate, ratio
from tabsim.sim.algos.surrogates import clip_fraction

# d surrogate / d logp for the surrogates that are linear in logp (the coefficient is a constant)
SCORE_COEFFICIENTS = {
    "reinforce": lambda log_ratio, adv, hp: -adv,
    "cispo": lambda log_ratio, adv, hp: -jnp.clip(jnp.exp(log_ratio), 1.0 - hp.eps_low, 1.0 + hp.eps_high) * adv,
}
# surrogates whose coefficient does not read the importance ratio (no old log-probabilities needed)
RATIO_FREE = {"reinforce"}


def _low_var_kl_derivative(l):
    """``d low_var_kl / dl``: ``1 - exp(-l)`` inside verl's two clamps, 0 where either binds."""
    lc = jnp.clip(l, -LOW_VAR_KL_LOG_RATIO_CLAMP, LOW_VAR_KL_LOG_RATIO_CLAMP)
    inside = (jnp.abs(l) <= LOW_VAR_KL_LOG_RATIO_CLAMP) & (jnp.exp(-lc) + lc - 1.0 <= LOW_VAR_KL_CLAMP)
    return jnp.where(inside, 1.0 - jnp.exp(-lc), 0.0)


# per-token KL estimators k(l): their derivative k'(l)
KL_TOKEN_DERIVATIVES = {
    "k1": lambda l: jnp.ones_like(l),
    "k2": lambda l: l,
    "k3": lambda l: 1.0 - jnp.exp(-l),
    "low_var_kl": _low_var_kl_derivative,
}
# node-level KL estimators: their logit gradient from (pi, log pi, log pi_ref)
KL_NODE_GRADIENTS = {
    "exact": lambda pi, logq, logq_ref: pi * (logq - logq_ref - (pi * (logq - logq_ref)).sum(-1, keepdims=True)),
    "ref_ce": lambda pi, logq, logq_ref: pi - jnp.exp(logq_ref),
}


def supports(spec) -> bool:
    """Whether :func:`gradient` covers ``spec`` (an :class:`~tabsim.sim.algos.AlgoSpec`)."""
    kl_ok = spec.kl_placement != "loss" or spec.kl in KL_TOKEN_DERIVATIVES or spec.kl in KL_NODE_GRADIENTS
    # a token weight (tabsim.sim.algos.token_weights) goes through the autodiff path
    return spec.surrogate in SCORE_COEFFICIENTS and kl_ok and getattr(spec, "token_weight", "none") == "none"


def needs_old_logp(spec) -> bool:
    """Whether :func:`gradient` reads the rollout policy's log-probabilities."""
    return spec.surrogate not in RATIO_FREE


def _pi_only(spec) -> bool:
    """Whether the gradient needs the policy but not its log (no ratio, log-ratio KL or entropy)."""
    return (not needs_old_logp(spec) and not spec.entropy_bonus
            and (spec.kl_placement != "loss" or spec.kl == "ref_ce"))


def gradient(spec, logits, answers, mask, adv, logp_old, logq_ref, hp):
    """Gradient of the aggregated loss with respect to a one-node logit table, and diagnostics.

    Args:
      spec: an :class:`~tabsim.sim.algos.AlgoSpec` that :func:`supports`.
      logits: ``[B, A]`` logits at each prompt's node.
      answers: ``[B, G]`` sampled answers; ``mask``: ``[B, G, 1]``; ``adv``: ``[B, G]``.
      logp_old: ``[B, G, 1]`` rollout log-probabilities (``None`` when not :func:`needs_old_logp`).
      logq_ref: ``[B, A]`` reference log-probabilities at the node.
    Returns:
      ``(grad [B, A], {"clip_frac": ...})``.
    """
    pi = jax.nn.softmax(logits, axis=-1)
    logq = None if _pi_only(spec) else jax.nn.log_softmax(logits, axis=-1)
    # the aggregation is linear in the token losses: its weights are its gradient (any mask)
    weight = jax.grad(lambda x: aggregate(spec.aggregation, x, mask, adv=adv, hp=hp))(jnp.zeros_like(mask))[..., 0]
    node_weight = weight.sum(-1, keepdims=True)  # [B, 1]: a node term is counted once per answer
    a = adv[..., None]
    logp = None if logq is None else take_rows(logq, answers)  # [B, G]: the sampled answers' log-probs
    if needs_old_logp(spec):
        log_ratio = ratio(spec.ratio, logp[..., None], logp_old, mask, adv=a, hp=hp)
        clip_frac = clip_fraction(log_ratio, a, mask, hp, spec.surrogate)
    else:
        log_ratio = jnp.zeros_like(mask)  # not read
        clip_frac = jnp.zeros((), jnp.float32)
    coef = weight * SCORE_COEFFICIENTS[spec.surrogate](log_ratio, a, hp)[..., 0]  # d loss / d logp(a_bg)
    node = jnp.zeros_like(logits)
    if spec.kl_placement == "loss":
        if spec.kl in KL_TOKEN_DERIVATIVES:
            l = logp - take_rows(logq_ref, answers)
            coef = coef + hp.beta * weight * KL_TOKEN_DERIVATIVES[spec.kl](l)
        else:
            node = node + hp.beta * node_weight * KL_NODE_GRADIENTS[spec.kl](pi, logq, logq_ref)
    if spec.entropy_bonus:
        entropy = -(pi * logq).sum(-1, keepdims=True)
        node = node + hp.ent_coef * node_weight * pi * (logq + entropy)  # - ent_coef * grad H
    grad = weighted_counts(answers, coef, logits.shape[-1]) - pi * coef.sum(-1, keepdims=True) + node
    return grad, {"clip_frac": clip_frac}
