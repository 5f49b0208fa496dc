"""tabsim: causal analysis of RL with verifiable rewards in a compiled tabular GRPO simulator.

    import tabsim as ts
    res = ts.run({"preset": "paper", "sweep": {"prior_strength": [0.2, 0.5, 0.8]}})
    res.frame  # one row per condition x seed x arm x eval step
"""
from __future__ import annotations

__version__ = "0.1.0"

import os as _os


def _xla_cpu_defaults() -> None:
    """XLA CPU compile settings that cut tabsim's compile time at the same run time (measured in
    experiments/bench_engine.py, paper sweep on 2 cores):

    * ``--xla_cpu_use_fusion_emitters=false``: the classic loop emitters, about 30% less compile time;
    * ``--xla_backend_extra_options=-unroll-full-max-count=8``: LLVM fully unrolls loops of at most 8
      trips. An elementwise ``log`` on a ``[runs, 16]`` or ``[runs, 40]`` array (a log-normaliser
      per prompt) is otherwise unrolled 16 or 40 times with its whole polynomial, 70-230 ms of LLVM
      time per kernel; with the cap, about 0.06 s less compile time for the paper sweep and the same
      steady-state throughput.

    Each is applied only when the user's ``XLA_FLAGS`` does not set that flag, and none when
    ``TABSIM_XLA_DEFAULTS`` is ``0``; they take effect if JAX's CPU backend has not started yet
    (tabsim imported before any JAX computation)."""
    if _os.environ.get("TABSIM_XLA_DEFAULTS", "1") == "0":
        return
    flags = _os.environ.get("XLA_FLAGS", "")
    for name, value in (("xla_cpu_use_fusion_emitters", "false"),
                        ("xla_backend_extra_options", "-unroll-full-max-count=8")):
        if name not in flags:
            flags = f"{flags} --{name}={value}".strip()
    _os.environ["XLA_FLAGS"] = flags


_xla_cpu_defaults()

from tabsim._lazy import lazy_exports  # noqa: E402  (after the XLA flags: nothing here loads JAX)

# The public names, imported on first use (PEP 562): ``import tabsim`` and ``tabsim --help`` do not
# pay for JAX, pandas, statsmodels or matplotlib until something needs them.
_EXPORTS = {
    "AlgoSpec": "algos", "policy_loss": "algos",
    "Executor": "runtime.executors", "LocalExecutor": "runtime.executors",
    "DaskExecutor": "runtime.dask",
    "Result": "runtime.run", "compiled_train": "runtime.run", "make_env": "runtime.run",
    "run": "runtime.run", "expected_crossover": "runtime.run",
    "enable_compilation_cache": "runtime.cache", "disable_compilation_cache": "runtime.cache",
    "ARMS": "arms",
    "Config": "config", "ConfigError": "config", "load_config": "config",
    "resolve": "config",
    "Schedule": "engine", "make_train": "engine",
    "ENVS": "envs", "BanditEnv": "envs.bandit",
    "Factor": "studies.factorial", "run_factorial": "studies.factorial",
    "Hyper": "params", "PRESETS": "presets",
}

__all__ = ["run", "Result", "Config", "ConfigError", "load_config", "resolve", "make_train", "Schedule",
           "AlgoSpec", "policy_loss", "Hyper", "ARMS", "PRESETS", "ENVS", "BanditEnv", "Executor",
           "LocalExecutor", "DaskExecutor", "compiled_train", "enable_compilation_cache", "disable_compilation_cache",
           "make_env", "Factor", "run_factorial", "expected_crossover"]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, submodules=True)  # tabsim.audit etc. too
