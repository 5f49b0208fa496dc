"""Run configuration: validated at the edge, then split into static structure and traced values.

A config is a nested mapping with the sections ``task``, ``arms``, ``algo``, ``train`` and ``sweep``
(TOML or YAML on disk). ``preset`` names a composition from :mod:`tabsim.config.presets` whose values the
file's own values override. ``sweep`` maps numeric fields (names of :class:`tabsim.sim.params.Hyper`
fields, e.g. ``prior_strength``, ``lr``, ``gamma``, ``filter``) to lists of levels; their full
factorial is one vmapped grid.

The models are in :mod:`tabsim.config.models` (``task.tree`` in :mod:`tabsim.config.tree`), the
validation of a mapping in :mod:`tabsim.config.validate`, files in :mod:`tabsim.config.load`, and the
static half (environment, algorithm, schedule, program key) in :mod:`tabsim.config.static`, which
alone loads JAX: it is imported on first use of its names.
"""
from __future__ import annotations

from tabsim.base.lazy import lazy_exports
from tabsim.config.base import BIG, LR_MIN, SEED_END, TINY, ConfigError, Section
from tabsim.config.load import CONFIG_MAX_BYTES, CONFIG_SUFFIXES, load_config, read_config_file
from tabsim.config.models import (CHOICES, SWEEPABLE, AlgoConfig, ArmsConfig, Config, TaskConfig, TrainConfig,
                                  registered, static_field, static_hint)
from tabsim.config.tree import TreeConfig, TreeStyle
from tabsim.config.validate import SECTIONS, deep_merge, resolve

__all__ = ["BIG", "CHOICES", "CONFIG_MAX_BYTES", "CONFIG_SUFFIXES", "LR_MIN", "SECTIONS", "SEED_END", "SWEEPABLE",
           "TINY", "AlgoConfig", "ArmsConfig", "Config", "ConfigError", "Section", "TaskConfig", "TrainConfig",
           "TreeConfig", "TreeStyle", "algo_spec", "deep_merge", "expected", "load_config", "make_env",
           "read_config_file", "registered", "resolve", "schedule", "static_field", "static_hint", "static_key"]

# the static half loads JAX: its names are imported on first use
__getattr__, __dir__ = lazy_exports(__name__, {name: "static" for name in
                                               ("algo_spec", "expected", "make_env", "schedule", "static_key")})
