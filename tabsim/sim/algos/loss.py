"""The GRPO-family loss: advantages, the sampled tokens' log-probabilities and the aggregated
surrogate with its KL and entropy terms (:func:`policy_loss`)."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from tabsim.sim.ops import UNROLL, take_last, take_rows, weighted_counts
from tabsim.sim.algos.advantages import ESTIMATORS
from tabsim.sim.algos.aggregation import AGGREGATIONS
from tabsim.sim.algos.kl import KL_ESTIMATORS
from tabsim.sim.algos.ratios import RATIOS
from tabsim.sim.algos.spec import AlgoSpec
from tabsim.sim.algos.surrogates import SURROGATES, clip_fraction


def advantages(spec: AlgoSpec, rewards, *, lengths, valid, hp):
    """Advantages ``[B, G]`` from the named estimator."""
    return ESTIMATORS[spec.estimator](rewards, lengths=lengths, valid=valid, hp=hp)


def zero_variance(rewards):
    """``[B]`` 1.0 for groups whose rewards are all equal."""
    return (jnp.max(rewards, -1) == jnp.min(rewards, -1)).astype(rewards.dtype)


def take_logp(logq, tokens):
    """Log-probability of the sampled tokens, ``[B, G, T]``, from ``logq [B, G, T, A]``.

    ``logq`` may have size-1 group and token axes, ``[B, 1, 1, A]``: one node shared by the whole
    group, as in a bandit. That case takes a fast path whose gradient is the count-weighted row
    ``sum_{g,t} ct_{g,t} onehot(a_{g,t})`` per prompt, built without ``[B, G, T, A]`` temporaries.
    """
    if logq.shape[1] == 1 and logq.shape[2] == 1 and logq.ndim == 4:
        return _take_shared(logq, tokens, logq.shape[-1])
    if logq.shape[-1] <= UNROLL:  # one select per action: no [B, G, T, A] one-hot product and reduction
        return take_last(logq, tokens)
    onehot = jax.nn.one_hot(tokens, logq.shape[-1], dtype=logq.dtype)
    return (onehot * logq).sum(-1)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _take_shared(logq, tokens, n_act):
    return take_rows(logq[:, 0, 0, :], tokens)


def _take_shared_fwd(logq, tokens, n_act):
    return _take_shared(logq, tokens, n_act), tokens


def _take_shared_bwd(n_act, tokens, ct):
    grad = weighted_counts(tokens.reshape(tokens.shape[0], -1), ct.reshape(ct.shape[0], -1), n_act)
    return grad[:, None, None, :], None


_take_shared.defvjp(_take_shared_fwd, _take_shared_bwd)


def reads_logp_only(spec: AlgoSpec) -> bool:
    """Whether :func:`policy_loss` reads the policy only through the sampled tokens' log-probabilities
    (no node-level KL, ``exact``/``ref_ce``, and no entropy bonus): then ``logp`` may be passed alone."""
    return not spec.entropy_bonus and not (spec.kl_placement == "loss" and spec.kl in ("exact", "ref_ce"))


def policy_loss(spec: AlgoSpec, logq, tokens, mask, adv, logp_old, logq_ref, hp, logp=None):
    """The aggregated GRPO-family loss and diagnostics.

    ``L = agg(surrogate(ratio(logp, logp_old), logp, A)) + beta agg(kl) - ent_coef agg(H)``

    Args:
      logq: ``[B, G, T, A]`` differentiable log next-token distribution at visited nodes.
      tokens: ``[B, G, T]`` sampled actions; ``mask``: ``[B, G, T]`` (0 on padding and filtered groups).
      adv: ``[B, G]``, or ``[B, G, T]`` per token (REINFORCE++ returns to go).
      logp_old: ``[B, G, T]`` rollout-policy log-probs (constants).
      logq_ref: ``[B, G, T, A]`` reference log distributions.
      logp: ``[B, G, T]`` the sampled tokens' log-probabilities, in place of ``logq`` (``None``) when
        :func:`reads_logp_only` (the gradient is then with respect to them).
    Returns:
      ``(loss, {"clip_frac": ...})``.
    """
    if logp is None:
        logp = take_logp(logq, tokens)
    log_ratio = RATIOS[spec.ratio](logp, logp_old, mask)
    a = adv if adv.ndim == logp.ndim else adv[..., None]
    loss = AGGREGATIONS[spec.aggregation](SURROGATES[spec.surrogate](log_ratio, logp, a, hp), mask)
    if spec.kl_placement == "loss":
        logp_ref = take_logp(logq_ref, tokens)
        kl = jnp.broadcast_to(KL_ESTIMATORS[spec.kl](logp, logp_ref, logq, logq_ref), logp.shape)
        loss = loss + hp.beta * AGGREGATIONS[spec.aggregation](kl, mask)
    if spec.entropy_bonus:
        entropy = jnp.broadcast_to(-(jnp.exp(logq) * logq).sum(-1), logp.shape)
        loss = loss - hp.ent_coef * AGGREGATIONS[spec.aggregation](entropy, mask)
    return loss, {"clip_frac": clip_fraction(log_ratio, a, mask, hp, spec.surrogate)}
