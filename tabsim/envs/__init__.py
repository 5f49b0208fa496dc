"""Environments: stateless objects holding static structure, registered by name."""
from __future__ import annotations

ENVS: dict[str, type] = {}


def register_env(name: str):
    def deco(cls):
        ENVS[name] = cls
        cls.name = name
        return cls

    return deco


from tabsim.envs.bandit import BanditEnv, BanditTask  # noqa: E402,F401
from tabsim.envs.tree import TreeEnv, TreeTask  # noqa: E402,F401
