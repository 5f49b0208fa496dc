"""``algo``'s field of the tabular critic (``algo.tracker = "value"``, :mod:`tabsim.sim.critic`), with its checks.

The field is written to a config only when set away from its default or when the critic is chosen (the algo
section's serializer), so a config written before it existed keeps its digest.
"""
from __future__ import annotations

from pydantic import Field

from tabsim.base.choices import GROUP_RANKING
from tabsim.base.hyper_defaults import HYPER_DEFAULTS as D
from tabsim.config.base import Section


class ValueKnobs(Section):
    """``algo``'s field of the critic (a base of ``AlgoConfig``)."""

    value_lr: float = Field(D["value_lr"], gt=0.0, le=1.0, description="value tracker: each state's value moves by "
                            "this share of its visits' mean error R - V(s) after each step")


ALGO_KNOBS = {"value_lr": ("tracker", "value")}


def check_value(task, train, algo) -> None:
    """Refuse (one line naming the field, its value and what is allowed) what the critic cannot run with."""
    if algo.tracker != "value":
        return
    if algo.kl_placement == "reward":
        raise ValueError("algo.kl_placement: 'reward' puts the KL into the returns, and algo.tracker = 'value' learns "
                         "its values from the outcome rewards; allowed: 'loss' or 'none'")
    if train.group_stage in GROUP_RANKING and task.env == "tree" and task.tree.depth > 1:
        raise ValueError(f"train.group_stage: {train.group_stage!r} ranks answers by one advantage each, and "
                         "algo.tracker = 'value' gives every token its own on the tree (R - V(s_t)); allowed: a stage "
                         "that acts before the advantages (gfpo_length, gfpo_efficiency, drop_all_wrong, "
                         "drop_all_right)")
