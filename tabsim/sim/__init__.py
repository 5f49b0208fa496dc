"""The compiled simulator: pure JAX, no files, processes or screens.

The engine and its update step (:mod:`tabsim.sim.engine`, :mod:`tabsim.sim.update`), the
environments (:mod:`tabsim.sim.envs`), the GRPO-family algorithms (:mod:`tabsim.sim.algos`), the
exact expected flow (:mod:`tabsim.sim.expected`), the reward arms (:mod:`tabsim.sim.arms`), the
traced hyperparameters (:mod:`tabsim.sim.params`), the random streams (:mod:`tabsim.sim.rng`) and
the small array helpers (:mod:`tabsim.sim.ops`, :mod:`tabsim.sim.pytree`). Each submodule is
imported on first use, so ``import tabsim.sim`` loads no JAX.
"""
from __future__ import annotations

from tabsim.base.lazy import lazy_exports

__getattr__, __dir__ = lazy_exports(__name__, {}, submodules=True)
