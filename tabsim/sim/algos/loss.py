"""The GRPO-family loss: advantages, the sampled tokens' log-probabilities and the aggregated
surrogate with its KL and entropy terms (:func:`policy_loss`)."""
from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from tabsim.sim.ops import UNROLL, take_last, take_rows, weighted_counts
from tabsim.sim.algos.advantages import ESTIMATORS
from tabsim.sim.algos.kl import KL_ESTIMATORS
from tabsim.sim.algos.batch import aggregate, context_reads, estimate, probe_context, ratio, surrogate
from tabsim.sim.algos.spec import AlgoSpec
from tabsim.sim.algos.surrogates import clip_fraction
from tabsim.sim.algos.token_weights import TOKEN_WEIGHTS, token_weights
from tabsim.sim.params import Hyper


def advantages(spec: AlgoSpec, rewards, *, lengths, valid, hp, context: dict | None = None):
    """Advantages ``[B, G]`` from the named estimator, checked where they leave it.

    An estimator registered with ``per_token=True`` returns ``[B, G, T]``, one advantage per token (returned
    as ``[B, G]`` when ``T = 1``; :mod:`tabsim.sim.algos.tree_credit`).
    Every other estimator's output must have the rewards' shape ``[B, G]`` and float dtype (checked when the
    program is traced, so at no cost to it). An estimator a user registered is also called once, when
    traced, on a probe batch (see :func:`probe_estimator`), and a non-finite advantage there is refused;
    in the compiled program its advantages are counted for non-finite values, and a batch with any
    raises a ``RuntimeWarning`` naming the estimator (:func:`flag_nonfinite`). tabsim's own estimators
    are finite by construction and their programs are unchanged. ``context``: the fields the estimator
    declared with ``reads=`` (:func:`tabsim.sim.algos.context.estimator_context`); an estimator that declared
    some and is called without them is refused in one line.
    """
    name = spec.estimator
    reads = context_reads(name)
    missing = [f for f in reads if f not in (context or {})]
    if missing:
        raise ValueError(f"estimator {name!r} reads {', '.join(missing)}, which this caller does not compute "
                         "(the engine's sampled step does; the exact expected flow does not)")
    adv = estimate(name, rewards, lengths=lengths, valid=valid, hp=hp, context=context)
    if ESTIMATORS.meta(name).get("per_token", False):  # one advantage per token, [B, G, T]
        check_advantages(name, adv[..., 0] if getattr(adv, "ndim", 0) == 3 else adv, rewards)
        if adv.shape[-1] == 1:  # one-token answers: the per-answer shape the closed-form path reads
            adv = adv[..., 0]
    else:
        check_advantages(name, adv, rewards)
    if ESTIMATORS.is_own(name):
        return adv
    probe_estimator(name, rewards.shape[-1], rewards.dtype, lengths.dtype)
    return flag_nonfinite(name, adv)


def check_advantages(name: str, adv, rewards) -> None:
    """Refuse an estimator's output that is not a float array of the rewards' shape ``[B, G]`` (one line)."""
    shape, dtype = getattr(adv, "shape", None), getattr(adv, "dtype", None)
    if shape is None or dtype is None:
        raise ValueError(f"estimator {name!r} returned {type(adv).__name__}, not an array; an estimator returns "
                         f"advantages of shape [B, G] = {tuple(rewards.shape)}, dtype {rewards.dtype}")
    if tuple(shape) != tuple(rewards.shape) or dtype != rewards.dtype:
        raise ValueError(f"estimator {name!r} returned advantages of shape {tuple(shape)}, dtype {dtype}; an "
                         f"estimator returns one per answer, shape [B, G] = {tuple(rewards.shape)}, dtype "
                         f"{rewards.dtype} (the rewards')")


PROBE_GROUPS = ("all wrong", "all right", "one right", "half right")  # the rows of probe_rewards


