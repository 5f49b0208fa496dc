"""How a job is cut into chunks, on which device and executor, decided once before anything is compiled.

The plan of a job (:class:`RunPlan`: its chunks, segment length, executor, device, memory and work)
is made here once, before anything compiles, by :func:`plan` from the job's work stated as data
(:class:`Work`: ``ts.run``'s grid of conditions x seeds, one group of conditions per compiled program
when a sweep varies static fields, or a factorial job's units: unit ``i`` trains
``hypers[pair[i]]`` with ``seeds[i]`` on program ``program[pair[i]]``), cut into the one chunk type
(:class:`Chunk`, self-contained and picklable, computed by :func:`tabsim.runtime.programs.run_chunk`
here or on a Dask worker), and passed down. How large a chunk may be is :mod:`tabsim.runtime.memory`'s
answer (:func:`conditions_per_chunk`, :func:`units_per_chunk`, re-exported here);
:func:`local_executor` keeps no more chunks in flight than the available memory holds.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from tabsim.base import precision as precision_mod
from tabsim.base.defaults import DeviceChoice
from tabsim.config import Config
from tabsim.config.static import algo_spec, expected, make_env, schedule
from tabsim.sim.expected import CHUNK_BYTES, expected_bytes
from tabsim.runtime import device as device_mod
from tabsim.runtime.cuts import calls, near_divisor, progress_segment
from tabsim.runtime.executors import LocalExecutor, local_threads
from tabsim.runtime.progress import describe_seconds  # noqa: F401 (re-exported: the estimates' wording)
# the memory estimate, re-exported: callers read every sizing decision from this module
from tabsim.runtime.memory import (ACCELERATOR_ANSWERS, CPU_CHUNK_BYTES, F32, MAJ_COPIES,  # noqa: F401
                                   MEMORY_FRACTION, OFFLINE_COPIES, RUNTIME_BYTES, TABLE_COPIES, available_bytes,
                                   cap_chunk, check_memory, check_run, conditions_per_chunk, device_bytes,
                                   estimate_bytes, fit_chunk, fit_memory, fits, largest, max_conditions,
                                   table_entries, tree_depth, units_per_chunk)



# ------------------------------------------------------------------------------------------------
# A job's work as data, and the one chunk type that carries a part of it to an executor

@dataclasses.dataclass(frozen=True)
class Chunk:
    """One call of one compiled program (self-contained and picklable).

    Attributes:
      config: resolved config (JSON); its static structure selects the program.
      hypers: one full :class:`tabsim.sim.params.Hyper` value mapping per condition (``grid``) or per unit.
      seeds: the seed ids: every seed of each condition (``grid``), else one per unit.
      n_real: conditions (``grid``) or units that count; the rest pad the chunk to the program's fixed size.
      index: the chunk's position in its job.
      program: the index of its program (the job's ``configs``; the same as ``config``'s static structure).
      grid: every condition with every seed (``ts.run``'s program, ``[C, S, A, E]`` out), else one seed per
        unit (``[n_real, A, E]`` out).
      shared: (``grid``) the fields equal in every condition of the run, held as scalars by the program.
      segment: (``grid``) steps per call (:mod:`tabsim.runtime.segments`); None: the whole run in one call.
      precision: ``"float64"``: traced and run in double precision (:mod:`tabsim.base.precision`).
    """

    config: dict
    hypers: tuple
    seeds: tuple
    n_real: int
    index: int = 0
    grid: bool = False
    shared: tuple = ()
    segment: int | None = None
    precision: str = precision_mod.DEFAULT
    program: int = 0


@dataclasses.dataclass(frozen=True)
class Work:
    """What a job computes, as data (no callables): the input of `plan`.

    Attributes:
      configs: each program's resolved :class:`Config`, in order.
      hypers: grid: one Hyper value mapping per condition, program by program; units: one per distinct
        (program, values) pair.
      seeds: grid: the seeds every condition trains; units: one seed per unit.
      grid: a ``ts.run`` grid (every condition with every seed) rather than a list of units.
      pair: units: the index into ``hypers`` of each unit.
      program: the index into ``configs`` of each entry of ``hypers``.
      requested: units per chunk asked for (None: the planner's choice; a grid reads
        ``train.chunk_conditions``).
      precision: the precision every chunk runs in.
      program_seeds: grid: each program's seeds where they differ (a sweep of ``train.dynamics``: the
        expected flow has one); empty: every program trains ``seeds``.
    """

    configs: tuple
    hypers: tuple
    seeds: tuple
    grid: bool = False
    pair: tuple = ()
    program: tuple = ()
    requested: int | None = None
    precision: str = precision_mod.DEFAULT
    program_seeds: tuple = ()

    @classmethod
    def of_grid(cls, cfg: Config, values: list[dict], seeds: list[int],
                precision: str = precision_mod.DEFAULT) -> "Work":
        """``ts.run``'s work: every condition's ``values`` with every one of ``seeds`` on ``cfg``'s program."""
        return cls.of_groups([cfg], [values], [seeds], precision)

    @classmethod
    def of_groups(cls, configs: list[Config], values: list[list[dict]], seeds: list[list[int]],
                  precision: str = precision_mod.DEFAULT) -> "Work":
        """A sweep's work: on each of ``configs``' programs, every condition of its ``values`` with every one of
        its ``seeds``."""
        same = all(list(s) == list(seeds[0]) for s in seeds)
        return cls(configs=tuple(configs), hypers=tuple(v for vs in values for v in vs), seeds=tuple(seeds[0]),
                   grid=True, program=tuple(g for g, vs in enumerate(values) for _ in vs), precision=precision,
                   program_seeds=() if same else tuple(tuple(s) for s in seeds))

    def seeds_of(self, g: int) -> tuple:
        """A grid's seeds of program ``g``."""
        return self.program_seeds[g] if self.program_seeds else self.seeds

    @property
    def conditions(self) -> int:
        """Conditions (grid) or condition x seed units."""
        return len(self.hypers) if self.grid else len(self.seeds)

    def units_of(self, g: int) -> np.ndarray:
        """The ids of program ``g``'s units (grid: its conditions), in order."""
        if self.grid:
            return np.flatnonzero(np.asarray(self.program, dtype=np.int64) == g)
        unit_program = np.asarray(self.program, dtype=np.int64)[np.asarray(self.pair, dtype=np.int64)]
        return np.flatnonzero(unit_program == g)


