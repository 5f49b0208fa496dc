"""The environment registry and what every environment shares: the answer-level metrics and their means."""
from __future__ import annotations

import jax.numpy as jnp

# the exact answer-level metrics every environment records (named without JAX, for the config)
from tabsim.base.choices import ANSWER_METRICS
from tabsim.base.registry import Registry

ENVS = Registry("env")


def register_env(name: str):
    """A class decorator that registers an environment under ``name`` and sets its ``name`` attribute."""
    def deco(cls):
        ENVS.register(name)(cls)
        cls.name = name
        return cls

    return deco


def select_metrics(per_prompt: dict, metrics) -> dict:
    """``per_prompt`` without the answer-level metrics not in ``metrics`` (``None``: keep all).

    What is dropped is never reduced or returned, so XLA removes its computation from the program.
    """
    if metrics is None:
        return per_prompt
    return {k: v for k, v in per_prompt.items() if k not in ANSWER_METRICS or k in metrics}


def prompt_means(per_prompt: dict) -> dict:
    """Means over prompts of ``[N]`` per-prompt metrics, taken as one reduction (less to compile)."""
    means = jnp.stack(list(per_prompt.values()), axis=-1).mean(-2)
    return {k: means[..., i] for i, k in enumerate(per_prompt)}
