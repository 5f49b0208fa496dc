"""Advantage estimators: rewards ``[B, G]`` -> advantages ``[B, G]``.

Every estimator has the signature ``estimator(rewards, *, lengths, valid, hp)`` where

* ``rewards``: ``[B, G]`` float scalar rewards of the G answers of each of B groups;
* ``lengths``: ``[B, G]`` number of tokens of each answer (1 in a bandit);
* ``valid``: ``[B]`` float, 1 for groups that are part of the batch (0 for groups removed by the
  dynamic-sampling filter); only batch-level estimators (REINFORCE++) read it;
* ``hp``: the traced :class:`tabsim.sim.params.Hyper`.

Outcome rewards: one scalar per answer (a KL penalty placed in the reward is already subtracted,
summed over the answer's tokens, as verl does before its outcome estimators). REINFORCE++ is the
exception: verl gives each token its return to go, so with the KL in the reward the engine calls
:func:`reinforce_pp_token_returns` (``TOKEN_RETURNS``) for answers longer than one token.
Zero-variance groups give ``A = 0`` for every group-baseline estimator; the batch-level ones
(REINFORCE++, whose groups are only shifted by the batch mean) and ``sign`` move them anyway, which
is what the dynamic-sampling filter (``valid = 0``) is for.

Register a new estimator with :func:`register_estimator`; ``batch_level=True`` declares that it reads totals
over the whole batch (``valid``, the batch's rewards), which the exact expected flow treats apart
(:mod:`tabsim.sim.expected.batch`); ``no_expected="why"`` declares that ``train.dynamics = "expected"`` has no exact
flow for it, and the flow's check refuses it in one line giving that reason (``batch_std``); ``batch=True,
reads=("answers", ...)`` declares the rollout context an estimator reads besides the rewards
(:data:`tabsim.sim.algos.batch.CONTEXT_FIELDS`; ``pvpo`` and ``edge`` in :mod:`tabsim.sim.algos.estimators_ctx`).
"""
from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Callable

import jax
import jax.numpy as jnp

from tabsim.base import choices
from tabsim.base.registry import Registry

ESTIMATORS = Registry("estimator", builtin=choices.ESTIMATORS)
register_estimator = ESTIMATORS.register  # ``@register_estimator(name)`` adds a function under a new name


def group_std(rewards, ddof):
    """Group standard deviation ``[B, 1]`` with ``ddof`` 0 (population) or 1 (Bessel / unbiased)."""
    g = rewards.shape[-1]
    centred = rewards - rewards.mean(-1, keepdims=True)
    return jnp.sqrt((centred**2).sum(-1, keepdims=True) / (g - ddof))


def _homogeneous(rewards):
    """``[B, 1]`` True for groups whose rewards are all equal (their advantage is exactly 0)."""
    return (rewards.max(-1, keepdims=True) == rewards.min(-1, keepdims=True))


def _centred(rewards):
    """``r - mean_g``, exactly 0 on homogeneous groups (the float mean can miss ``r`` by an ulp)."""
    return jnp.where(_homogeneous(rewards), 0.0, rewards - rewards.mean(-1, keepdims=True))


@register_estimator("grpo")
def grpo(rewards, *, lengths, valid, hp):
    """Group z-score: ``A = (r - mean_g) / (std_g + eps)`` (DeepSeekMath, arXiv 2402.03300).

    ``hp.std_ddof`` picks the population (0; reference simulator) or Bessel (1; TRL, verl) std and
    ``hp.std_eps`` the epsilon (1e-8 reference, 1e-4 TRL, 1e-6 verl). Homogeneous groups give 0
    (also with ``eps = 0``, where the formula is 0/0).

    Args:
      rewards: ``[B, G]``.
    Returns:
      ``[B, G]`` advantages.
    """
    std = group_std(rewards, hp.std_ddof)
    return jnp.where(_homogeneous(rewards), 0.0, _centred(rewards) / (std + hp.std_eps))


@register_estimator("dr_grpo")
def dr_grpo(rewards, *, lengths, valid, hp):
    """Centred reward ``A = r - mean_g`` with no std scaling (Dr. GRPO, arXiv 2503.20783)."""
    return _centred(rewards)


@register_estimator("rloo")
def rloo(rewards, *, lengths, valid, hp):
    """Leave-one-out baseline ``A_i = r_i - mean_{j != i} r_j = G/(G-1) (r_i - mean_g)``.

    Ahmadian et al., arXiv 2402.14740 (TRL ``RLOOTrainer``, verl ``rloo``).
    """
    g = rewards.shape[-1]
    loo_mean = (rewards.sum(-1, keepdims=True) - rewards) / (g - 1.0)
    return jnp.where(_homogeneous(rewards), 0.0, rewards - loo_mean)


