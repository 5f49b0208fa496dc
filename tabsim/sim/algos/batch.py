"""The named batch a GRPO-family component may read, and the calls that hand it over.

A component registered with ``batch=True`` is one function of one argument, a :class:`Batch` (purejaxrl's
``Transition``): it reads the fields it needs by name, so a rule that needs the mask or the advantage's sign
where the positional signatures do not pass them (GMPO's per-answer geometric mean with a sign-aware clip)
is one function and one registration. An estimator that needs what the rollout knew besides the rewards (the
answers drawn, their log-probabilities, the prompt's reference success rate) declares it at registration,
``register_estimator(name, batch=True, reads=("answers", "seq_logp"))``, and finds those fields filled
(:data:`CONTEXT_FIELDS`); the step computes only what some estimator declares, so the programs of every other
estimator are unchanged. tabsim's own components keep their positional signatures
(``estimator(rewards, *, lengths, valid, hp)``, ``ratio(logp, logp_old, mask)``,
``surrogate(log_ratio, logp, adv, hp)``), which are the same computation; :func:`estimate`, :func:`ratio`
and :func:`surrogate` call either form.
"""
from __future__ import annotations

from typing import Any

import jax

from tabsim.sim.algos.advantages import ESTIMATORS
from tabsim.sim.algos.aggregation import AGGREGATIONS
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

    Context an estimator declares with ``reads=`` (``None`` otherwise; see :data:`CONTEXT_FIELDS`):

    Attributes:
      answers: ``[B, G]`` int answer ids (the bandit's arm, the tree's leaf answer).
      prompts: ``[B]`` int prompt ids (rows of the task's table).
      seq_logp: ``[B, G]`` the rollout policy's log-probability of each whole answer, ``sum_t logp_old``
        over its tokens (constants).
      seq_logp_ref: ``[B, G]`` the same under the reference (the task's prior).
      entropy: ``[B, G]`` the mean over the answer's visited nodes of the rollout policy's entropy.
      p0: ``[B]`` the reference policy's probability of a correct answer (its success rate), a static
        fact of the task. Correctness itself is never given: the rewards are the arm's.
      tokens: ``[B, G, T]`` int the answers' sampled tokens (padding past an answer's length); in the tree a
        prefix is a state, so the group's shared prefixes are its shared states
        (:mod:`tabsim.sim.algos.tree_credit`).
    The aggregation's input, for an aggregation registered with ``batch=True``:

    Attributes:
      loss: ``[B, G, T]`` per-token losses to reduce (the surrogate's, or a KL or entropy term's).

    For a surrogate registered with ``reads_uniforms=True`` (one that draws tokens at random, as Clip-Cov):

    Attributes:
      uniforms: ``[B, G, T]`` uniforms of the step, a function of its seed words and step
        (:func:`tabsim.sim.algos.clip_cov.step_uniforms`).
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
    answers: Any = None
    prompts: Any = None
    seq_logp: Any = None
    seq_logp_ref: Any = None
    entropy: Any = None
    p0: Any = None
    tokens: Any = None
    loss: Any = None
    uniforms: Any = None


# the context fields an estimator may declare with ``reads=`` (what the step computes for it)
CONTEXT_FIELDS = ("answers", "prompts", "seq_logp", "seq_logp_ref", "entropy", "p0", "tokens")


def reads_batch(registry, name: str) -> bool:
    """Whether component ``name`` of ``registry`` was registered with ``batch=True`` (takes a :class:`Batch`)."""
    return bool(registry.meta(name).get("batch", False))


def context_reads(name: str) -> tuple[str, ...]:
    """The context fields estimator ``name`` declared with ``reads=`` (``()`` for none); a field not among
    :data:`CONTEXT_FIELDS`, or ``reads=`` without ``batch=True``, is refused in one line."""
    meta = ESTIMATORS.meta(name)
    reads = meta.get("reads", ())
    reads = (reads,) if isinstance(reads, str) else tuple(reads)
    if not reads:
        return ()
    unknown = [f for f in reads if f not in CONTEXT_FIELDS]
    if unknown:
        raise ValueError(f"estimator {name!r}: reads={reads!r} names {', '.join(map(repr, unknown))}; an estimator "
                         f"may read {', '.join(CONTEXT_FIELDS)}")
    if not meta.get("batch", False):
        raise ValueError(f"estimator {name!r}: reads={reads!r} needs batch=True (the context arrives as fields of "
                         "one Batch argument)")
    return reads


def estimate(name: str, rewards, *, lengths, valid, hp, context: dict | None = None) -> jax.Array:
    """Estimator ``name``'s advantages ``[B, G]``; ``context`` holds the fields it declared with ``reads=``."""
    if reads_batch(ESTIMATORS, name):
        return ESTIMATORS[name](Batch(rewards=rewards, lengths=lengths, valid=valid, hp=hp, **(context or {})))
    return ESTIMATORS[name](rewards, lengths=lengths, valid=valid, hp=hp)


def ratio(name: str, logp, logp_old, mask, *, adv=None, hp=None) -> jax.Array:
    """Ratio ``name``'s log-ratios ``[B, G, T]`` (``adv``: ``[B, G]``, ``[B, G, 1]`` or ``[B, G, T]``)."""
    if reads_batch(RATIOS, name):
        if adv is not None and adv.ndim < logp.ndim:
            adv = adv[..., None]
        return RATIOS[name](Batch(mask=mask, logp=logp, logp_old=logp_old, adv=adv, hp=hp))
    return RATIOS[name](logp, logp_old, mask)


def surrogate(name: str, log_ratio, logp, adv, hp, *, mask, logp_old=None, uniforms=None) -> jax.Array:
    """Surrogate ``name``'s per-token losses ``[B, G, T]`` (minimised); ``uniforms``: the step's ``[B, G, T]``
    uniforms, for a surrogate that draws tokens at random."""
    if reads_batch(SURROGATES, name):
        return SURROGATES[name](Batch(mask=mask, logp=logp, logp_old=logp_old, log_ratio=log_ratio, adv=adv, hp=hp,
                                      uniforms=uniforms))
    return SURROGATES[name](log_ratio, logp, adv, hp)



def aggregate(name: str, loss, mask, *, adv=None, hp=None) -> jax.Array:
    """Aggregation ``name``'s scalar of the per-token ``loss [B, G, T]``; one registered with ``batch=True`` reads
    ``Batch(loss, mask, adv, hp)`` (``adv``: ``[B, G]``, ``[B, G, 1]`` or ``[B, G, T]``)."""
    if reads_batch(AGGREGATIONS, name):
        if adv is not None and adv.ndim < loss.ndim:
            adv = adv[..., None]
        return AGGREGATIONS[name](Batch(loss=loss, mask=mask, adv=adv, hp=hp))
    return AGGREGATIONS[name](loss, mask)

def probe_context(reads: tuple[str, ...], rewards) -> dict:
    """Plausible context for the probe groups ``rewards [P, G]`` (NumPy): what a uniform rollout policy over G
    answers and a reference with success rate 1/2 would give. The rewarded answers of a group share answer 0
    and the others are distinct, so a histogram of answers is neither constant nor degenerate."""
    import numpy as np  # lazy: only the probe of a user's estimator reads NumPy here

    P, G = rewards.shape
    dtype = rewards.dtype
    distinct = np.broadcast_to(np.arange(1, G + 1), (P, G))
    full = {
        "answers": np.where(rewards > 0, 0, distinct).astype(np.int32),
        "prompts": np.arange(P, dtype=np.int32),
        "seq_logp": np.full((P, G), -np.log(G), dtype),
        "seq_logp_ref": np.full((P, G), -np.log(G), dtype),
        "entropy": np.full((P, G), np.log(G), dtype),
        "p0": np.full((P,), 0.5, dtype),
        "tokens": np.where(rewards > 0, 0, distinct).astype(np.int32)[..., None],  # one-token answers
    }
    return {k: full[k] for k in reads}
