"""Environments: stateless objects holding static structure, registered by name."""
from __future__ import annotations

from tabsim.sim.envs.base import ANSWER_METRICS, ENVS, prompt_means, register_env, select_metrics
from tabsim.sim.envs.bandit import BanditEnv, BanditTask
from tabsim.sim.envs.tree import TreeEnv, TreeTask

__all__ = ["ANSWER_METRICS", "ENVS", "BanditEnv", "BanditTask", "TreeEnv", "TreeTask", "prompt_means",
           "register_env", "select_metrics"]
