"""The ``tabsim`` command line. Each command validates its input before anything runs.

Commands are loaded when they run: ``tabsim --help`` imports none of them, and ``tabsim CMD --help``
only CMD's options (its module keeps JAX, pandas, statsmodels and matplotlib out of its imports).
"""
from tabsim.cli.app import COMMANDS, LazyGroup, entry, main, walk

__all__ = ["COMMANDS", "LazyGroup", "entry", "main", "walk"]
