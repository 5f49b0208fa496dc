"""Environments: stateless objects holding static structure, registered by name."""
from __future__ import annotations

ENVS: dict[str, type] = {}


def register_env(name: str):
    def deco(cls):
        ENVS[name] = cls
        cls.name = name
        return cls

    return deco


def prompt_means(per_prompt: dict) -> dict:
    """Means over prompts of ``[N]`` per-prompt metrics, taken as one reduction (less to compile)."""
    import jax.numpy as jnp

    means = jnp.stack(list(per_prompt.values()), axis=-1).mean(-2)
    return {k: means[..., i] for i, k in enumerate(per_prompt)}


from tabsim.envs.bandit import BanditEnv, BanditTask  # noqa: E402,F401
from tabsim.envs.tree import TreeEnv, TreeTask  # noqa: E402,F401
