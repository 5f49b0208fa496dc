"""``algo``'s fields of the rollout allocation per prompt (:mod:`tabsim.sim.allocation`), with their checks.

``algo.allocation`` names the rule (``none``: every prompt gets ``train.group_size`` answers); with a rule, the batch's
budget is ``batch_size x group_size`` answers and one prompt gets at most ``algo.allocation_max`` (the groups'
static width). Both are written to a config only when set away from their default, so a config written before they
existed keeps its digest.
"""
from __future__ import annotations

from pydantic import Field, field_validator

from tabsim.base.choices import ALLOCATIONS
from tabsim.config.base import Section, one_of

MASKED_ESTIMATORS = ("grpo", "dr_grpo")  # computed over each group's allotted answers (tabsim.sim.allocation)
# the aggregations that drop a masked answer from their counts (a group-size constant would count it)
MASKED_AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
ALGO_UNWRITTEN = ("allocation", "allocation_max")
ALGO_KNOBS = {"allocation_max": ("allocation", "knapsack")}


class AllocationKnobs(Section):
    """``algo``'s fields of the allocation (a base of ``AlgoConfig``)."""

    allocation: str = Field("none", description="answers per prompt at the budget batch_size x group_size "
                                                "(knapsack: Knapsack RL); none = group_size answers each")
    allocation_max: int | None = Field(None, ge=2, le=65536, description="the most answers one prompt gets under an "
                                       "allocation (the groups' width), >= train.group_size")

    @field_validator("allocation")
    @classmethod
    def _allocation(cls, v):
        return one_of("allocation", v, ("none", *ALLOCATIONS))


def check_allocation(train, algo) -> None:
    """Refuse (one line) an allocation without its width, or combined with what it does not follow."""
    if algo.allocation == "none":
        if algo.allocation_max is not None:
            raise ValueError(f"algo.allocation_max: read only by an allocation (algo.allocation is 'none'); got "
                             f"{algo.allocation_max}, leave it unset or name an allocation")
        return
    name, M, n = algo.allocation, algo.allocation_max, train.group_size
    if M is None or M < n:
        raise ValueError(f"algo.allocation_max: {name!r} gives one prompt at most allocation_max answers, at least "
                         f"train.group_size = {n} (the budget per prompt); got {M}")
    others = {"train.dynamics": (train.dynamics, "sampled"), "train.replacement": (train.replacement, False),
              "train.group_stage": (train.group_stage, "none"), "train.refill": (train.refill, 0),
              "algo.tracker": (algo.tracker, "none"), "algo.prompt_skip": (algo.prompt_skip, "none")}
    for field, (got, want) in others.items():
        if got != want:
            raise ValueError(f"{field}: {got!r} is not followed by algo.allocation = {name!r} (per-prompt state over "
                             f"sampled groups drawn once an epoch); set {field} = {want!r} or algo.allocation = 'none'")
    if algo.estimator not in MASKED_ESTIMATORS:
        raise ValueError(f"algo.estimator: {name!r} computes the group statistics over each group's allotted answers "
                         f"for {list(MASKED_ESTIMATORS)}; got {algo.estimator!r}")
    if algo.aggregation not in MASKED_AGGREGATIONS:
        raise ValueError(f"algo.aggregation: {name!r} masks unallotted answers, which {list(MASKED_AGGREGATIONS)} "
                         f"leave out of their counts; got {algo.aggregation!r}")


def allocation_fields(cfg) -> dict:
    """The :class:`~tabsim.sim.algos.AlgoSpec` fields of the allocation."""
    a = cfg.algo
    return {} if a.allocation == "none" else {"allocation": a.allocation, "allocation_n": cfg.train.group_size}


def allocation_width(cfg) -> int:
    """The groups' static width: ``algo.allocation_max`` under an allocation, else ``train.group_size``."""
    return cfg.algo.allocation_max if cfg.algo.allocation != "none" else cfg.train.group_size
