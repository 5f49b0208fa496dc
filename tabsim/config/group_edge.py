"""The group stage's refusals that depend on the estimator and the task, made at the config's edge.

A group stage that ranks answers by their advantage after it is computed (``phase = "advantage"``: CPPO's ``|A|``,
:mod:`tabsim.sim.groups`) needs one advantage per answer. Two compositions give every token its own on answers
longer than one token (a tree of depth > 1): an estimator registered with ``per_token=True`` (GiGPO, TEMPO), and
REINFORCE++ with the KL in the reward (its per-token returns). The engine refuses both when it builds the program
(:func:`tabsim.sim.algos.tree_credit.check_group_stage`, :meth:`tabsim.sim.groups.GroupStage.check`); this module
refuses them when the config is validated, in one line, so that a command line or a config file meets the refusal
before anything is compiled. It reads the names from :mod:`tabsim.base.choices` (no JAX), and an estimator
registered at run time from the engine's registry once that is loaded.
"""
from __future__ import annotations

import sys

from tabsim.base.choices import GROUP_RANKING, PER_TOKEN_ESTIMATORS, TOKEN_RETURN_ESTIMATORS
from tabsim.config import critic, curriculum


def per_token(estimator: str) -> bool:
    """Whether ``estimator`` gives every token its own advantage (a built-in one listed in
    ``choices.PER_TOKEN_ESTIMATORS``, or one registered with ``per_token=True``)."""
    if estimator in PER_TOKEN_ESTIMATORS:
        return True
    algos = sys.modules.get("tabsim.sim.algos")
    registry = getattr(algos, "ESTIMATORS", None)
    return bool(registry is not None and estimator in registry and registry.meta(estimator).get("per_token", False))


def answer_tokens(task) -> int:
    """The most tokens an answer of ``task`` has: 1 on the bandit, ``task.tree.depth`` on the tree."""
    return task.tree.depth if task.env == "tree" else 1


def check_group_ranking(task, train, algo) -> None:
    """Refuse (one ``ValueError`` line naming the field, its value and what is allowed) a group stage that ranks
    answers by one advantage each when the estimator gives every token its own."""
    if train.group_stage not in GROUP_RANKING or answer_tokens(task) <= 1:
        return
    stage, est = train.group_stage, algo.estimator
    if per_token(est):
        raise ValueError(f"train.group_stage: {stage!r} ranks answers by one advantage each, and algo.estimator = "
                         f"{est!r} gives every token its own on the tree (task.tree.depth {task.tree.depth}); allowed: "
                         "a stage that acts before the advantages (gfpo_length, gfpo_efficiency, drop_all_wrong, "
                         "drop_all_right) or a per-answer estimator")
    if est in TOKEN_RETURN_ESTIMATORS and algo.kl_placement == "reward":
        raise ValueError(f"train.group_stage: {stage!r} ranks answers by one advantage each, and algo.estimator = "
                         f"{est!r} with algo.kl_placement = 'reward' gives every token its own return; allowed: "
                         "algo.kl_placement 'loss' or 'none', another estimator, or a stage that acts before the "
                         "advantages (gfpo_length, gfpo_efficiency, drop_all_wrong, drop_all_right)")


def check_edges(task, train, algo) -> None:
    """The config's refusals of what the engine would refuse when it builds the program: a group stage ranking by
    advantage with per-token advantages (:func:`check_group_ranking`) and a curriculum's draw with another
    (:func:`tabsim.config.curriculum.check_curriculum`) and the tabular critic's
    (:func:`tabsim.config.critic.check_value`)."""
    check_group_ranking(task, train, algo)
    curriculum.check_curriculum(task, train, algo)
    critic.check_value(task, train, algo)


class EdgeKnobs(curriculum.CurriculumKnobs, critic.ValueKnobs):
    """``algo``'s fields of the curriculum (:mod:`tabsim.config.curriculum`) and of the tabular critic
    (:mod:`tabsim.config.critic`): a base of ``AlgoConfig``."""


# their knobs, written whenever the component reading them is chosen, and the fields written only when set away from
# their default (tabsim.config.models' serializer)
ALGO_KNOBS = {**curriculum.ALGO_KNOBS, **critic.ALGO_KNOBS}
ALGO_UNWRITTEN = (*curriculum.ALGO_UNWRITTEN, *critic.ALGO_KNOBS)
