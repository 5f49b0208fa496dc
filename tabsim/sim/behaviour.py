"""Behaviour policies: the batch's answers drawn from a policy ``mu`` other than the one trained, and the
importance-sampling corrections that TRL and verl apply to such answers.

``algo.behaviour`` picks ``mu`` (a table of the policy's shape, built once per step):

* ``policy``: ``mu = pi`` (the default; the engine's program is then the on-policy one, unchanged);
* ``hint``: ``mu = (1 - lambda) pi + lambda u*`` per prompt, with ``u*`` uniform over the prompt's correct
  answers and ``lambda = hint_lambda``: the tabular form of a hinted context that raises ``P(a*)``
  (the hint families Scaf-GRPO arXiv 2510.19807, Guide arXiv 2506.13923, GHPO arXiv 2507.10628, SAGE
  arXiv 2602.03143, ExPO); a one-node policy only (the bandit). ``hint_when = "all_wrong"`` draws every group
  from the policy and redraws from ``mu`` only those whose answers are all wrong (Guide's adaptive hints, as its
  abstract states them; :func:`tabsim.sim.update.behaviour_roll_out`). Neither Guide's exact ratio nor GHPO's or
  Scaf-GRPO's schedules were read from their papers here: the corrections below are TRL's and verl's;
* ``mismatch``: ``mu = softmax(z + sigma xi)``, ``xi ~ N(0, 1)`` drawn afresh for every logit at every step
  and ``sigma = mismatch_sigma``: a sampler whose log-probabilities differ from the trainer's, the
  training-inference mismatch of the vLLM / FSDP pair (verl's rollout correction and TRL's
  ``vllm_importance_sampling_correction`` exist for it);
* ``stale``: ``mu = pi_{t-k}``, the policy ``k = behaviour_lag`` updates old (the first ``k`` steps sample
  the prior), kept in a ring of ``k`` past tables in ``TrainState.behaviour``: asynchronous RL's staleness.

The loss reads ``logp_old`` from the policy at the batch's start (``behaviour_old = "policy"``: TRL's
GRPOTrainer recomputes ``old_per_token_logps`` with the training model whenever its vLLM correction is on,
and verl's decoupled mode takes ``old_log_prob`` from the actor), or from ``mu`` itself
(``behaviour_old = "behaviour"``: verl's bypass mode, ``old_log_prob = rollout_log_probs``, where the PPO
ratio ``pi / mu`` is then both the correction and what the clip bounds).

``algo.is_correction`` weighs each token's policy loss by a detached importance weight, as TRL's
GRPOTrainer does (checked against its ``_generate_and_score_completions`` and ``_compute_loss``): with
``d_t = (log pi_old(a_t) - log mu(a_t)) m_t``,

* ``token_truncate`` (TIS): ``w_t = min(exp(d_t), C)``; ``token_mask``: ``w_t = exp(d_t)``, set to 0 where
  it exceeds ``C``;
* ``sequence_truncate``: ``w = min(exp(sum_t d_t), C)`` for every token of the answer;
  ``sequence_mask``: ``w = exp(sum_t d_t)``, 0 where it exceeds ``C``;

with ``C = is_cap``. The weight multiplies the surrogate's per-token loss before the aggregation and
not the KL or entropy terms (TRL adds ``beta`` KL after the product; verl multiplies ``pg_losses`` by
``rollout_is_weights``); a masked token keeps its place in the aggregation's denominator, as in TRL. The
truncated forms are verl's ``rollout_is = token / sequence`` with ``rollout_is_threshold = C``
(``compute_rollout_correction_weights``: it also clamps the log-ratio to +-20 before ``exp``, which no
cap below ``exp(20)`` can tell apart). verl's rejection sampling (``rollout_rs``) masks two-sided
(``[1/C, C]`` by default) and through the loss mask, so it moves the aggregation's denominator; it is
not built here.

Each surrogate of :mod:`tabsim.sim.algos.surrogates` is positively homogeneous in the advantage
(``f(w A) = w f(A)`` for ``w >= 0``: PPO's clip, the dual clip, CISPO, SAPO, SPO, REINFORCE), so the
weight is applied as ``A_t <- w_t A_t``; GMPO averages a per-token advantage over the answer, so with a
token-level weight it sees the answer's mean weight.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from tabsim.base.choices import BEHAVIOURS, IS_CORRECTIONS  # noqa: F401  (the names, for the config)
from tabsim.sim import rng as R

# the mismatch noise's stream: a tag of its own, far from tabsim.sim.rng's (0 .. 8)
MISMATCH_TAG = 0x4D49


def active(algo) -> bool:
    """Whether ``algo`` draws its answers from a behaviour policy other than the policy."""
    return getattr(algo, "behaviour", "policy") != "policy"


def init(algo, logits):
    """``TrainState.behaviour`` at the start: the ring of ``k`` past tables (all the prior) for ``stale``,
    else None."""
    if getattr(algo, "behaviour", "policy") != "stale":
        return None
    return jnp.broadcast_to(logits, (algo.behaviour_lag,) + logits.shape) + jnp.zeros((), logits.dtype)


def table(algo, logits, task, ring, seed, step, hp, rng: str = "fast"):
    """``mu``'s table at this step (log-probabilities or logits, the policy's shape), or None for the
    policy itself (``rng``: the environment's generator, for the mismatch noise)."""
    mode = getattr(algo, "behaviour", "policy")
    if mode == "policy":
        return None
    if mode == "stale":
        return ring[step % algo.behaviour_lag]
    if mode == "mismatch":
        u = R.uniform(seed, logits.shape, step=step, tag=MISMATCH_TAG, rng=rng)
        xi = jax.scipy.special.ndtri(jnp.clip(u, 2.0**-24, 1.0 - 2.0**-24))
        return logits + hp.mismatch_sigma * xi
    if mode == "hint":
        return hinted(logits, task.correct, hp.hint_lambda)
    raise ValueError(f"algo.behaviour: unknown value {mode!r}; allowed: {', '.join(BEHAVIOURS)}")


def hinted(logits, correct, lam):
    """``log((1 - lam) softmax(logits) + lam correct / k)`` per prompt row (``correct [N, K]`` 0/1, ``k`` its
    row sum): the hinted sampler of a one-node policy."""
    target = correct / jnp.maximum(correct.sum(-1, keepdims=True), 1.0)
    return jnp.log((1.0 - lam) * jax.nn.softmax(logits, axis=-1) + lam * target)


def advance(algo, ring, logits, step):
    """The ring after step ``step``: the slot just read takes the policy of this step (before its update),
    so step ``t`` reads ``pi_{t-k}``."""
    if ring is None:
        return None
    return ring.at[step % algo.behaviour_lag].set(logits)


def weights(correction: str, logp_old, logp_mu, mask, cap):
    """``(w, stats)``: the detached importance weights of :data:`IS_CORRECTIONS` ``correction``, ``[B, G, T]``
    for the token forms and ``[B, G]`` for the sequence forms (None for ``none``), and ``stats``: the mean
    weight (over tokens, or answers) and the share of weights above the cap (truncated or masked)."""
    if correction == "none":
        return None, {}
    d = jax.lax.stop_gradient((logp_old - logp_mu) * mask)
    if correction.startswith("sequence"):
        r = jnp.exp(d.sum(-1))
        where = jnp.ones_like(r)
    else:
        r = jnp.exp(d)
        where = mask
    over = r > cap
    w = jnp.minimum(r, cap) if correction.endswith("truncate") else jnp.where(over, 0.0, r)
    n = jnp.maximum(where.sum(), 1.0)
    return w, {"is_weight_mean": (w * where).sum() / n, "is_over_cap": (over * where).sum() / n}


def weigh(adv, w):
    """The advantages ``A`` times the weights ``w`` (``[B, G]`` or ``[B, G, T]`` each): per token where either
    is per token (a one-token answer keeps ``[B, G]``, the shape the closed-form path reads)."""
    if w is None:
        return adv
    if w.ndim == 3 and w.shape[-1] == 1 and adv.ndim == 2:
        w = w[..., 0]
    if adv.ndim == w.ndim:
        return adv * w
    return (adv[..., None] * w) if adv.ndim < w.ndim else adv * w[..., None]
