"""The exact expected flow refuses every component that declares at its registration that it has none, whichever
registry it sits in (an estimator, a ratio, a surrogate or an aggregation), in one line naming the field."""
from __future__ import annotations

import pytest

from tabsim.sim.algos import AGGREGATIONS, RATIOS, SURROGATES, AlgoSpec
from tabsim.sim.engine import Schedule
from tabsim.sim.envs.bandit import BanditEnv
from tabsim.sim.expected.flow import check

LOSS_SIDE = [(field, name) for field, registry in (("ratio", RATIOS), ("surrogate", SURROGATES),
                                                    ("aggregation", AGGREGATIONS))
             for name in registry if registry.meta(name).get("no_expected")]


def test_some_loss_side_component_declares_no_flow():
    assert {"disco", "real", "kl_cov"} <= {name for _, name in LOSS_SIDE}


@pytest.mark.parametrize("field,name", LOSS_SIDE)
def test_a_loss_side_component_without_a_flow_is_refused(field, name):
    env, sched = BanditEnv(n_prompts=4, n_answers=4, n_correct=1, offline_samples=0), Schedule(batch_size=4,
                                                                                               group_size=4)
    with pytest.raises(ValueError, match=f"algo.{field} = '{name}' has no exact flow: "):
        check(env, AlgoSpec(**{field: name}), sched, ("true",))


def test_the_clip_still_has_its_flow():
    env, sched = BanditEnv(n_prompts=4, n_answers=4, n_correct=1, offline_samples=0), Schedule(batch_size=4,
                                                                                               group_size=4)
    check(env, AlgoSpec(surrogate="clip"), sched, ("true",))
