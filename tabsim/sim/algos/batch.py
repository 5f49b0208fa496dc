"""The named batch a GRPO-family component may read, and the calls that hand it over.

A component registered with ``batch=True`` is one function of one argument, a :class:`Batch` (purejaxrl's
``Transition``): it reads the fields it needs by name, so a rule that needs the mask or the advantage's sign
where the positional signatures do not pass them (GMPO's per-answer geometric mean with a sign-aware clip)
is one function and one registration. tabsim's own components keep their positional signatures
(``estimator(rewards, *, lengths, valid, hp)``, ``ratio(logp, logp_old, mask)``,
``surrogate(log_ratio, logp, adv, hp)``), which are the same computation; :func:`estimate`, :func:`ratio`
and :func:`surrogate` call either form.
"""
from __future__ import annotations

from typing import Any

import jax

from tabsim.sim.algos.advantages import ESTIMATORS
from tabsim.sim.algos.ratios import RATIOS
from tabsim.sim.algos.surrogates import SURROGATES
from tabsim.sim.pytree import pytree_dataclass


@pytree_dataclass
class Batch:
    """One rollout batch by name; a field the step has not computed yet is ``None``.

    Shapes: ``[B, G]`` prompts x answers per prompt, ``[B, G, T]`` with tokens.

    Attributes:
      rewards: ``[B, G]`` scalar rewards (the estimator's input).
      lengths: ``[B, G]`` tokens per answer.
      valid: ``[B]`` 1 for the groups the dynamic-sampling filter keeps.
      mask: ``[B, G, T]`` 1 on the real tokens of kept answers.
      logp: ``[B, G, T]`` the sampled tokens' log-probabilities under the policy (differentiable).
      logp_old: ``[B, G, T]`` the same under the rollout policy (constants).
      log_ratio: ``[B, G, T]`` the ratio component's output (the surrogate's input).
      adv: ``[B, G, 1]`` advantages broadcast over tokens, or ``[B, G, T]`` per token.
      hp: the traced :class:`tabsim.sim.params.Hyper`.
    """

    rewards: Any = None
    lengths: Any = None
    valid: Any = None
    mask: Any = None
    logp: Any = None
    logp_old: Any = None
    log_ratio: Any = None
    adv: Any = None
    hp: Any = None


def reads_batch(registry, name: str) -> bool:
    """Whether component ``name`` of ``registry`` was registered with ``batch=True`` (takes a :class:`Batch`)."""
    return bool(registry.meta(name).get("batch", False))


def estimate(name: str, rewards, *, lengths, valid, hp) -> jax.Array:
    """Estimator ``name``'s advantages ``[B, G]``."""
    if reads_batch(ESTIMATORS, name):
        return ESTIMATORS[name](Batch(rewards=rewards, lengths=lengths, valid=valid, hp=hp))
    return ESTIMATORS[name](rewards, lengths=lengths, valid=valid, hp=hp)


def ratio(name: str, logp, logp_old, mask, *, adv=None, hp=None) -> jax.Array:
    """Ratio ``name``'s log-ratios ``[B, G, T]`` (``adv``: ``[B, G]``, ``[B, G, 1]`` or ``[B, G, T]``)."""
    if reads_batch(RATIOS, name):
        if adv is not None and adv.ndim < logp.ndim:
            adv = adv[..., None]
        return RATIOS[name](Batch(mask=mask, logp=logp, logp_old=logp_old, adv=adv, hp=hp))
    return RATIOS[name](logp, logp_old, mask)


def surrogate(name: str, log_ratio, logp, adv, hp, *, mask, logp_old=None) -> jax.Array:
    """Surrogate ``name``'s per-token losses ``[B, G, T]`` (minimised)."""
    if reads_batch(SURROGATES, name):
        return SURROGATES[name](Batch(mask=mask, logp=logp, logp_old=logp_old, log_ratio=log_ratio, adv=adv, hp=hp))
    return SURROGATES[name](log_ratio, logp, adv, hp)