def grid_chunks(work: Work, g: int, per: int, n_chunks: int, segment: int | None, first: int = 0) -> list[tuple]:
    """Program ``g``'s conditions in ``n_chunks`` chunks of ``per`` (the last padded with copies of the last
    condition: chunks of equal size reuse one compilation), as ``(condition ids, Chunk)`` pairs, the chunks
    numbered from ``first``."""
    ids = work.units_of(g).tolist()
    values = [work.hypers[i] for i in ids]
    padded = values + [values[-1]] * (n_chunks * per - len(values))
    shared = tuple(k for k in values[0] if all(v[k] == values[0][k] for v in values))  # equal in every condition
    conf = work.configs[g].model_dump(mode="json")
    return [(ids[i * per:(i + 1) * per],
             Chunk(config=conf, hypers=tuple(padded[i * per:(i + 1) * per]), seeds=work.seeds_of(g),
                   n_real=min(per, len(values) - i * per), index=first + i, grid=True, shared=shared,
                   segment=segment, precision=work.precision, program=g))
            for i in range(n_chunks)]


def unit_chunks(work: Work, sizes: list[int]) -> list[tuple]:
    """A unit job's units packed into chunks of ``sizes[g]`` units for program ``g`` (the last of each
    program padded with copies of its last unit), as ``(unit ids, Chunk)`` pairs."""
    hypers, seeds = np.empty(len(work.hypers), dtype=object), np.empty(len(work.seeds), dtype=object)
    hypers[:], seeds[:] = list(work.hypers), list(work.seeds)
    pair = np.asarray(work.pair, dtype=np.int64)
    chunks = []
    for g, (cfg, u) in enumerate(zip(work.configs, sizes)):
        ids = work.units_of(g)
        conf = cfg.model_dump(mode="json")
        for start in range(0, ids.size, u):
            part = ids[start:start + u]
            padded = np.concatenate([part, np.repeat(part[-1:], u - part.size)])
            chunks.append((part.tolist(), Chunk(config=conf, hypers=tuple(hypers[pair[padded]]),
                                                seeds=tuple(seeds[padded]), n_real=part.size, index=len(chunks),
                                                precision=work.precision, program=g)))
    return chunks


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
    (:func:`estimate_bytes`); ``shown``: a progress bar is drawn. A grid of several programs (a sweep over
    static fields) sizes each program's chunks apart: ``sizes`` holds each one's ``(per_chunk, chunks,
    segment)``, ``per_chunk`` is the largest and ``segment`` theirs when they share one; each chunk carries its own.
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
    sizes: tuple = ()  # a grid of several programs: each one's (per_chunk, chunks, segment), in program order

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
                "devices": [device_mod.name(d) for d in self.used_devices],
                **({"programs_chunks": [{"per_chunk": u, "chunks": n, "segment_steps": seg}
                                        for u, n, seg in self.sizes]}
                   if self.sizes else {})}

    def by_program(self) -> list["RunPlan"]:
        """The plan seen one program at a time (a sweep's groups: each one's conditions, chunks and segment
        length, on the plan's one device and executor); a plan of one program is itself."""
        if not self.sizes:
            return [self]
        views = []
        for g, (u, n, seg) in enumerate(self.sizes):
            parts = tuple((ids, c) for ids, c in self.parts if c.program == g)
            views.append(dataclasses.replace(self, conditions=sum(len(ids) for ids, _ in parts),
                                             seeds=len(parts[0][1].seeds), per_chunk=u, chunks=n, segment=seg,
                                             programs=1, sizes=(), parts=parts))
        return views

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
        elif self.sizes:
            head = (f"{self.chunks} chunk(s) of up to {self.per_chunk} condition(s) x {self.seeds} seed(s) "
                    f"({self.conditions} condition(s) in all, {self.programs} compiled programs)")
        else:
            head = (f"{self.chunks} chunk(s) of {self.per_chunk} condition(s) x {self.seeds} seed(s) "
                    f"({self.conditions} condition(s) in all)")
        seg = (f"in calls of {self.segment} steps" if self.segment
               else "some in calls of fewer steps" if any(s for _, _, s in self.sizes) else "in one call each")
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


