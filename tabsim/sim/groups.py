"""The group stage: what a batch's groups keep before their advantages and their loss.

A rollout batch holds ``B`` groups of ``G`` answers. A group stage (``train.group_stage``; default ``"none"``,
which leaves the update's program as it was) acts on the scored groups, in one of two ways:

* **answer selection** (``kind="answers"``): each group keeps ``k`` of its ``G`` answers (``train.group_keep``,
  a static size: the kept answers are gathered into ``[B, k]`` arrays and everything after the stage, the
  estimator, the loss and its aggregation, sees groups of ``k``); the stage scores every answer and the ``k``
  best scores are kept (ties: the earlier answer). ``phase="score"`` selects before the advantages (the
  estimator's group statistics run over the kept answers), ``phase="advantage"`` after them (the
  advantages of the whole group, then the selection);
* **group masks** (``kind="groups"``): a ``[B]`` 0/1 keep indicator that multiplies the dynamic-sampling
  filter's ``valid`` (so batch-level estimators and every aggregation see the kept groups only).

The built-in stages and what was checked:

``gfpo_length`` and ``gfpo_efficiency``: GFPO (Group Filtered Policy Optimization, arXiv 2508.09726): sample
``G' > k`` answers, keep the ``k`` shortest (``score = -|o|``) or the ``k`` of highest token efficiency
(``score = r / |o|``, reward per token), and compute the advantages over the kept answers only; the dropped
answers leave the batch. Checked against TRL's ``trl/experimental/gfpo`` (``GFPOTrainer``): it takes
``topk`` of the filter scores per group, gathers the kept answers and their rewards, and computes the group
mean and the Bessel std over the ``num_remains_in_group`` kept (eps 1e-4); its config requires
``2 <= k < G``. The paper's adaptive-difficulty variant (k from a running difficulty estimate) is not built.

``cppo``: CPPO (Completion Pruning Policy Optimization, arXiv 2503.22342): advantages over the whole group of
``G``, then each group keeps the ``k`` answers of largest ``|A|`` (the paper's pruning rate ``P = 1 - k/G``);
the pruned answers leave the batch. Checked against the authors' released trainer
(``lzhxmu/CPPO``, ``src/open_r1/grpo_trainer_math.py``): the z-score (Bessel std, eps 1e-4) over the full
group, then the ``int(N P)`` answers of smallest ``|A|`` removed, with the loss a token mean over the rest. The
released code prunes over each device's slice of answers (several groups together); tabsim prunes per group,
as the paper's description and method's name state. Its dynamic completion allocation (more prompts
per device) is a throughput device with no counterpart here.

``drop_all_wrong`` and ``drop_all_right``: one-sided halves of the dynamic-sampling filter (DAPO, arXiv
2503.14476, which drops both sides: ``algo.filter``). ``drop_all_wrong`` drops the groups in which no
answer has a reward above 0 and keeps the all-correct ones; ``drop_all_right`` drops the groups in which
every answer has a reward of 1 or more. With ``algo.filter`` (both sides) and no filter they make the
two-by-two factorial of the filter's sides. The rewards read are the outcome rewards (before a KL placed
in the reward).

**Refill** (``train.refill``, DAPO's dynamic sampling, arXiv 2503.14476, section 3.2 and its verl recipe): draw
``B + refill`` candidate prompts, roll out and score all of them, and keep the first ``B`` informative groups
(rewards not all equal) in the order drawn (:func:`refill`). Checked against verl's ``recipe/dapo``
(``dapo_ray_trainer.py``): it keeps the groups whose metric has a std above 0 from successive generation
batches, concatenated in order, and cuts the batch to ``train_batch_size`` prompts once enough are kept,
drawing at most ``max_num_gen_batches`` batches. tabsim draws the candidates at once (a fixed shape: the cap is
``B + refill`` prompts); where fewer than ``B`` are informative, verl raises an error and draws no more, tabsim
fills the batch with the first uninformative ones, which ``algo.filter`` then drops.

Register a stage with :func:`register_group_stage`; ``kind`` and ``phase`` say what it returns and when it
runs (``no_expected`` is implied: ``train.dynamics = "expected"`` refuses every stage, see
:mod:`tabsim.config.models`).
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from tabsim.base import choices
from tabsim.base.registry import Registry

GROUP_STAGES = Registry("group stage", builtin=choices.GROUP_STAGES)


def register_group_stage(name: str, *, kind: str, phase: str = "score", **meta):
    """``@register_group_stage(name, kind="answers" | "groups", phase="score" | "advantage")``.

    An ``answers`` stage is ``score(rewards [B, G], lengths [B, G], adv) -> [B, G]`` (higher is kept; ``adv`` is
    ``None`` at ``phase="score"``); a ``groups`` stage is ``keep(rewards [B, G]) -> [B]`` 0/1 (``phase="score"``)."""
    if kind not in ("answers", "groups") or phase not in ("score", "advantage"):
        raise ValueError(f"group stage {name!r}: kind must be 'answers' or 'groups' and phase 'score' or "
                         f"'advantage', got kind={kind!r}, phase={phase!r}")
    if kind == "groups" and phase != "score":
        raise ValueError(f"group stage {name!r}: a 'groups' stage runs at phase 'score', got {phase!r}")
    return GROUP_STAGES.register(name, kind=kind, phase=phase, **meta)


@dataclasses.dataclass(frozen=True)
class GroupStage:
    """The static half of a group stage: its name and, for an answer-selecting stage, the ``k`` answers each
    group keeps (a shape: the kept arrays are ``[B, k]``)."""

    name: str = "none"
    keep: int = 0  # answers each group keeps (answer-selecting stages; 0 otherwise)

    @property
    def active(self) -> bool:
        return self.name != "none"

    def meta(self) -> dict:
        return GROUP_STAGES.meta(self.name) if self.active else {}

    def check(self, G: int, *, token_returns: bool = False) -> None:
        """Refuse (one ``ValueError`` line) a stage that is unknown, a ``keep`` that does not fit ``G``, or an
        advantage-phase selection of per-token advantages."""
        if not self.active:
            return
        meta = GROUP_STAGES.meta(self.name)  # an unknown name raises UnknownName (a ValueError)
        if meta["kind"] == "answers":
            if not 2 <= self.keep < G:
                raise ValueError(f"train.group_keep: stage {self.name!r} keeps k of the G = {G} answers of a group, "
                                 f"2 <= k < G; got {self.keep}")
            if meta["phase"] == "advantage" and token_returns:
                raise ValueError(f"train.group_stage: {self.name!r} ranks answers by one advantage each, and "
                                 "REINFORCE++ with the KL in the reward gives every token its own; put the KL in "
                                 "the loss or use another estimator")
        elif self.keep:
            raise ValueError(f"train.group_keep: stage {self.name!r} keeps or drops whole groups and reads no k; "
                             f"got {self.keep}, leave it unset")


# -- the built-in stages ------------------------------------------------------------------------------
@register_group_stage("gfpo_length", kind="answers", phase="score")
def gfpo_length(rewards, lengths, adv):
    """GFPO by length: the shortest answers score highest, ``-|o_i|``."""
    return -lengths.astype(rewards.dtype)


@register_group_stage("gfpo_efficiency", kind="answers", phase="score")
def gfpo_efficiency(rewards, lengths, adv):
    """GFPO by token efficiency: ``r_i / |o_i|``, reward per token."""
    return rewards / jnp.maximum(lengths.astype(rewards.dtype), 1.0)


@register_group_stage("cppo", kind="answers", phase="advantage")
def cppo(rewards, lengths, adv):
    """CPPO: the answers of largest absolute advantage, ``|A_i|``."""
    return jnp.abs(adv)


@register_group_stage("drop_all_wrong", kind="groups")
def drop_all_wrong(rewards):
    """Keep a group unless no answer has a reward above 0."""
    return (rewards.max(-1) > 0).astype(rewards.dtype)


@register_group_stage("drop_all_right", kind="groups")
def drop_all_right(rewards):
    """Keep a group unless every answer has a reward of 1 or more."""
    return (rewards.min(-1) < 1).astype(rewards.dtype)


# -- applying a stage ---------------------------------------------------------------------------------
def top_k_answers(score, k: int):
    """``[B, k]`` the positions of each group's ``k`` highest scores, in increasing position (ties: the earlier
    answer is kept)."""
    return jnp.sort(jax.lax.top_k(score, k)[1], axis=-1)


def take_answers(x, idx, G: int):
    """``x`` with its answer axis (axis 1, of length ``G``) cut to the positions ``idx [B, k]``; ``None``, arrays
    without that axis (a node shared by the group, ``[B, 1, 1, A]``; a reference row ``[B, b]``) and scalars
    pass unchanged."""
    if x is None or jnp.ndim(x) < 2 or x.shape[1] != G or x.shape[0] != idx.shape[0]:
        return x
    rows = jnp.arange(idx.shape[0])[:, None]
    return x[rows, idx]


def select(tree, idx, G: int):
    """Every array of ``tree`` with an answer axis of length ``G`` cut to ``idx [B, k]`` (:func:`take_answers`)."""
    return jax.tree_util.tree_map(lambda x: take_answers(x, idx, G), tree)


def runs_at(stage: GroupStage, phase: str) -> bool:
    """Whether ``stage`` acts at ``phase`` (``"score"`` or ``"advantage"``)."""
    return stage.active and stage.meta()["phase"] == phase


def at_score(stage: GroupStage, G: int, rewards, outcome, lengths, parts):
    """The stage before the advantages: ``(parts, keep)``. An answer-selecting stage returns ``parts`` (a tuple
    of the batch's ``[B, G, ...]`` arrays and rollout, the rewards first) cut to the kept answers and
    ``keep = None``; a group stage returns ``parts`` unchanged and its ``[B]`` keep indicator (from the
    outcome rewards, before a KL in the reward)."""
    meta = stage.meta()
    scored = rewards if outcome is None else outcome
    if meta["kind"] == "groups":
        return parts, GROUP_STAGES[stage.name](scored)
    idx = top_k_answers(GROUP_STAGES[stage.name](scored, lengths, None), stage.keep)
    return select(parts, idx, G), None


def at_advantage(stage: GroupStage, G: int, rewards, lengths, adv, parts):
    """The stage after the advantages: ``parts`` (the advantages first) cut to each group's kept answers."""
    idx = top_k_answers(GROUP_STAGES[stage.name](rewards, lengths, adv), stage.keep)
    return select(parts, idx, G)


def informative_first(rewards, B: int):
    """``[B]`` positions of the first ``B`` groups of ``rewards [N, G]`` whose rewards are not all equal, in order,
    followed where fewer by the first of the others, in order."""
    n = rewards.shape[0]
    flat = rewards.max(-1) == rewards.min(-1)
    return jnp.argsort(jnp.where(flat, n, 0) + jnp.arange(n))[:B]


def refill(B: int, rewards, parts):
    """``parts`` (per-prompt arrays and pytrees of ``N = B + refill`` candidate groups, the prompts ``idx [N]``
    among them) cut to :func:`informative_first`'s ``B`` groups; arrays without that leading axis pass."""
    pick = informative_first(rewards, B)
    n = rewards.shape[0]
    return jax.tree_util.tree_map(lambda x: x[pick] if jnp.ndim(x) >= 1 and x.shape[0] == n else x, parts)
