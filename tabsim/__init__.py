"""tabsim: causal analysis of RL with verifiable rewards in a compiled tabular GRPO simulator.

    import tabsim as ts
    res = ts.run({"preset": "paper", "sweep": {"prior_strength": [0.2, 0.5, 0.8]}})
    res.frame  # one row per condition x seed x arm x eval step
"""
from __future__ import annotations

__version__ = "0.1.0"

from tabsim.base.lazy import lazy_exports  # nothing here loads JAX, nor touches the environment

# The public names, imported on first use (PEP 562): ``import tabsim`` and ``tabsim --help`` do not
# pay for JAX, pandas, statsmodels or matplotlib until something needs them.
_EXPORTS = {
    "AlgoSpec": "sim.algos", "policy_loss": "sim.algos",
    "Executor": "runtime.executors", "LocalExecutor": "runtime.executors",
    "DaskExecutor": "runtime.dask",
    "Result": "runtime.run", "compiled_train": "runtime.run", "make_env": "runtime.run",
    "run": "runtime.run", "expected_crossover": "runtime.run",
    "enable_compilation_cache": "runtime.cache", "disable_compilation_cache": "runtime.cache",
    "ARMS": "sim.arms",
    "Config": "config", "ConfigError": "config", "load_config": "config",
    "resolve": "config",
    "Schedule": "sim.engine", "make_train": "sim.engine",
    "ENVS": "sim.envs", "BanditEnv": "sim.envs.bandit",
    "Factor": "studies.factorial", "run_factorial": "studies.factorial",
    "compare": "studies.compare", "Comparison": "studies.compare",
    "Hyper": "sim.params", "PRESETS": "config.presets",
}

__all__ = ["run", "Result", "Config", "ConfigError", "load_config", "resolve", "make_train", "Schedule",
           "AlgoSpec", "policy_loss", "Hyper", "ARMS", "PRESETS", "ENVS", "BanditEnv", "Executor",
           "LocalExecutor", "DaskExecutor", "compiled_train", "enable_compilation_cache", "disable_compilation_cache",
           "make_env", "Factor", "run_factorial", "expected_crossover", "compare", "Comparison"]


# where earlier versions' modules live now: `import tabsim.presets` still works, with a DeprecationWarning
_MOVED = {"algos": "sim.algos", "arms": "sim.arms", "engine": "sim.engine", "envs": "sim.envs",
          "expected": "sim.expected", "params": "sim.params", "rng": "sim.rng", "presets": "config.presets"}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, submodules=True, moved=_MOVED)  # tabsim.audit etc. too