def _masked_whiten(x, weights, eps):
    """verl ``masked_whiten``: ``(x - mean_w) / sqrt(var_w + eps)`` with weighted mean and unbiased
    (``n / (n - 1)``) variance over total weight ``n``; 0 where the weight is 0."""
    n = weights.sum()
    mean = (x * weights).sum() / jnp.maximum(n, 1.0)
    var = (((x - mean) ** 2) * weights).sum() / jnp.maximum(n - 1.0, 1.0)
    return (x - mean) * jax.lax.rsqrt(var + eps) * (weights > 0)


def _token_weights(lengths, valid, dtype):
    """Every token of every kept answer counts once in verl's batch statistics: ``[B, G]`` weights."""
    return lengths.astype(dtype) * valid[:, None].astype(dtype)


@register_estimator("reinforce_pp", batch_level=True)
def reinforce_pp(rewards, *, lengths, valid, hp):
    """Return whitened over the batch's tokens: ``A = (r - mean_tok) / sqrt(var_tok + 1e-8)``.

    REINFORCE++ (Hu, arXiv 2501.03262) as in verl: with an outcome reward and gamma = 1 every token
    of answer ``i`` has return ``r_i``; mean and unbiased variance run over all kept tokens, so an
    answer weighs ``|o_i|`` (in a bandit, 1).
    """
    return _masked_whiten(rewards, _token_weights(lengths, valid, rewards.dtype), 1e-8)


def reinforce_pp_token_returns(rewards, kl_penalty, *, mask, valid):
    """REINFORCE++ with the KL in the reward, token by token, as verl computes it.

    verl places the outcome reward on the answer's last token and ``-beta kl_t`` on every token, then
    takes the undiscounted return to go: token ``t`` of answer ``i`` gets ``r_i - sum_{s >= t} beta
    kl_s`` (the KL still to come), and the returns are whitened over the batch's kept tokens
    (``compute_reinforce_plus_plus_outcome_advantage``, gamma = 1). On one-token answers this is
    :func:`reinforce_pp` of ``r_i - beta kl_i``.

    Args:
      rewards: ``[B, G]`` outcome rewards (without the KL).
      kl_penalty: ``[B, G, T]`` ``beta kl_t``, 0 on padding.
      mask: ``[B, G, T]`` 1 on real tokens; valid: ``[B]`` 1 for kept groups.
    Returns:
      ``[B, G, T]`` per-token advantages (0 on padding and dropped groups).
    """
    to_come = jnp.flip(jnp.cumsum(jnp.flip(kl_penalty, -1), -1), -1)
    returns = rewards[..., None] - to_come
    weights = mask.astype(rewards.dtype) * valid[:, None, None].astype(rewards.dtype)
    return _masked_whiten(returns, weights, 1e-8)


# estimators whose advantage with the KL in the reward is per token: ``fn(rewards, kl_penalty, mask=, valid=)``
TOKEN_RETURNS: Mapping[str, Callable] = MappingProxyType({"reinforce_pp": reinforce_pp_token_returns})


@register_estimator("reinforce_pp_baseline", batch_level=True)
def reinforce_pp_baseline(rewards, *, lengths, valid, hp):
    """Group mean subtracted first, then whitened over the batch's tokens (REINFORCE++-baseline).

    ``A = whiten_tok(r - mean_g)`` (verl ``reinforce_plus_plus_baseline``).
    """
    return _masked_whiten(_centred(rewards), _token_weights(lengths, valid, rewards.dtype), 1e-8)


@register_estimator("batch_std", batch_level=True,
                    no_expected="its scale is the std of every kept answer's reward in the batch, a batch total the "
                                "exact flow has no table for")
