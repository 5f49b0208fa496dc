"""How a run is cut into chunks, and how much memory a chunk needs, decided before anything is compiled.

Every chunk size is decided here: :func:`conditions_per_chunk` for ``ts.run`` (conditions x seeds),
:func:`units_per_chunk` for factorial designs (condition x seed units), each capped to what fits this
machine (:func:`check_memory`) or a worker's memory limit (:func:`cap_chunk`), and
:func:`local_executor`, which keeps no more chunks in flight than the available memory holds.

The plan of a job (:class:`RunPlan`: its chunks, segment length, executor, device, memory and work)
is made here once, before anything compiles, by :func:`plan` from the job's work stated as data
(:class:`tabsim.runtime.chunks.Work`: ``ts.run``'s grid or a factorial job's units), and passed down;
the memory each chunk needs is :mod:`tabsim.runtime.memory`'s estimate.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

from tabsim.config import Config, ConfigError
from tabsim.config.static import algo_spec, expected, make_env, schedule
from tabsim.sim.expected import CHUNK_BYTES, expected_bytes
from tabsim.sim.envs.bandit import n_compositions
from tabsim.base import defaults
from tabsim.runtime import device as device_mod
from tabsim.runtime.chunks import Work, grid_chunks, unit_chunks
from tabsim.runtime.cuts import calls, near_divisor, progress_segment
from tabsim.runtime.executors import LocalExecutor, local_threads
# the memory estimate, re-exported: callers read every sizing decision from this module
from tabsim.runtime.memory import (F32, MAJ_COPIES, OFFLINE_COPIES, RUNTIME_BYTES, TABLE_COPIES,  # noqa: F401
                                   available_bytes, check_memory, estimate_bytes, fits, largest, max_conditions,
                                   table_entries, tree_depth)


def check_run(cfg: Config, available: int | None = None) -> None:
    """:func:`check_memory` for ``cfg`` run locally with the chunk size :func:`tabsim.runtime.run.run` picks
    (the command line calls it before opening the output folder)."""

    n_cond, n_seeds = len(cfg.grid()), cfg.train.seeds
    per = min(cfg.train.chunk_conditions or _auto_chunk(cfg, n_cond, n_seeds), n_cond)
    check_memory(cfg, per, n_seeds, available)


def conditions_per_chunk(cfg: Config, n_cond: int, n_seeds: int, executor=None, device=None) -> int:
    """Conditions per chunk of a run of ``n_cond`` conditions x ``n_seeds`` seeds: ``train.chunk_conditions``
    or about 2e8 sampled answers on the CPU, as many as fit an accelerator ``device`` (:func:`_auto_chunk`),
    refused before compiling when a chunk cannot fit, capped to a worker's memory limit (:func:`fit_chunk`)."""
    per = min(cfg.train.chunk_conditions or _auto_chunk(cfg, n_cond, n_seeds, device), n_cond)
    return fit_chunk(executor, cfg, per, n_seeds, device)


def units_per_chunk(cfg: Config, n_units: int, executor=None, requested: int | None = None, device=None) -> int:
    """Condition x seed units per chunk of a factorial program: ``requested``, or about 4e6 sampled answers on
    the CPU and as many as fit an accelerator ``device`` (:func:`_auto_units`), checked and capped like
    :func:`conditions_per_chunk`."""
    return fit_chunk(executor, cfg, requested or _auto_units(cfg, n_units, device), 1, device)


# An accelerator runs a whole grid at once for about the cost of a small part of it (one H200: 7.6e9-1.65e10
# sampled answers/s, against 2e7-4e7 per CPU core), and each chunk costs a dispatch, a sync, a hash and a save
# on the host: there a chunk is as large as its device's memory holds, up to about a second of work.
ACCELERATOR_ANSWERS = 1e10  # sampled answers per chunk at most
ACCELERATOR_DEFAULT_BYTES = 8 << 30  # an accelerator that reports no memory figure


