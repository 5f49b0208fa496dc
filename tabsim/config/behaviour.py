"""The config's knobs of a behaviour policy and its importance-sampling correction (:mod:`tabsim.sim.behaviour`)
and of the KL and reference schedules (:mod:`tabsim.sim.kl_schedule`): fields of ``algo``, with their checks.

Every knob is written to a config only when set away from its default (``ALGO_UNWRITTEN_AT_DEFAULT`` in
:mod:`tabsim.config.models`), so a config written before they existed keeps its digest.
"""
from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from tabsim.base.hyper_defaults import HYPER_DEFAULTS as D
from tabsim.base.choices import BEHAVIOUR_OLD, BEHAVIOURS, HINT_WHEN, IS_CORRECTIONS, KL_SCHEDULES
from tabsim.config.base import BIG, Section, one_of

NAMED = {"behaviour": BEHAVIOURS, "behaviour_old": BEHAVIOUR_OLD, "is_correction": IS_CORRECTIONS,
         "kl_schedule": KL_SCHEDULES, "hint_when": HINT_WHEN}


class BehaviourKnobs(Section):
    """``algo``'s fields of the behaviour sampler and the KL schedules (a base of ``AlgoConfig``)."""

    behaviour: str = Field("policy", description="the policy the answers are drawn from: policy (on-policy), "
                                                 "hint, mismatch or stale")
    behaviour_lag: int = Field(1, ge=1, le=64, description="behaviour stale: updates the sampler lags behind")
    behaviour_old: str = Field("policy", description="logp_old under a behaviour policy: the policy's (TRL, verl "
                                                     "decoupled) or the sampler's (verl bypass)")
    is_correction: str = Field("none", description="importance-sampling correction of a behaviour policy (TRL "
                                                   "vllm_importance_sampling_mode)")
    hint_lambda: float = Field(D["hint_lambda"], ge=0.0, le=1.0)
    hint_when: str = Field("always", description="hint: every group (always), or only the groups whose answers "
                                                 "drawn from the policy are all wrong (all_wrong: Guide)")
    mismatch_sigma: float = Field(D["mismatch_sigma"], ge=0.0, le=BIG)
    is_cap: float = Field(D["is_cap"], gt=0.0, le=BIG)
    kl_schedule: str = Field("fixed", description="fixed beta, or verl's adaptive KL controller")
    kl_target: float = Field(D["kl_target"], gt=0.0, le=BIG)
    kl_horizon: float = Field(D["kl_horizon"], gt=0.0, le=1e12)
    ref_reset_every: int = Field(0, ge=0, le=10_000_000, description="sync the KL reference with the policy every "
                                                                      "N steps (ProRL, TRL sync_ref_model); 0 = never")
    ref_mixup_alpha: float = Field(D["ref_mixup_alpha"], gt=0.0, le=1.0,
                                   description="at a sync, ref <- (1 - alpha) ref + alpha "
                                               "policy (1: a hard reset)")
    ref_reset_optimizer: bool = Field(True, description="restart the optimizer's state at a sync (ProRL)")

    @field_validator(*NAMED)
    @classmethod
    def _named(cls, v, info):
        return one_of(f"algo.{info.field_name}", v, NAMED[info.field_name])

    @model_validator(mode="after")
    def _schedules(self):
        if self.behaviour == "policy" and self.is_correction != "none":
            raise ValueError(f"algo.is_correction: {self.is_correction!r} weighs answers drawn from a behaviour "
                             "policy, and algo.behaviour is 'policy'; set algo.behaviour (hint, mismatch, stale) or "
                             "is_correction = 'none'")
        if self.is_correction != "none" and self.behaviour_old == "behaviour":
            raise ValueError(f"algo.is_correction: {self.is_correction!r} weighs by pi_old / mu, and with "
                             "algo.behaviour_old = 'behaviour' the ratio pi / mu corrects already (verl's bypass mode); "
                             "use one of the two")
        if self.hint_when != "always" and self.behaviour != "hint":
            raise ValueError(f"algo.hint_when: {self.hint_when!r} picks the groups a hint redraws, and algo.behaviour "
                             f"is {self.behaviour!r}; set algo.behaviour = 'hint' or leave hint_when 'always'")
        placement = getattr(self, "kl_placement", "none")
        if self.kl_schedule == "adaptive" and placement != "reward":
            raise ValueError(f"algo.kl_schedule: 'adaptive' adapts the KL in the reward (verl's AdaptiveKLController "
                             f"with algorithm.use_kl_in_reward), and algo.kl_placement is {placement!r}; set "
                             "algo.kl_placement = 'reward'")
        if self.ref_reset_every and placement == "none":
            raise ValueError(f"algo.ref_reset_every: {self.ref_reset_every} resets the KL's reference, and "
                             "algo.kl_placement is 'none' (no KL reads it); set a KL placement or leave it 0")
        return self


def check_behaviour(task, train, algo) -> None:
    """The checks across sections (raises ``ValueError``): hints need a one-node task, and the exact expected
    flow runs none of these knobs."""
    if algo.behaviour != "policy" and getattr(train, "group_stage", "none") != "none":
        raise ValueError(f"algo.behaviour: {algo.behaviour!r} is not combined with a group stage (train.group_stage = "
                         f"{train.group_stage!r}) in this version; leave one of them at its default")
    if algo.behaviour != "policy" and getattr(train, "refill", 0):
        raise ValueError(f"algo.behaviour: {algo.behaviour!r} is not combined with DAPO's refill (train.refill = "
                         f"{train.refill}) in this version; leave one of them at its default")
    if algo.behaviour == "hint" and task.env != "bandit":
        raise ValueError(f"algo.behaviour: 'hint' mixes the correct answers into a one-node policy, and task.env is "
                         f"{task.env!r}; use task.env = 'bandit' or another behaviour (mismatch, stale)")
    if train.dynamics == "expected" and (algo.behaviour != "policy" or algo.kl_schedule != "fixed"
                                         or algo.ref_reset_every):
        raise ValueError("train.dynamics: 'expected' iterates the on-policy expected update with a fixed beta and "
                         "reference; algo.behaviour, algo.kl_schedule and algo.ref_reset_every need "
                         "train.dynamics = 'sampled'")