def batch_std(rewards, *, lengths, valid, hp):
    """Group-centred reward over the batch's reward std: ``A = (r - mean_g) / (std_batch(r) + eps)``.

    Lite PPO's normalisation (group-level mean, batch-level std; Liu et al., "Tricks or Traps? A Deep Dive
    into RL for LLM Reasoning", arXiv 2508.08221), TRL ``scale_rewards="batch"``. The std runs over the raw
    rewards of every answer of the kept groups (``valid``), each answer once whatever its length, with
    ``hp.std_ddof`` (TRL: 1) and ``hp.std_eps`` (TRL: 1e-4). Homogeneous groups give 0; a batch whose
    rewards are all equal gives 0 (also with ``eps = 0``).

    Args:
      rewards: ``[B, G]``; valid: ``[B]``.
    Returns:
      ``[B, G]`` advantages.
    """
    w = jnp.broadcast_to(valid[:, None], rewards.shape).astype(rewards.dtype)
    n = w.sum()
    mean = (rewards * w).sum() / jnp.maximum(n, 1.0)
    var = (((rewards - mean) ** 2) * w).sum() / jnp.maximum(n - hp.std_ddof, 1.0)
    std = jnp.sqrt(var)
    centred = _centred(rewards)
    return jnp.where(std > 0, centred / jnp.where(std > 0, std + hp.std_eps, 1.0), 0.0)


@register_estimator("mapo")
def mapo(rewards, *, lengths, valid, hp):
    """Mixed advantage: the z-score and the percent deviation weighted by the group's certainty.

    ``A = 4p(1 - p) (r - mean_g) / (std_g + eps) + (1 - 4p(1 - p)) (r - mean_g) / (mean_g + eps)`` with ``p``
    the fraction of the group's rewards equal to 1 (MAPO, Huang et al., arXiv 2509.18849, as in its authors'
    released trainer, ``grpomixpro``): a half-solved group (p = 1/2) gets GRPO's z-score, a nearly solved or
    nearly failed one the percent deviation ``(r - mean_g) / mean_g``. ``hp.std_ddof`` and ``hp.std_eps``
    pick the std (the authors: Bessel, 1e-6) and the epsilon of both denominators. Homogeneous groups give 0.

    Args:
      rewards: ``[B, G]``.
    Returns:
      ``[B, G]`` advantages.
    """
    p = (rewards == 1.0).astype(rewards.dtype).mean(-1, keepdims=True)
    certainty = 4.0 * p * (1.0 - p)
    homogeneous = _homogeneous(rewards)
    centred = _centred(rewards)
    z = centred / jnp.where(homogeneous, 1.0, group_std(rewards, hp.std_ddof) + hp.std_eps)
    percent = centred / jnp.where(homogeneous, 1.0, rewards.mean(-1, keepdims=True) + hp.std_eps)
    return jnp.where(homogeneous, 0.0, certainty * z + (1.0 - certainty) * percent)


@register_estimator("opo")
def opo(rewards, *, lengths, valid, hp):
    """Length-weighted group baseline ``A_i = r_i - sum_j |o_j| r_j / sum_j |o_j|``.

    On-Policy RL with Optimal reward baseline (Hao et al., arXiv 2505.23585; verl ``opo``).
    """
    lengths = lengths.astype(rewards.dtype)
    base = (lengths * rewards).sum(-1, keepdims=True) / jnp.maximum(lengths.sum(-1, keepdims=True), 1.0)
    return jnp.where(_homogeneous(rewards), 0.0, rewards - base)


@register_estimator("gpg", batch_level=True)
def gpg(rewards, *, lengths, valid, hp):
    """Group-mean baseline scaled by ``alpha = n / m``: ``A = alpha (r - mean_g)``.

    ``n`` answers in the batch and ``m`` of them with a nonzero reward (Chu et al., arXiv
    2504.02546; verl ``gpg``, ``f_norm = 1``); counts run over the kept groups.
    """
    w = jnp.broadcast_to(valid[:, None], rewards.shape).astype(rewards.dtype)
    n = w.sum()
    m = ((rewards != 0) * w).sum()
    alpha = n / jnp.maximum(m, 1.0)
    return alpha * _centred(rewards)


@register_estimator("passk")
def passk(rewards, *, lengths, valid, hp):
    """Pass@k advantage: only the best answer gets ``r_max - r_second``; all others 0.

    arXiv 2503.19595 (verl ``grpo_passk`` with ``norm_adv_by_std_in_grpo=False``).
    Ties for the best go to the lowest index, so a group with two best answers gives 0.
    """
    g = rewards.shape[-1]
    best = jnp.argmax(rewards, axis=-1)
    r_max = jnp.max(rewards, axis=-1)
    is_best = jnp.arange(g) == best[..., None]
    r_second = jnp.max(jnp.where(is_best, -jnp.inf, rewards), axis=-1)
    return jnp.where(is_best, (r_max - r_second)[..., None], 0.0)


@register_estimator("sign")
def sign(rewards, *, lengths, valid, hp):
    """``A = 2 r - 1``: homogeneous groups still move (no group baseline)."""
    return 2.0 * rewards - 1.0
