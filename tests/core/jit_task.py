"""An environment's task from one compiled program.

``env.init_task`` called outside ``jax.jit`` runs operation by operation, and JAX compiles each operation
on its own (about 190 of them for a tree, 10 s of CPU in a fresh process); under ``jax.jit`` it is one
program, as in training, shared here by every environment of the same settings. On the tree of
tests/core/test_tree_sparse.py both give the same bits. The programs are kept for the process: a test that
patches something ``init_task`` calls must call ``env.init_task`` itself.
"""
from __future__ import annotations

import pickle

import jax

_PROGRAMS: dict = {}


def init_task(env, seed, hp):
    """``env.init_task(seed, hp)`` from the compiled program of ``env``'s settings (its attributes)."""
    key = (type(env), pickle.dumps(vars(env)))
    if key not in _PROGRAMS:
        _PROGRAMS[key] = jax.jit(env.init_task)
    return _PROGRAMS[key](seed, hp)