def plan(work: Work, *, executor=None, device: DeviceChoice | str | None = None, progress: bool | None = None,
         watched: bool = False) -> RunPlan:
    """The plan of a job's ``work`` (:class:`Work`, data only), its chunks included.

    ``device`` is the run's device option as its entry point resolved it (:func:`tabsim.base.defaults.device_choice`;
    a name is the caller's own argument, ``None`` is ``auto``): it is not looked up here. The device is picked
    first (:func:`tabsim.runtime.device.pick`, from the work of every program together),
    then each program's chunk size: a grid's conditions per chunk (:func:`conditions_per_chunk`; the expected
    flow's from its enumeration's tables), a unit job's units per chunk (:func:`units_per_chunk`), refused when
    a chunk cannot fit. ``progress`` is the caller's; ``watched``: someone watches the process (a terminal, a
    notebook). A watched grid of a few long chunks is cut into about 20 calls a chunk
    (:func:`tabsim.runtime.cuts.progress_segment`), so that its bar moves step by step (the same bits).
    """
    choice = device_mod.resolved(device)
    counts = [work.units_of(g).size for g in range(len(work.configs))]
    seeds = [len(work.seeds_of(g)) if work.grid else 1 for g in range(len(work.configs))]
    total = float(sum(run_work(c, n, k) for c, n, k in zip(work.configs, counts, seeds)))
    dev = device_mod.pick(choice, total)  # chosen before anything compiles, from the work of every chunk together
    if work.grid:
        sizes = [_grid_size(c, n, k, executor, dev) for c, n, k in zip(work.configs, counts, seeds)]
        segments = [steps_per_segment(c, u, k) for c, u, k in zip(work.configs, sizes, seeds)]
        chunk_bytes = max(estimate_bytes(c, u, k) for c, u, k in zip(work.configs, sizes, seeds))
    else:
        sizes = [units_per_chunk(c, n, executor, work.requested, dev) for c, n in zip(work.configs, counts)]
        segments = [None] * len(sizes)
        chunk_bytes = max((estimate_bytes(c, u, 1) for c, u in zip(work.configs, sizes)), default=0)
    n_of = [math.ceil(n / u) for n, u in zip(counts, sizes)]
    n_chunks = sum(n_of)
    if executor is None and n_chunks:
        executor = local_executor(chunk_bytes, device_mod.pool(dev))
    if work.grid:
        n_calls = sum(n * (len(calls(c.train.steps, c.train.eval_every or c.train.steps, seg)) if seg else 1)
                      for c, n, seg in zip(work.configs, n_of, segments))
        shown = progress if progress is not None else (n_calls > 1 or watched)
        for g, (cfg, size) in enumerate(zip(work.configs, sizes)):
            steps, ev = cfg.train.steps, cfg.train.eval_every or cfg.train.steps
            if (segments[g] is None and shown and (progress or watched) and not expected(cfg) and n_chunks < 8
                    and isinstance(executor, LocalExecutor)
                    and steps * step_units(cfg, size, seeds[g])[0] > 2 * SEGMENT_UNITS):
                segments[g] = progress_segment(steps, ev)  # a bar that would jump from 0 to its end: ~20 calls a chunk
        parts = [part for g in range(len(work.configs))
                 for part in grid_chunks(work, g, sizes[g], n_of[g], segments[g], first=sum(n_of[:g]))]
    else:
        shown = progress if progress is not None else n_chunks > 1
        parts = unit_chunks(work, sizes)
    one = len(set(segments)) == 1
    return RunPlan(conditions=work.conditions, seeds=seeds[0] if seeds else 1, per_chunk=max(sizes, default=0),
                   chunks=n_chunks, segment=segments[0] if one else None, executor=executor,
                   threads=executor_threads(executor) if executor is not None else 1, device=dev,
                   device_choice=choice.name, chunk_bytes=chunk_bytes, work=total, programs=len(work.configs),
                   shown=bool(shown), grid=work.grid, devices=spread(executor, n_chunks), parts=tuple(parts),
                   sizes=tuple(zip(sizes, n_of, segments)) if work.grid and len(sizes) > 1 else ())


def _grid_size(cfg: Config, n_cond: int, n_seeds: int, executor, dev) -> int:
    """Conditions per chunk of one program of a grid (each with ``n_seeds`` seeds)."""
    if expected(cfg):  # the flow's memory is the enumeration's tables, not the sampled engine's batches
        return max(1, min(n_cond, CHUNK_BYTES // expected_bytes(make_env(cfg), algo_spec(cfg), schedule(cfg),
                                                                cfg.arms.arms)))
    return conditions_per_chunk(cfg, n_cond, n_seeds, executor, device=dev)
