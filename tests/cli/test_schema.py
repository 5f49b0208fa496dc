"""`tabsim config schema`: the JSON Schema of a config file accepts what tabsim reads and refuses what it refuses."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from tabsim.cli import main
from tabsim.config import read_config_file
from tabsim.config.presets import PRESETS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def validator():
    got = CliRunner().invoke(main, ["config", "schema"])
    assert got.exit_code == 0, got.output
    schema = json.loads(got.stdout)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_accepts_every_resolved_preset_and_shipped_config(validator):
    for name in PRESETS:
        got = CliRunner().invoke(main, ["config", "show", name, "--format", "json"])
        validator.validate(json.loads(got.stdout))
    for path in sorted((ROOT / "experiments" / "configs").glob("*")):
        validator.validate(read_config_file(path))
    validator.validate({"preset": "paper", "sweep": {"algo.estimator": ["grpo", "rloo"], "task": {"n_prompts": [10, 20]},
                                                     "prior_strength": [0.2, 0.8]}})
    # numeric fields bare or dotted, a table per section, the tree's fields, the switches' 0 and 1
    validator.validate({"sweep": {"algo.lr": [0.05, 0.1], "arms": {"gamma": [0.3]}, "filter": [0, 1],
                                  "task": {"tree": {"depth": [2, 3]}}, "preset": ["paper", "dapo"]}})


@pytest.mark.parametrize("config, where", [
    ({"algo": {"estimatr": "grpo"}}, "estimatr"),  # a misspelt field
    ({"algo": {"estimator": "dapo"}}, "dapo"),  # a preset's name where an estimator's goes
    ({"preset": "trpo"}, "trpo"),  # not a preset
    ({"arms": {"arms": ["frozen", "truth"]}}, "truth"),
    ({"sweep": {"lr": []}}, "[]"),
    ({"sweep": {"lrr": [0.1, 0.2]}}, "lrr"),  # a misspelt sweep field
    ({"sweep": {"prior_strength": ["nope"]}}, "nope"),  # a name as a numeric field's level
    ({"sweep": {"prior_strength": [0.5, 1.5]}}, "1.5"),  # out of the field's range
    ({"sweep": {"algo.estimator": ["grpo", "nope"]}}, "nope"),
    ({"sweep": {"train.seeds": [1, 2]}}, "train.seeds"),  # not a field a sweep varies
    ({"sweep": {"algo": {"lrr": [0.1]}}}, "lrr"),
])
def test_refuses_what_tabsim_refuses(validator, config, where):
    errors = list(validator.iter_errors(config))
    assert errors and any(where in str(e.message) or where in str(e.instance) for e in errors), errors
