"""A group stage that ranks answers by their advantage, with an estimator that gives every token its own, is refused
by the config in one line (the field, the value, what is allowed) before a program is built, through the command
line as in Python."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

import tabsim as ts
from tabsim.base import choices
from tabsim.cli import main
from tabsim.config import ConfigError

TREE = {"task": {"env": "tree"}, "train": {"steps": 2, "eval_every": 1}}


@pytest.mark.parametrize("algo, field", [({"estimator": "tempo"}, "algo.estimator = 'tempo'"),
                                         ({"estimator": "gigpo"}, "algo.estimator = 'gigpo'"),
                                         ({"estimator": "reinforce_pp", "kl_placement": "reward"},
                                          "algo.kl_placement = 'reward'")])
def test_cppo_with_per_token_advantages_is_refused_at_the_edge(tmp_path, algo, field):
    sets = [f"algo.{k}={v}" for k, v in algo.items()]
    (tmp_path / "c.toml").write_text('preset = "cppo"\n')
    res = CliRunner().invoke(main, ["run", str(tmp_path / "c.toml"), "task.env=tree", "train.steps=2",
                                    "train.eval_every=1", *sets, "--out", str(tmp_path / "out")])
    assert res.exit_code != 0 and isinstance(res.exception, SystemExit), res.output  # a message, not a traceback
    assert "Traceback" not in res.output
    line = [x for x in res.output.splitlines() if "train.group_stage" in x]
    assert len(line) == 1 and "'cppo'" in line[0] and field in line[0] and "allowed:" in line[0], res.output
    assert not (tmp_path / "out").exists()
    with pytest.raises(ConfigError, match="train.group_stage: 'cppo' ranks answers"):
        ts.resolve({"preset": "cppo", **TREE, "algo": algo})


def test_what_stays_allowed():
    ts.resolve({"preset": "cppo", **TREE})  # grpo's one advantage per answer
    ts.resolve({"preset": "cppo", "algo": {"estimator": "tempo"}})  # the bandit: one token per answer
    ts.resolve({"preset": "cppo", **TREE, "algo": {"estimator": "reinforce_pp"}})  # the KL in the loss
    ts.resolve({"preset": "gfpo", **TREE, "algo": {"estimator": "tempo"}})  # a stage before the advantages


def test_the_lists_are_the_registries():
    from tabsim.sim.algos import ESTIMATORS, TOKEN_RETURNS
    from tabsim.sim.groups import GROUP_STAGES

    assert choices.PER_TOKEN_ESTIMATORS == tuple(n for n in choices.ESTIMATORS
                                                 if ESTIMATORS.meta(n).get("per_token", False))
    assert choices.GROUP_RANKING == tuple(n for n in choices.GROUP_STAGES if GROUP_STAGES.meta(n)["phase"] == "advantage")
    assert choices.TOKEN_RETURN_ESTIMATORS == tuple(TOKEN_RETURNS)
