"""A factor that sets a preset's field back to the model default keeps it (tabsim.config.mapping.config_mapping):
the factorial runner's program config and its run without FROZEN are resolved from the config's dump, which
leaves some fields out at their default, so the preset used to set them again."""
from __future__ import annotations

import pytest

from tabsim.config import resolve
from tabsim.config.mapping import config_mapping
from tabsim.config.presets import PRESETS
from tabsim.studies.chunks import run_config
from tabsim.studies.designs import Factor, make_design, program_config, static_combos


def test_a_static_level_at_the_default_is_kept_under_a_preset_that_sets_it():
    design = make_design({"preset": "lambda_grpo", "arms": {"arms": ["frozen", "true"]}},
                         [Factor("weights", "algo.token_weight", ("lambda_grpo", "none"))])
    weights = [program_config(design, s).algo.token_weight for s in static_combos(design)]
    assert weights == ["lambda_grpo", "none"]
    without_frozen = run_config(program_config(design, (1,)))
    assert without_frozen.arms.arms == ["true"] and without_frozen.algo.token_weight == "none"


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_resolves_back_to_itself(name):
    cfg = resolve({"preset": name})
    assert resolve(config_mapping(cfg)).model_dump(mode="json") == cfg.model_dump(mode="json")