def device_bytes(device) -> int | None:
    """Memory free on the accelerator ``device`` (a ``jax.Device``): ``bytes_limit - bytes_in_use`` of its
    ``memory_stats()``; None for the CPU (chunks there are sized for speed and the host's memory) or no device."""
    if device is None or getattr(device, "platform", "cpu") == "cpu":
        return None
    try:
        stats = device.memory_stats() or {}
    except Exception:  # noqa: BLE001 - a backend without memory statistics
        stats = {}
    limit = stats.get("bytes_limit")
    if not limit:
        return ACCELERATOR_DEFAULT_BYTES
    return max(0, int(limit) - int(stats.get("bytes_in_use", 0)))


def _device_fit(cfg: Config, free: int, n_seeds: int) -> int:
    """Conditions of ``n_seeds`` seeds whose arrays fit :data:`MEMORY_FRACTION` of ``free`` device bytes (>= 1)."""
    return max(1, int(MEMORY_FRACTION * free // max(estimate_bytes(cfg, 1, n_seeds), 1)))


MEMORY_FRACTION = 0.5  # of a worker's memory limit that one chunk may use (JAX, the program and Dask need the rest)


def fit_memory(executor, per: int, nbytes: Callable[[int], float], fraction: float = MEMORY_FRACTION,
               reserve: float = 0) -> int:
    """The largest chunk size ``<= per`` whose ``nbytes(size)`` fits ``fraction`` of the executor's
    worker memory limit less ``reserve`` bytes (``per`` unchanged when the executor reports no limit;
    at least 1: whether one fits is the caller's question)."""
    limit = getattr(executor, "memory_limit", None) if executor is not None else None
    if not limit or per <= 1:
        return per
    budget = fraction * limit - reserve
    if nbytes(per) <= budget:
        return per
    return largest(1, per, lambda n: nbytes(n) <= budget)  # nbytes grows with the size


def fit_chunk(executor, cfg, per: int, n_seeds: int, device=None) -> int:
    """``per`` conditions per chunk, checked against memory before anything compiles: refused when a chunk
    run in this process cannot fit the machine, or the accelerator ``device`` it runs on
    (:func:`tabsim.runtime.planning.check_memory`), capped to a worker's memory limit otherwise (:func:`cap_chunk`)."""

    if executor is None or isinstance(executor, LocalExecutor):
        free = device_bytes(device)
        check_memory(cfg, per, n_seeds, None if free is None else free + RUNTIME_BYTES)
    return cap_chunk(executor, cfg, per, n_seeds)


def cap_chunk(executor, cfg, per: int, n_seeds: int) -> int:
    """``per`` conditions (of ``n_seeds`` seeds) per chunk, reduced so that one chunk fits the executor's
    worker memory limit: the chunk's arrays (:func:`tabsim.runtime.planning.estimate_bytes`: samples, policy
    tables, metric tables) plus the runtime (:data:`tabsim.runtime.planning.RUNTIME_BYTES`) within
    :data:`MEMORY_FRACTION` of the limit (Dask pauses a worker at 80% and restarts it at 95%).

    Raises:
      tabsim.config.ConfigError: not even one condition fits a worker.
    """
    limit = getattr(executor, "memory_limit", None) if executor is not None else None
    if not limit:
        return per

    def nbytes(n: int) -> int:
        return estimate_bytes(cfg, n, n_seeds)

    budget = MEMORY_FRACTION * limit - RUNTIME_BYTES
    if nbytes(1) > budget:
        raise ConfigError(f"memory: one condition x {n_seeds} seed(s) needs about {nbytes(1) / 2**30:.3g} GiB, more "
                          f"than a Dask worker can hold ({MEMORY_FRACTION:g} of its memory limit "
                          f"{limit / 2**30:.3g} GiB, less {RUNTIME_BYTES / 2**20:.0f} MiB for the runtime); use "
                          "workers with more memory (fewer workers per machine), fewer seeds or fewer prompts")
    return fit_memory(executor, per, nbytes, reserve=RUNTIME_BYTES)


MAJ_TABLE_BYTES = 256 * 2**20  # exact maj@k tables of one chunk (its evaluations hold several copies)


def _auto_chunk(cfg: Config, n_cond: int, n_seeds: int, device=None) -> int:
    """About 2e8 sampled answers per chunk on the CPU: large enough to amortise dispatch, small enough for
    progress. On an accelerator ``device``: up to :data:`ACCELERATOR_ANSWERS`, as many as half its free
    memory holds (:func:`device_bytes`).

    Exact maj@k evaluates a ``[prompts, count vectors]`` table per condition x seed x arm x eval point
    (6435 count vectors for maj@8 over 8 answers), so with ``train.maj_k`` a chunk also keeps those
    tables under ``MAJ_TABLE_BYTES``; one chunk of a large grid would otherwise need tens of GB.
    """

    per_cond = n_seeds * len(cfg.arms.arms) * cfg.train.steps * cfg.train.batch_size * cfg.train.group_size
    per_cond *= cfg.algo.epochs
    free = device_bytes(device)
    answers = 2e8 if free is None else ACCELERATOR_ANSWERS
    per = max(1, min(n_cond, int(answers // max(per_cond, 1))))
    tables = sum(n_compositions(k, cfg.task.n_answers) for k in cfg.train.maj_k)
    if tables:
        n_evals = cfg.train.steps // (cfg.train.eval_every or cfg.train.steps) + 1
        table_bytes = 4 * n_seeds * len(cfg.arms.arms) * n_evals * cfg.task.n_prompts * tables
        per = max(1, min(per, int(MAJ_TABLE_BYTES // table_bytes)))
    fit = max_conditions(cfg, n_seeds) if free is None else _device_fit(cfg, free, n_seeds)
    return max(1, min(per, fit))  # and what fits in memory


# A CPU chunk's arrays (estimate_bytes) at most: short runs (a few steps) otherwise take chunks of thousands
# of units by their sampled answers, and each unit costs more as its tables fall out of the caches (the
# reference study at 2 steps, 2-core x86-64: 65 us a unit in chunks of 256-512 units, 88 us in chunks of 4096).
CPU_CHUNK_BYTES = 32 << 20


def _auto_units(cfg: Config, n_units: int, device=None) -> int:
    """About 4e6 sampled answers per chunk on the CPU (where small chunks run fastest), and no more than
    :data:`CPU_CHUNK_BYTES` of arrays; on an accelerator
    ``device`` up to :data:`ACCELERATOR_ANSWERS`, as many units as half its free memory holds. A power of
    two, at most the units needed."""
    per = len(cfg.arms.arms) * cfg.train.steps * cfg.train.batch_size * cfg.train.group_size * cfg.algo.epochs
    free = device_bytes(device)
    if free is None:
        u = max(1, int(4e6 // max(per, 1)))
        u = min(u, max(1, CPU_CHUNK_BYTES // max(estimate_bytes(cfg, 1, 1), 1)))  # tables near the caches
        u = min(u, max(1, max_conditions(cfg, 1)))  # what fits in memory
    else:
        u = min(max(1, int(ACCELERATOR_ANSWERS // max(per, 1))), _device_fit(cfg, free, 1))
    u = 1 << (u.bit_length() - 1)
    return min(u, 1 << max(0, (n_units - 1).bit_length()))


def local_executor(chunk_bytes: int | None = None, devices=None) -> LocalExecutor:
    """The default executor: :class:`LocalExecutor` with as many threads as cores, but no more chunks of
    ``chunk_bytes`` (:func:`tabsim.runtime.planning.estimate_bytes`) in flight than the available memory holds.

    Several ``devices`` (:func:`tabsim.runtime.device.pool`): chunks are spread over all of them, one
    thread per accelerator (each chunk is sized for one device's memory), at least one per CPU device."""
    threads = local_threads()
    if devices is not None and len(devices) > 1:
        threads = len(devices) if devices[0].platform != "cpu" else max(threads, len(devices))
    if chunk_bytes:

        threads = max(1, min(threads, (available_bytes() - RUNTIME_BYTES) // max(chunk_bytes, 1)))
    return LocalExecutor(threads=threads, devices=devices)


# ------------------------------------------------------------------------------------------------
# Segments: a long chunk cut in time

# Work units per segment (runs x (sampled tokens + policy-table entries) per step, summed over the
# segment's steps): about 0.35 s on one core of a 2-core x86-64 CPU (the paper preset, 32 runs,
# ran 7e7 units/s), so Ctrl-C stops a run within about a second and a checkpoint is never far behind.
SEGMENT_UNITS = 25_000_000
SEGMENTED_ABOVE = 4 * SEGMENT_UNITS  # a chunk with less work runs in one call, as before


def step_units(cfg: Config, per: int, n_seeds: int) -> tuple[int, int]:
    """``(work units of one training step, of one evaluation point)`` of a chunk of ``per`` conditions x
    ``n_seeds`` seeds: the sampled tokens of an update (x epochs) and the policy-table entries it touches."""
    tr = cfg.train
    runs = per * n_seeds * len(cfg.arms.arms)
    table, _, _ = table_entries(cfg)
    depth = tree_depth(cfg) if cfg.task.env == "tree" else 1
    step = runs * (tr.batch_size * tr.group_size * depth * cfg.algo.epochs + table)
    return step, runs * table * 4


def run_work(cfg: Config, n_cond: int, n_seeds: int) -> float:
    """Units of work of a whole run of ``n_cond`` conditions x ``n_seeds`` seeds (every step and
    evaluation point): what :mod:`tabsim.runtime.device` weighs against an accelerator's fixed cost."""
    steps = cfg.train.steps
    every = cfg.train.eval_every or steps
    step, point = step_units(cfg, n_cond, n_seeds)
    return float(steps * step + (steps // every + 1) * point)


def steps_per_segment(cfg: Config, per: int, n_seeds: int) -> int | None:
    """Training steps per call of a chunk of ``per`` conditions x ``n_seeds`` seeds: ``None`` (the whole run
    in one call) when the chunk's work is under :data:`SEGMENTED_ABOVE`, else about :data:`SEGMENT_UNITS`
    of work per call, in whole evaluation intervals when one interval is smaller than that, and at least
    one step. The numbers are the same bits whatever the cut (:func:`tabsim.sim.engine.make_segments`)."""
    if getattr(cfg.train, "dynamics", "sampled") != "sampled":  # the expected flow is one call
        return None
    steps = cfg.train.steps
    every = cfg.train.eval_every or steps
    step, point = step_units(cfg, per, n_seeds)
    total = steps * step + (steps // every + 1) * point
    if total <= SEGMENTED_ABOVE:
        return None
    ideal = max(1, int(SEGMENT_UNITS // max(step + point / every, 1)))
    if ideal >= every:  # whole intervals per call: a divisor of their number, else a remainder call
        return near_divisor(steps // every, ideal // every) * every
    return near_divisor(every, ideal)


def describe_seconds(seconds: float) -> str:
    """``under a second``, ``about 40 s``, ``about 12 min``, ``about 3.4 h``."""
    if seconds < 1:
        return "under a second"  # not "about 0 s"
    if seconds < 90:
        return f"about {seconds:.0f} s"
    if seconds < 90 * 60:
        return f"about {seconds / 60:.0f} min"
    return f"about {seconds / 3600:.1f} h"


# ------------------------------------------------------------------------------------------------
# The plan: every decision about how a run is computed, made once


@dataclasses.dataclass(frozen=True)
class RunPlan:
    """How a run is computed, decided before anything compiles and passed down unchanged.

    ``per_chunk`` conditions (``ts.run``: each of ``seeds`` seeds) or condition x seed units (a packed
    job: ``seeds`` is 1) make one chunk, ``chunks`` of them cover the ``conditions``; a chunk runs in
    calls of ``segment`` steps (None: one call); ``executor`` runs ``threads`` chunks at a time on
    ``device`` (a ``jax.Device``, picked by ``device_choice`` from ``work``), and the chunks are computed on
    ``devices`` (``device`` alone, or the local devices of its platform that the executor spreads them
    over, :meth:`LocalExecutor.used`); ``chunk_bytes`` is the estimated peak of one chunk's arrays
    (:func:`estimate_bytes`); ``shown``: a progress bar is drawn.
    """

    conditions: int
    seeds: int
    per_chunk: int
    chunks: int
    segment: int | None
    executor: object = dataclasses.field(repr=False)
    threads: int
    device: object = dataclasses.field(repr=False)
    device_choice: str
    chunk_bytes: int
    work: float
    programs: int = 1
    shown: bool = False
    grid: bool = True  # ts.run's conditions x seeds; False: a packed job's condition x seed units
    devices: tuple = dataclasses.field(default=(), repr=False)  # empty: ``device`` alone
    parts: tuple = dataclasses.field(default=(), repr=False)  # ``(ids, Chunk)`` pairs, in order

    @property
    def kind(self) -> str:
        """``run`` (a grid of conditions x seeds) or ``designs`` (a packed job of units), as provenance names it."""
        return "run" if self.grid else "designs"

    @property
    def executor_kind(self) -> str:
        """``local``, ``dask``, or the class name of another executor."""
        if self.executor is None or isinstance(self.executor, LocalExecutor):
            return "local"
        name = type(self.executor).__name__
        return "dask" if name == "DaskExecutor" else name

    def as_dict(self) -> dict:
        """The plan as provenance records it (JSON values only)."""
        dev = self.device
        return {"kind": self.kind, "conditions": self.conditions, "seeds": self.seeds, "per_chunk": self.per_chunk,
                "chunks": self.chunks, "programs": self.programs, "segment_steps": self.segment,
                "executor": self.executor_kind, "threads": self.threads,
                "device": None if dev is None else f"{dev.platform}:{dev.id}", "device_choice": self.device_choice,
                "chunk_bytes": self.chunk_bytes, "work_units": self.work,
                "devices": [device_mod.name(d) for d in self.used_devices]}

    @property
    def used_devices(self) -> tuple:
        """The devices the chunks are computed on (``device`` alone unless the executor spreads them)."""
        return self.devices or (() if self.device is None else (self.device,))

    def lines(self) -> list[str]:
        """The plan in a few lines, as ``--dry-run`` prints it."""
        d = self.as_dict()
        if not self.grid:
            head = (f"{self.chunks} chunk(s) of up to {self.per_chunk} condition x seed units ({self.conditions} units "
                    f"in all, {self.programs} compiled program(s))")
        else:
            head = (f"{self.chunks} chunk(s) of {self.per_chunk} condition(s) x {self.seeds} seed(s) "
                    f"({self.conditions} condition(s) in all)")
        seg = f"in calls of {self.segment} steps" if self.segment else "in one call each"
        return [f"chunks: {head}, {seg}",
                f"executor: {d['executor']}, {self.threads} chunk(s) at a time",
                f"device: {d['device']} (--device {self.device_choice}; {self.work:.3g} units of work)"
                + (f"; chunks spread over {len(self.devices)} devices: {', '.join(d['devices'])}"
                   if len(self.devices) > 1 else ""),
                f"memory: about {_size(self.chunk_bytes)} of arrays per chunk"]


def _size(n: float) -> str:
    return f"{n / 2**30:.3g} GiB" if n >= 2**28 else f"{n / 2**20:.3g} MiB"


def spread(executor, n_chunks: int) -> tuple:
    """The devices a local executor spreads ``n_chunks`` chunks over (empty: the run's one device)."""
    return executor.used(n_chunks) if isinstance(executor, LocalExecutor) else ()


def executor_threads(executor) -> int:
    """Chunks the executor runs at a time (its ``threads``; 1 when it does not say)."""
    return max(1, int(getattr(executor, "threads", 1) or 1))


def plan(work: Work, *, executor=None, device: str | None = None, progress: bool | None = None,
         watched: bool = False) -> RunPlan:
    """The plan of a job's ``work`` (:class:`tabsim.runtime.chunks.Work`, data only), its chunks included.

    The device is picked first (:func:`tabsim.runtime.device.pick`, from the work of every program together),
    then each program's chunk size: a grid's conditions per chunk (:func:`conditions_per_chunk`; the expected
    flow's from its enumeration's tables), a unit job's units per chunk (:func:`units_per_chunk`), refused when
    a chunk cannot fit. ``progress`` is the caller's; ``watched``: someone watches the process (a terminal, a
    notebook). A watched grid of a few long chunks is cut into about 20 calls a chunk
    (:func:`tabsim.runtime.cuts.progress_segment`), so that its bar moves step by step (the same bits).
    """
    choice = device_mod.check_choice(defaults.device(device))
    if work.grid:
        cfg, n_cond, n_seeds = work.configs[0], work.conditions, len(work.seeds)
        total = run_work(cfg, n_cond, n_seeds)
    else:
        n_seeds, counts = 1, [work.units_of(g).size for g in range(len(work.configs))]
        total = float(sum(run_work(c, n, 1) for c, n in zip(work.configs, counts)))
    dev = device_mod.pick(device, total)  # chosen before anything compiles, from the work of every chunk together
    segment = None
    if work.grid:
        if expected(cfg):  # the flow's memory is the enumeration's tables, not the sampled engine's batches
            size = max(1, min(n_cond, CHUNK_BYTES // expected_bytes(make_env(cfg), algo_spec(cfg), schedule(cfg),
                                                                    cfg.arms.arms)))
        else:
            size = conditions_per_chunk(cfg, n_cond, n_seeds, executor, device=dev)
        n_chunks = math.ceil(n_cond / size)
        segment = steps_per_segment(cfg, size, n_seeds)
        chunk_bytes = estimate_bytes(cfg, size, n_seeds)
    else:
        sizes = [units_per_chunk(c, n, executor, work.requested, dev) for c, n in zip(work.configs, counts)]
        size = max(sizes, default=0)
        n_chunks = sum(math.ceil(n / u) for n, u in zip(counts, sizes))
        chunk_bytes = max((estimate_bytes(c, u, 1) for c, u in zip(work.configs, sizes)), default=0)
    if executor is None and n_chunks:
        executor = local_executor(chunk_bytes, device_mod.pool(dev))
    if work.grid:
        steps, ev = cfg.train.steps, cfg.train.eval_every or cfg.train.steps
        n_calls = len(calls(steps, ev, segment)) if segment else 1
        shown = progress if progress is not None else (n_chunks * n_calls > 1 or watched)
        if (segment is None and shown and (progress or watched) and not expected(cfg) and n_chunks < 8
                and isinstance(executor, LocalExecutor)
                and steps * step_units(cfg, size, n_seeds)[0] > 2 * SEGMENT_UNITS):
            segment = progress_segment(steps, ev)  # a bar that would jump from 0 to its end: about 20 calls a chunk
        parts = grid_chunks(work, size, n_chunks, segment)
    else:
        shown = progress if progress is not None else n_chunks > 1
        parts = unit_chunks(work, sizes)
    return RunPlan(conditions=work.conditions, seeds=n_seeds, per_chunk=size, chunks=n_chunks, segment=segment,
                   executor=executor, threads=executor_threads(executor) if executor is not None else 1, device=dev,
                   device_choice=choice, chunk_bytes=chunk_bytes, work=total, programs=len(work.configs),
                   shown=bool(shown), grid=work.grid, devices=spread(executor, n_chunks), parts=tuple(parts))
