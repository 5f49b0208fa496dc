"""The reward composer: the reward an update sees is the arm's outcome reward composed with terms.

``compose(spec, r, ...) -> [B, G]`` takes the arm's rewards ``r`` (:mod:`tabsim.sim.arms`) and applies the
terms of ``spec.terms`` (``algo.reward_terms``) in their order. A *transform* maps the outcome reward, an
*additive* term adds its weighted value:

    r' = T_n(... T_1(r)) + sum_k w_k t_k        (algo.reward_normalize = "none")
    r' = z(T(r)) + sum_k w_k z(t_k)             (algo.reward_normalize = "group")

where ``z`` is the group z-score (population std, ``+ std_eps``), taken per term before the sum (each term
normalised within its own group, decoupled from the others). The terms, each checked against its source:

``overlong`` (additive, weight ``overlong_factor``): DAPO's soft overlong punishment, arXiv 2503.14476 eq. 13,

    R(L) = 0                                   L <= L_max - L_cache
           ((L_max - L_cache) - L) / L_cache   L_max - L_cache < L <= L_max
           -1                                  L > L_max

  with ``L`` the answer's length in tokens (the tree's STOP token counts; a bandit answer is 1 token),
  ``L_max = overlong_max``, ``L_cache = overlong_cache``. Checked against the paper's equation, verl's DAPO
  reward manager (``overlong_buffer``: ``min(-(L - (L_max - L_cache)) / L_cache * penalty_factor, 0)``, the
  same for ``L <= L_max``, which verl's truncation guarantees) and TRL's ``get_soft_overlong_punishment``.

``unlikeliness`` (transform): the unlikeliness reward of "Rewarding the Unlikely", arXiv 2506.02355, as the
  authors' released trainer computes it (``RayLeanTrainer._compute_advantages``):
  ``r' = r (1 - rank_penalty * rank / G)``, ``rank`` the answer's ascending rank (0 = least likely) in its
  group by the rollout policy's mean token log-probability; ties keep the answers' order (the authors'
  ``torch.argsort`` leaves them unspecified). Their run: ``rank_penalty = 0.25``, 32 answers per prompt.

``backward`` (transform): the backward correction of "RL with Verifiable yet Noisy Rewards under Imperfect
  Verifiers", arXiv 2510.00915: ``r' = (r - rho0) / (1 - rho0 - rho1)``, the unbiased surrogate of a binary
  reward observed through a channel with false-positive rate ``rho0 = fpr`` and false-negative rate
  ``rho1 = fnr`` (the ``noisy`` arm's rates; the config requires ``fpr + fnr < 1``). It is affine with a
  positive slope, so a group z-score removes it (up to ``std_eps``); it changes the update of estimators
  that do not divide by the group's spread (``dr_grpo``, ``rloo``, ...). The forward correction reweights
  the score-function terms rather than the reward and is not built here.

``style`` (additive, weight ``style_weight``): a habit reward, 1 iff the answer has the rewarded style: on
  the tree, its root action belongs to style ``algo.reward_style`` of ``task.tree.styles``; on the bandit,
  the answer is the prompt's format answer. A simulator construct (no paper): a stylistic preference the
  reward pays for regardless of correctness.

Nothing here runs unless a config lists terms: ``algo_spec`` leaves ``AlgoSpec.reward`` None without them,
and :func:`tabsim.sim.update.score` then returns the arm's rewards untouched.
"""
from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from tabsim.base.choices import REWARD_NORMALIZE, REWARD_TERMS

TRANSFORMS = ("unlikeliness", "backward")  # map the outcome reward
ADDITIVE = ("overlong", "style")  # add a weighted value
POLICY_TERMS = ("unlikeliness",)  # read the rollout policy's log-probabilities
TERM_HELP = {
    "overlong": "DAPO's soft overlong punishment: 0 up to L_max - L_cache, a linear ramp to -1 at L_max (arXiv 2503.14476)",
    "unlikeliness": "r (1 - rank_penalty rank/G), rank by the rollout policy's likelihood in the group (arXiv 2506.02355)",
    "backward": "(r - fpr) / (1 - fpr - fnr): the noisy verifier's backward correction (arXiv 2510.00915)",
    "style": "style_weight x 1[the answer has the rewarded style] (tree: root style; bandit: the format answer)",
}


