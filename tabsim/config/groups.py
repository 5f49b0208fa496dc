"""The config's fields of the group stage and DAPO's refill (:mod:`tabsim.sim.groups`, fields of ``train``), of
the per-prompt tracker (:mod:`tabsim.sim.tracker`) and of the prompt skip (:mod:`tabsim.sim.prompt_skip`, fields of
``algo``), with their checks.

Every field is written to a config only when set away from its default (the sections' serializers in
:mod:`tabsim.config.models`), so a config written before they existed keeps its digest.
"""
from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from tabsim.base.hyper_defaults import HYPER_DEFAULTS as D
from tabsim.base.choices import GROUP_SELECTING, GROUP_STAGES, PROMPT_SKIPS, TRACKERS
from tabsim.config.base import Section, one_of


class GroupKnobs(Section):
    """``train``'s fields of the group stage and the refill (a base of ``TrainConfig``)."""

    group_stage: str = Field("none", description="what the batch's groups keep before their advantages "
                                                 "(tabsim.sim.groups); none = the groups as sampled")
    group_keep: int | None = Field(None, ge=2, le=65535, description="answers each group keeps (answer-selecting "
                                                                      "group stages: gfpo_*, cppo), < group_size")
    refill: int = Field(0, ge=0, le=1_000_000, description="candidate prompts drawn beyond batch_size each step, "
                                                           "the first batch_size informative ones kept (DAPO)")

    @field_validator("group_stage")
    @classmethod
    def _group_stage(cls, v):
        return one_of("group stage", v, ("none", *GROUP_STAGES))

    @model_validator(mode="after")
    def _groups(self):
        if self.refill and self.dynamics == "expected":
            raise ValueError(f"train.refill: {self.refill} refills the batch from sampled groups, which the exact "
                             "expected flow does not enumerate; use train.dynamics = 'sampled' or train.refill = 0")
        if self.group_stage == "none":
            if self.group_keep is not None:
                raise ValueError(f"train.group_keep: read only by a group stage (train.group_stage is 'none'); got "
                                 f"{self.group_keep}, leave it unset or name a stage")
            return self
        if self.dynamics == "expected":
            raise ValueError(f"train.group_stage: {self.group_stage!r} cuts the sampled groups, which the exact "
                             "expected flow does not enumerate; use train.dynamics = 'sampled' or no group stage")
        k, G = self.group_keep, self.group_size
        if self.group_stage in GROUP_SELECTING and not (k is not None and 2 <= k < G):
            raise ValueError(f"train.group_keep: stage {self.group_stage!r} keeps k of the G = {G} answers of a "
                             f"group, 2 <= k < G (train.group_size); got {k}")
        if self.group_stage not in GROUP_SELECTING and k is not None:
            raise ValueError(f"train.group_keep: stage {self.group_stage!r} keeps or drops whole groups and reads "
                             f"no k; got {k}, leave it unset")
        return self

    def group_fields_unwritten(self, out: dict) -> dict:
        """``out`` (this section's dump) without the fields left at their defaults."""
        if self.group_stage == "none":
            out.pop("group_stage", None)
            out.pop("group_keep", None)
        if not self.refill:
            out.pop("refill", None)
        return out


class TrackerKnobs(Section):
    """``algo``'s fields of the per-prompt tracker (a base of ``AlgoConfig``)."""

    tracker: str = Field("none", description="a per-prompt tracker carried between steps (spo_stream: SPO's Beta "
                                             "value tracker, its baseline and prompt weights); none = no tracker")
    tracker_rho: float = Field(D["tracker_rho"], gt=0.0, le=1.0, description="spo_stream: the Beta posterior's "
                               "discount per visit")

    prompt_skip: str = Field("none", description="skip prompts before the rollout by their reward history (greso: "
                                                 "GRESO's probabilistic skip); none = every drawn prompt rolled out")
    skip_p_easy: float = Field(D["skip_p_easy"], ge=0.0, le=1.0, description="greso: p_easy at the start, a prompt "
                               "all right e times in a row is skipped with 1 - max(p_easy^e, 0.01)")
    skip_p_hard: float = Field(D["skip_p_hard"], ge=0.0, le=1.0, description="greso: p_hard at the start (the "
                               "all-wrong runs)")
    skip_target: float = Field(D["skip_target"], ge=0.0, le=1.0, description="greso: the target share of "
                               "zero-variance groups (a third all right, two thirds all wrong)")

    @field_validator("tracker")
    @classmethod
    def _tracker(cls, v):
        return one_of("tracker", v, ("none", *TRACKERS))

    @field_validator("prompt_skip")
    @classmethod
    def _prompt_skip(cls, v):
        return one_of("prompt skip", v, ("none", *PROMPT_SKIPS))

    @model_validator(mode="after")
    def _tracker_gives_the_advantages(self):
        if self.tracker != "none" and self.estimator != "grpo":
            raise ValueError(f"algo.tracker: {self.tracker!r} gives the advantages itself (r minus the tracked value, "
                             f"normalised over the batch), so algo.estimator = {self.estimator!r} would not be read; "
                             "leave algo.estimator at 'grpo' or set algo.tracker = 'none'")
        return self


# algo's fields of this module written to a config only when set away from their default, and the knobs written
# whenever the component reading them is chosen (tabsim.config.models' serializer)
ALGO_UNWRITTEN = ("tracker", "tracker_rho", "prompt_skip", "skip_p_easy", "skip_p_hard", "skip_target")
ALGO_KNOBS = {"tracker_rho": ("tracker", "spo_stream"), "skip_p_easy": ("prompt_skip", "greso"),
              "skip_p_hard": ("prompt_skip", "greso"), "skip_target": ("prompt_skip", "greso")}


def check_prompt_state(train, algo) -> None:
    """Refuse (one line) per-prompt state carried between steps under the exact expected flow, and the prompt skip
    with draws with replacement."""
    if algo.tracker != "none" and train.dynamics == "expected":
        raise ValueError(f"algo.tracker: {algo.tracker!r} carries per-prompt state from step to step, which the exact "
                         "expected flow does not follow; use train.dynamics = 'sampled' or algo.tracker = 'none'")
    if algo.prompt_skip == "none":
        return
    if train.dynamics == "expected":
        raise ValueError(f"algo.prompt_skip: {algo.prompt_skip!r} carries each prompt's reward history from step to "
                         "step, which the exact expected flow does not follow; use train.dynamics = 'sampled' or "
                         "algo.prompt_skip = 'none'")
    if train.replacement:
        raise ValueError(f"algo.prompt_skip: {algo.prompt_skip!r} skips prompts of a draw without replacement (each "
                         "prompt once an epoch); set train.replacement = false or algo.prompt_skip = 'none'")