def probe_rewards(G: int, dtype):
    """``[4, G]`` 0/1 rewards (NumPy) that cover the cases an estimator must handle: a group all wrong, one all
    right, one with a single success and one half right (the homogeneous groups are where a std divides
    0 by 0)."""
    r = np.zeros((4, G))
    r[1] = 1.0
    r[2, 0] = 1.0
    r[3, : max(G // 2, 1)] = 1.0
    return r.astype(dtype)


def probe_estimator(name: str, G: int, dtype, lengths_dtype) -> None:
    """Call estimator ``name`` on :func:`probe_rewards` with one-token answers, every group kept, the
    default hyperparameters and, for the context it declared, :func:`~tabsim.sim.algos.batch.probe_context`
    (eagerly, also while a program is traced); refuse a non-finite advantage."""
    r = probe_rewards(G, dtype)
    with jax.ensure_compile_time_eval():  # concrete probe arrays also while a program is traced
        context = {k: jnp.asarray(v) for k, v in probe_context(context_reads(name), r).items()}
        adv = estimate(name, jnp.asarray(r), lengths=jnp.ones(r.shape, lengths_dtype),
                       valid=jnp.ones(r.shape[:1], dtype), hp=Hyper(), context=context)
        check_advantages(name, adv, r)
        bad = ~np.isfinite(np.asarray(adv))
    if bad.any():
        groups = ", ".join(PROBE_GROUPS[b] for b in np.flatnonzero(bad.any(-1)))
        raise ValueError(f"estimator {name!r} returned {int(bad.sum())} non-finite advantages on the probe groups "
                         f"{groups} (G = {G}, default hyperparameters); advantages must be finite")


_WARNED: set = set()  # (estimator, registration) already warned about in this process


def _warn_nonfinite(name, count, total):
    key = (name, ESTIMATORS.version(name) if name in ESTIMATORS else 0)
    if int(count) > 0 and key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(f"estimator {name!r} returned {int(count)} non-finite advantages of {int(total)} in one "
                      f"batch; the policy it updates is no longer finite", RuntimeWarning, stacklevel=2)


def flag_nonfinite(name: str, adv):
    """``adv`` unchanged, with a host callback that warns (once per registration of ``name`` in a process)
    when any of it is not finite (a user's estimator)."""
    count = (~jnp.isfinite(adv)).sum()
    jax.debug.callback(functools.partial(_warn_nonfinite, name), count, adv.size)
    return adv


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
    (no node-level KL, ``exact``/``ref_ce``, no entropy bonus and no token weight that reads the entropy): then
    ``logp`` may be passed alone."""
    weight_reads_entropy = spec.token_weight != "none" and TOKEN_WEIGHTS.meta(spec.token_weight).get("reads_entropy")
    return not spec.entropy_bonus and not (spec.kl_placement == "loss" and spec.kl in ("exact", "ref_ce")) \
        and not weight_reads_entropy


def policy_loss(spec: AlgoSpec, logq, tokens, mask, adv, logp_old, logq_ref, hp, logp=None, uniforms=None):
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
      uniforms: ``[B, G, T]`` the step's uniforms, for a surrogate that draws tokens at random (Clip-Cov).
    Returns:
      ``(loss, {"clip_frac": ...})``.
    """
    if logp is None:
        logp = take_logp(logq, tokens)
    log_ratio = ratio(spec.ratio, logp, logp_old, mask, adv=adv, hp=hp)
    a = adv if adv.ndim == logp.ndim else adv[..., None]
    per_token = surrogate(spec.surrogate, log_ratio, logp, a, hp, mask=mask, logp_old=logp_old, uniforms=uniforms)
    if spec.token_weight != "none":  # the token-weight stage: constant weights on the surrogate's tokens
        per_token = per_token * token_weights(spec.token_weight, logq, tokens, mask, adv, hp)
    loss = aggregate(spec.aggregation, per_token, mask, adv=a, hp=hp)
    if spec.kl_placement == "loss":
        logp_ref = take_logp(logq_ref, tokens)
        kl = jnp.broadcast_to(KL_ESTIMATORS[spec.kl](logp, logp_ref, logq, logq_ref), logp.shape)
        loss = loss + hp.beta * aggregate(spec.aggregation, kl, mask, adv=a, hp=hp)
    if spec.entropy_bonus:
        entropy = jnp.broadcast_to(-(jnp.exp(logq) * logq).sum(-1), logp.shape)
        loss = loss - hp.ent_coef * aggregate(spec.aggregation, entropy, mask, adv=a, hp=hp)
    return loss, {"clip_frac": clip_fraction(log_ratio, a, mask, hp, spec.surrogate, logp_old=logp_old)}
