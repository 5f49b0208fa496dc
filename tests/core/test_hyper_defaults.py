"""ts.Hyper() and the config give the same traced numbers: both read tabsim.base.hyper_defaults."""
from __future__ import annotations

import dataclasses

from tabsim.base.hyper_defaults import HYPER_DEFAULTS
from tabsim.config.models import Config
from tabsim.sim.params import Hyper


def test_hyper_and_the_config_default_every_field_alike():
    """Every field of Hyper, those added later included, defaults to what a default config traces to."""
    bare, config = Hyper(), Config().hyper_values()
    differ = {f.name: (getattr(bare, f.name), config[f.name]) for f in dataclasses.fields(Hyper)
              if getattr(bare, f.name) != config[f.name]}
    assert differ == {}, f"Hyper() against Config().hyper_values(): {differ}"


def test_every_default_has_one_home():
    """Each traced field's default is written once, in HYPER_DEFAULTS; a new field adds its default there."""
    names = [f.name for f in dataclasses.fields(Hyper)]
    missing = [n for n in names if n not in HYPER_DEFAULTS]
    assert missing == [], f"add the defaults of {missing} to tabsim.base.hyper_defaults.HYPER_DEFAULTS"
    assert sorted(HYPER_DEFAULTS) == sorted(names), "HYPER_DEFAULTS names a field Hyper does not have"
    assert {n: getattr(Hyper(), n) for n in names} == HYPER_DEFAULTS
