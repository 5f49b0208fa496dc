"""Frozen dataclasses that are JAX pytrees (all fields are leaves)."""
from __future__ import annotations

import dataclasses

import jax


def pytree_dataclass(cls):
    """Make ``cls`` a frozen dataclass whose every field is a pytree leaf.

    Used for the traced hyperparameters and the scan carry, so they can be vmapped and passed
    through ``jit`` without recompilation when only their values change.
    """
    cls = dataclasses.dataclass(frozen=True)(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    return jax.tree_util.register_dataclass(cls, data_fields=names, meta_fields=[])
