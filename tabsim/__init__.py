"""tabsim: causal analysis of RL with verifiable rewards in a compiled tabular GRPO simulator.

    import tabsim as ts
    res = ts.run({"preset": "paper", "sweep": {"prior_strength": [0.2, 0.5, 0.8]}})
    res.frame  # one row per condition x seed x arm x eval step
"""
from __future__ import annotations

__version__ = "0.1.0"

from tabsim.algos import AlgoSpec, policy_loss  # noqa: E402
from tabsim.api import Executor, LocalExecutor, Result, compiled_train, make_env, run  # noqa: E402
from tabsim.arms import ARMS  # noqa: E402
from tabsim.config import Config, ConfigError, load_config, resolve  # noqa: E402
from tabsim.engine import Schedule, make_train  # noqa: E402
from tabsim.envs import ENVS  # noqa: E402
from tabsim.envs.bandit import BanditEnv  # noqa: E402
from tabsim.factorial import Factor, run_factorial  # noqa: E402
from tabsim.params import Hyper  # noqa: E402
from tabsim.presets import PRESETS  # noqa: E402

__all__ = ["run", "Result", "Config", "ConfigError", "load_config", "resolve", "make_train", "Schedule",
           "AlgoSpec", "policy_loss", "Hyper", "ARMS", "PRESETS", "ENVS", "BanditEnv", "Executor",
           "LocalExecutor", "compiled_train", "make_env", "Factor", "run_factorial"]
