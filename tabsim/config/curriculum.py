"""``algo``'s fields of prompt sampling by weights refreshed from rollouts (:mod:`tabsim.sim.vas`), with their checks.

``algo.curriculum = "vas"``: MMR1's variance-aware sampling (arXiv 2509.21268), its variance half. Every field is
written to a config only when set away from its default (the algo section's serializer), so a config written before
they existed keeps its digest.
"""
from __future__ import annotations

from pydantic import Field, field_validator

from tabsim.base.choices import CURRICULA
from tabsim.base.hyper_defaults import HYPER_DEFAULTS as D
from tabsim.config.base import Section, one_of


class CurriculumKnobs(Section):
    """``algo``'s fields of the curriculum (a base of ``AlgoConfig``)."""

    curriculum: str = Field("none", description="prompts drawn by per-prompt weights refreshed from rollouts (vas: "
                                                "MMR1's variance-aware sampling, p(1 - p) of each prompt's pass "
                                                "rate); none = the usual draw")
    vas_ratio: float = Field(D["vas_ratio"], ge=0.0, le=1.0, description="vas: the share of a batch drawn by weight "
                             "(with replacement), floor(batch x share); the rest is the usual draw")
    vas_momentum: float = Field(D["vas_momentum"], ge=0.0, le=1.0, description="vas: w <- m w + (1 - m) new scores "
                                "at each refresh (0: the new scores; 1: the first scores kept)")
    vas_every: int = Field(4, ge=1, le=1_000_000, description="vas: steps between two refreshes of the weights (each "
                           "refresh rolls out every prompt vas_rollouts times)")
    vas_rollouts: int = Field(8, ge=2, le=4096, description="vas: rollouts of each prompt per refresh")

    @field_validator("curriculum")
    @classmethod
    def _curriculum(cls, v):
        return one_of("curriculum", v, ("none", *CURRICULA))


# the knobs, written to a config whenever the curriculum reading them is chosen (tabsim.config.models' serializer)
ALGO_KNOBS = {k: ("curriculum", "vas") for k in ("vas_ratio", "vas_momentum", "vas_every", "vas_rollouts")}
ALGO_UNWRITTEN = ("curriculum", *ALGO_KNOBS)  # written only when set away from their default


def curriculum_fields(algo) -> dict:
    """The AlgoSpec fields of the curriculum (its static ones: the name, the refresh period and rollouts)."""
    if algo.curriculum == "none":
        return {}
    return {"curriculum": algo.curriculum, "vas_every": algo.vas_every, "vas_rollouts": algo.vas_rollouts}


def curriculum_key(algo) -> tuple:
    """The part of a program's static key the curriculum adds (none: nothing, so other programs keep their keys)."""
    fields = curriculum_fields(algo)
    return (("curriculum",) + tuple(fields.values()),) if fields else ()


def check_curriculum(task, train, algo) -> None:
    """Refuse (one line naming the field, its value and what is allowed) what VAS cannot run with."""
    if algo.curriculum == "none":
        return
    name = algo.curriculum
    if train.dynamics == "expected":
        raise ValueError(f"algo.curriculum: {name!r} carries per-prompt weights refreshed from rollouts, which the "
                         "exact expected flow does not follow; allowed: train.dynamics = 'sampled' or "
                         "algo.curriculum = 'none'")
    if algo.tracker != "none" or algo.prompt_skip != "none":
        other = "algo.tracker" if algo.tracker != "none" else "algo.prompt_skip"
        raise ValueError(f"algo.curriculum: {name!r} draws the batch itself, and {other} draws it too; allowed: "
                         f"one of them, the other 'none'")
