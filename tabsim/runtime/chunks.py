"""A job's work as data, and the one chunk type that carries a part of it to an executor.

Every runner states its work as a :class:`Work` value: the resolved configs of its programs, the traced
hyperparameter mappings and the seeds. ``ts.run`` is a *grid*: one program, every condition trained with
every seed. A factorial job (``ts.run_factorial``, ``tabsim reproduce``) is a list of *units*: unit ``i``
trains ``hypers[pair[i]]`` with ``seeds[i]`` on program ``program[pair[i]]``. The planner
(:func:`tabsim.runtime.planning.plan`) cuts a work into :class:`Chunk` values of one size per program;
:func:`tabsim.runtime.run.run_chunk` computes one. A chunk is self-contained and picklable, so any
executor (threads here, Dask workers elsewhere) can run it.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from tabsim.base import precision as precision_mod
from tabsim.config import Config


@dataclasses.dataclass(frozen=True)
class Chunk:
    """One call of one compiled program (self-contained and picklable).

    Attributes:
      config: resolved config (JSON); its static structure selects the program.
      hypers: one full :class:`tabsim.sim.params.Hyper` value mapping per condition (``grid``) or per unit.
      seeds: the seed ids: every seed of each condition (``grid``), else one per unit.
      n_real: conditions (``grid``) or units that count; the rest pad the chunk to the program's fixed size.
      index: the chunk's position in its job.
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


@dataclasses.dataclass(frozen=True)
class Work:
    """What a job computes, as data (no callables): the input of :func:`tabsim.runtime.planning.plan`.

    Attributes:
      configs: each program's resolved :class:`Config`, in order.
      hypers: grid: one Hyper value mapping per condition; units: one per distinct (program, values) pair.
      seeds: grid: the seeds every condition trains; units: one seed per unit.
      grid: a ``ts.run`` grid (one program) rather than a list of units.
      pair: units: the index into ``hypers`` of each unit.
      program: units: the index into ``configs`` of each entry of ``hypers``.
      requested: units per chunk asked for (None: the planner's choice; a grid reads
        ``train.chunk_conditions``).
      precision: the precision every chunk runs in.
    """

    configs: tuple
    hypers: tuple
    seeds: tuple
    grid: bool = False
    pair: tuple = ()
    program: tuple = ()
    requested: int | None = None
    precision: str = precision_mod.DEFAULT

    @classmethod
    def of_grid(cls, cfg: Config, values: list[dict], seeds: list[int],
                precision: str = precision_mod.DEFAULT) -> "Work":
        """``ts.run``'s work: every condition's ``values`` with every one of ``seeds`` on ``cfg``'s program."""
        return cls(configs=(cfg,), hypers=tuple(values), seeds=tuple(seeds), grid=True, precision=precision)

    @property
    def conditions(self) -> int:
        """Conditions (grid) or condition x seed units."""
        return len(self.hypers) if self.grid else len(self.seeds)

    def units_of(self, g: int) -> np.ndarray:
        """The ids of program ``g``'s units, in order."""
        unit_program = np.asarray(self.program, dtype=np.int64)[np.asarray(self.pair, dtype=np.int64)]
        return np.flatnonzero(unit_program == g)


def grid_chunks(work: Work, per: int, n_chunks: int, segment: int | None) -> list[tuple]:
    """A grid's conditions in ``n_chunks`` chunks of ``per`` (the last padded with copies of the last
    condition: chunks of equal size reuse one compilation), as ``(condition ids, Chunk)`` pairs."""
    values = list(work.hypers)
    padded = values + [values[-1]] * (n_chunks * per - len(values))
    shared = tuple(k for k in values[0] if all(v[k] == values[0][k] for v in values))  # equal in every condition
    conf = work.configs[0].model_dump(mode="json")
    return [(list(range(i * per, min((i + 1) * per, len(values)))),
             Chunk(config=conf, hypers=tuple(padded[i * per:(i + 1) * per]), seeds=work.seeds,
                   n_real=min(per, len(values) - i * per), index=i, grid=True, shared=shared, segment=segment,
                   precision=work.precision))
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
                                                precision=work.precision)))
    return chunks


__all__ = ["Chunk", "Work", "grid_chunks", "unit_chunks"]
