"""The compiled programs of every run, in one cache, and the call that computes one chunk.

A program is built once per static structure of a config (:func:`tabsim.config.static.static_key`) and
kept for the life of the process: the engine's ``train(seeds, hypers)`` (:func:`compiled_train`), its
segment programs (:func:`compiled_segments`) and the factorial job's ``jit(vmap(train))`` over units
(:func:`compiled_units`), all in :data:`_CACHE`. :func:`run_chunk` computes one
:class:`tabsim.runtime.planning.Chunk` on them: it is what every executor maps, here or on a Dask worker.
"""
from __future__ import annotations

import jax
import numpy as np

from tabsim.base import precision as precision_mod
from tabsim.config import Config, ConfigError
from tabsim.config.static import algo_spec, expected, make_env, schedule, static_key
from tabsim.sim.engine import make_segments, make_train
from tabsim.sim.expected import check as expected_check
from tabsim.sim.expected import make_expected_train
from tabsim.sim.params import stack_hypers
from tabsim.sim.rng import seed_array
from tabsim.runtime import executables, segments
from tabsim.runtime.cache import apply_default as _apply_default_cache
from tabsim.runtime.planning import Chunk

_CACHE: dict = {}  # every compiled program of this process, by its static key


def check_dynamics(cfg: Config) -> None:
    """Refuse a ``train.dynamics = "expected"`` config that has no exact flow (:class:`ConfigError` saying
    why and what to change), before any program is built or file written."""
    if expected(cfg):
        try:
            expected_check(make_env(cfg), algo_spec(cfg), schedule(cfg), tuple(cfg.arms.arms))
        except ValueError as err:
            raise ConfigError(str(err)) from None


def compiled_train(cfg: Config):
    """The cached ``train(seeds, hypers)`` program for ``cfg``'s static structure.

    Every run builds its programs here (``ts.run``, the factorial runner, ``reproduce``), so the default
    on-disk compilation cache is switched on here, once per process, before the first program compiles
    (:func:`tabsim.runtime.cache.apply_default`); importing tabsim changes no JAX setting."""
    _apply_default_cache()
    key = static_key(cfg)
    if key not in _CACHE:  # setdefault: threads that build it together share the first
        check_dynamics(cfg)
        build = make_expected_train if expected(cfg) else make_train
        _CACHE.setdefault(key, build(make_env(cfg), algo_spec(cfg), schedule(cfg), tuple(cfg.arms.arms)))
    return _CACHE[key]



def compiled_segments(cfg: Config):
    """The cached segment programs (:func:`tabsim.sim.engine.make_segments`) for ``cfg``'s static structure."""
    _apply_default_cache()  # as compiled_train
    key = ("segments",) + static_key(cfg)
    if key not in _CACHE:
        _CACHE.setdefault(key, make_segments(make_env(cfg), algo_spec(cfg), schedule(cfg), tuple(cfg.arms.arms)))
    return _CACHE[key]


def call_program(key, program, *args):
    """``program(*args)`` through its compiled executable (:func:`tabsim.runtime.executables.run`: loaded from
    disk without tracing when a process ran it before; compiled once when threads start together)."""
    return executables.run(key, program, *args)


def compiled_units(cfg: Config):
    """``jit(vmap(train))`` over units ``(seed [U, 1, 2], hypers [U, 1])`` for ``cfg``'s static structure: a
    factorial job's program, kept in the same cache as the engine program it wraps."""
    key = ("units",) + static_key(cfg)
    if key not in _CACHE:  # setdefault: threads that build it together share the first
        train = compiled_train(cfg)
        # the engine's function itself (a nested jit may not carry compiler options; its options go here)
        program = jax.jit(jax.vmap(train.__wrapped__), compiler_options=train.xla_options)
        program.xla_options = train.xla_options
        _CACHE.setdefault(key, program)
    return _CACHE[key]


def run_chunk(chunk: Chunk, hooks: "segments.Hooks | None" = None) -> dict[str, np.ndarray]:
    """Compute one :class:`tabsim.runtime.planning.Chunk`: metric -> ``[C, S, A, E]`` arrays for a grid chunk
    (``hooks``: what a chunk in segments does between them), ``[n_real, A, E]`` for a chunk of units.

    Traced and run in the chunk's precision, in this thread only (:func:`tabsim.base.precision.scope`);
    workers of a distributed executor rebuild (and cache) the program from the chunk's config."""
    with precision_mod.scope(chunk.precision):  # this thread, this call: never the process
        cfg = Config.model_validate(chunk.config)
        if not chunk.grid:
            seeds = seed_array(chunk.seeds)[:, None, :]
            hp = jax.tree_util.tree_map(lambda x: x[:, None], stack_hypers(list(chunk.hypers)))
            out = jax.device_get(call_program(("units", static_key(cfg)), compiled_units(cfg), seeds, hp))
            return {k: np.asarray(v)[: chunk.n_real, 0, 0] for k, v in out.items()}
        hp = stack_hypers(list(chunk.hypers), chunk.shared)
        tag = () if chunk.precision == precision_mod.DEFAULT else (chunk.precision,)  # float32 keys as they were
        if chunk.segment:
            key = ("segments", static_key(cfg)) + tag
            hist = segments.run_chunk(compiled_segments(cfg),
                                      lambda name, n, prog, *args: call_program(key + (name, n), prog, *args),
                                      seed_array(list(chunk.seeds)), hp, chunk.segment, hooks)
            return {k: v.reshape((-1, len(chunk.seeds), len(cfg.arms.arms)) + v.shape[1:]) for k, v in hist.items()}
        return jax.device_get(call_program(("conditions", static_key(cfg)) + tag, compiled_train(cfg),
                                           seed_array(list(chunk.seeds)), hp))
