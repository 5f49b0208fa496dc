"""The static composition of a GRPO-family update (its numeric knobs are traced fields of
:class:`tabsim.sim.params.Hyper`)."""
from __future__ import annotations

import dataclasses
from typing import Any

from tabsim.sim.algos.advantages import ESTIMATORS
from tabsim.sim.algos.aggregation import AGGREGATIONS
from tabsim.sim.algos.kl import KL_ESTIMATORS
from tabsim.sim.algos.ratios import RATIOS
from tabsim.sim.algos.surrogates import SURROGATES
from tabsim.sim.algos.token_weights import TOKEN_WEIGHTS
from tabsim.base.choices import KL_PLACEMENTS, OPTIMIZERS


@dataclasses.dataclass(frozen=True)
class AlgoSpec:
    """Static composition of a GRPO-family update (hashable: it keys the compilation cache)."""

    estimator: str = "grpo"
    ratio: str = "token"
    surrogate: str = "clip"
    aggregation: str = "token-mean"
    kl: str = "k3"
    kl_placement: str = "none"
    epochs: int = 1  # mu: passes over each rollout batch
    minibatches: int = 1  # sequential updates per pass
    optimizer: str = "sgd"
    entropy_bonus: bool = False  # compile the entropy term (set when ent_coef > 0 or swept)
    grad_clip: bool = False  # compile the global-norm gradient clip (set when max_grad_norm is set or swept)
    # the composed reward's structure (a tabsim.sim.rewards.RewardSpec; None: the arm's reward as is); left
    # out of the repr, so a composition without reward terms prints as before
    reward: Any = dataclasses.field(default=None, repr=False)
    # the behaviour policy and its correction (tabsim.sim.behaviour), and the KL schedules (tabsim.sim.kl_schedule)
    behaviour: str = "policy"  # policy (on-policy), hint, mismatch or stale
    behaviour_lag: int = 1  # stale: the sampler is the policy this many updates old
    hint_when: str = "always"  # hint: every group, or only the groups the policy's draw got all wrong
    behaviour_old: str = "policy"  # logp_old under a behaviour policy: the policy's or the sampler's
    is_correction: str = "none"  # none, token_truncate, token_mask, sequence_truncate, sequence_mask
    kl_schedule: str = "fixed"  # fixed beta, or verl's adaptive controller
    ref_reset_every: int = 0  # sync the KL reference with the policy every N steps (0: never)
    ref_reset_optimizer: bool = True  # ... and restart the optimizer's state there
    token_weight: str = "none"  # the token-weight stage (tabsim.sim.algos.token_weights); none: no weights
    tracker: str = "none"  # the per-prompt tracker carried in the state (tabsim.sim.tracker); none: no tracker
    prompt_skip: str = "none"  # the prompt skip before the rollout (tabsim.sim.prompt_skip); none: no skipping
    # prompt sampling by weights refreshed from rollouts (tabsim.sim.vas; none: the usual draw), the steps between
    # two refreshes and the rollouts of each prompt per refresh; left out of the repr, as reward is
    curriculum: str = dataclasses.field(default="none", repr=False)
    vas_every: int = dataclasses.field(default=4, repr=False)
    vas_rollouts: int = dataclasses.field(default=8, repr=False)
    allocation: str = "none"  # answers per prompt at a fixed budget (tabsim.sim.allocation); none: G each
    allocation_n: int = 0  # the allocation's budget per prompt (train.group_size; the groups are allocation_max wide)

    def __post_init__(self):
        for field, allowed in (("estimator", ESTIMATORS), ("ratio", RATIOS), ("surrogate", SURROGATES),
                               ("aggregation", AGGREGATIONS), ("kl", KL_ESTIMATORS),
                               ("kl_placement", KL_PLACEMENTS), ("optimizer", OPTIMIZERS),
                               ("token_weight", ("none", *TOKEN_WEIGHTS))):
            value = getattr(self, field)
            if value not in allowed:
                raise ValueError(f"algo.{field}: unknown value {value!r}; allowed: {sorted(allowed)}")
        for field in ("epochs", "minibatches"):
            if int(getattr(self, field)) < 1:
                raise ValueError(f"algo.{field}: must be >= 1, got {getattr(self, field)}")