@dataclasses.dataclass(frozen=True)
class RewardSpec:
    """Static structure of the composed reward (hashable: it keys the compiled program)."""

    terms: tuple[str, ...] = ()
    normalize: str = "none"  # "none" or "group": each part z-scored in its group before the sum
    style: int = 0  # the rewarded style of the ``style`` term (tree: index into task.tree.styles)

    def __post_init__(self):
        for t in self.terms:
            if t not in REWARD_TERMS:
                raise ValueError(f"algo.reward_terms: unknown term {t!r}; allowed: {', '.join(REWARD_TERMS)}")
        if len(set(self.terms)) != len(self.terms):
            raise ValueError(f"algo.reward_terms: a term is listed twice in {list(self.terms)}")
        if self.normalize not in REWARD_NORMALIZE:
            raise ValueError(f"algo.reward_normalize: got {self.normalize!r}; allowed: {', '.join(REWARD_NORMALIZE)}")


def reads_policy(spec: RewardSpec | None) -> bool:
    """Whether the composed reward reads the rollout policy's log-probabilities."""
    return spec is not None and any(t in POLICY_TERMS for t in spec.terms)


# -- the terms ---------------------------------------------------------------------------------------
def overlong_penalty(lengths, l_max, l_cache):
    """DAPO's soft overlong punishment of answers of ``lengths`` tokens (0, a ramp, then -1)."""
    return jnp.clip(((l_max - l_cache) - lengths) / l_cache, -1.0, 0.0)


def likelihood_rank(logp, mask):
    """``[B, G]`` each answer's ascending rank in its group by mean token log-probability (0 = least
    likely; ties in the answers' order)."""
    mean_logp = (logp * mask).sum(-1) / jnp.maximum(mask.sum(-1), 1.0)
    order = jnp.argsort(mean_logp, axis=-1, stable=True)
    return jnp.argsort(order, axis=-1, stable=True).astype(jnp.float32)


def unlikeliness(r, logp, mask, rank_penalty):
    """The unlikeliness reward ``r (1 - rank_penalty rank / G)``."""
    return r * (1.0 - rank_penalty * likelihood_rank(logp, mask) / r.shape[-1])


def backward_correction(r, fpr, fnr):
    """The backward-corrected reward ``(r - fpr) / (1 - fpr - fnr)``."""
    return (r - fpr) / (1.0 - fpr - fnr)


def answer_style(env, task_b, rollout, style: int):
    """``[B, G]`` 1 where the answer has the rewarded style (tree: its root action's style; bandit: the
    prompt's format answer)."""
    pair_style = getattr(env, "pair_style", None)
    if pair_style is None:
        return env.is_format(task_b, rollout.answers)
    root_style = jnp.asarray(pair_style[0])  # the style of each root action
    return (root_style[rollout.tokens[..., 0]] == style).astype(jnp.float32)


def group_z(x, eps):
    """Group z-score with the population std: ``(x - mean_g) / (std_g + eps)``."""
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / (jnp.sqrt(((x - mean) ** 2).mean(-1, keepdims=True)) + eps)


def compose(spec: RewardSpec | None, r, *, env, task_b, rollout, logp_old, hp):
    """The composed reward ``[B, G]`` of the arm's rewards ``r`` (``spec`` None or without terms: ``r``)."""
    if spec is None or not spec.terms:
        return r
    parts = []
    for term in spec.terms:
        if term == "unlikeliness":
            r = unlikeliness(r, logp_old, rollout.mask, hp.rank_penalty)
        elif term == "backward":
            r = backward_correction(r, hp.fpr, hp.fnr)
        elif term == "overlong":
            parts.append((hp.overlong_factor, overlong_penalty(rollout.lengths, hp.overlong_max, hp.overlong_cache)))
        elif term == "style":
            parts.append((hp.style_weight, answer_style(env, task_b, rollout, spec.style)))
    if spec.normalize == "group":
        return group_z(r, hp.std_eps) + sum((w * group_z(t, hp.std_eps) for w, t in parts), jnp.zeros_like(r))
    return r + sum((w * t for w, t in parts), jnp.zeros_like(r))
