"""The work of several designs as deduplicated units (program, traced values, seed) packed into
self-contained, picklable chunks of one size per program."""
from __future__ import annotations

import dataclasses
import itertools
from typing import Sequence

import numpy as np

from tabsim.config import Config, resolve
from tabsim.runtime import planning
from tabsim.runtime.run import static_key
from tabsim.studies.designs import TRACED, Design, program_config, static_combos


@dataclasses.dataclass(frozen=True)
class Chunk:
    """One call of a compiled program over ``len(seeds)`` units (self-contained and picklable).

    Attributes:
      config: resolved config (JSON); its static structure selects the program.
      hypers: one full :class:`tabsim.sim.params.Hyper` value mapping per unit.
      seeds: one seed id per unit.
      n_real: units that count; the rest pad the chunk to the program's fixed size.
      index: position of the chunk in its run.
    """

    config: dict
    hypers: tuple
    seeds: tuple
    n_real: int
    index: int = 0


def run_config(cfg: Config, *, skip_frozen: bool = True) -> Config:
    """The config that is compiled for ``cfg``: without the FROZEN arm when ``skip_frozen``.

    FROZEN never updates, so its metrics at every step are the step-0 metrics, which every trained
    arm of the same seed also reports; simulating it would cost a quarter of a four-arm run.
    """
    arms = list(cfg.arms.arms)
    if not skip_frozen or "frozen" not in arms or len(arms) == 1:
        return cfg
    return resolve({**cfg.model_dump(mode="json"), "arms": {**cfg.arms.model_dump(mode="json"),
                                                            "arms": [a for a in arms if a != "frozen"]}})


def _plan_units(designs: Sequence[Design], skip_frozen: bool):
    """``(programs, pairs, unit_pair [n_units], unit_seed, index)`` of the deduplicated units of ``designs``.

    A unit is a (program, traced values, seed); a *pair* ``pairs[(g, hyper items)] = (g, Hyper mapping,
    {seed: unit id}, pair id)`` is one program ``g`` (its position in ``programs``) with one set of traced values.
    """
    programs: dict = {}
    pairs: dict = {}
    unit_pair, unit_seed, index = [], [], []
    for d in designs:
        traced = [f for f in d.factors if f.kind == TRACED]
        per: dict = {}
        for static in static_combos(d):
            cfg = run_config(program_config(d, static), skip_frozen=skip_frozen)
            g = list(programs).index(key) if (key := static_key(cfg)) in programs else len(programs)
            programs.setdefault(key, cfg)
            for tcombo in itertools.product(*(range(len(f.levels)) for f in traced)):
                hv = cfg.hyper_values({f.target: float(f.levels[i]) for f, i in zip(traced, tcombo)})
                hkey = (g, tuple(sorted((k, float(np.float32(v))) for k, v in hv.items())))
                _, _, seen, p = pairs.setdefault(hkey, (g, hv, {}, len(pairs)))
                new = [s for s in d.seeds if s not in seen]
                seen.update(zip(new, range(len(unit_seed), len(unit_seed) + len(new))))
                unit_pair.extend([p] * len(new))
                unit_seed.extend(new)
                per.update({(static, tcombo, s): seen[s] for s in d.seeds})
        index.append(per)
    return programs, list(pairs.values()), np.asarray(unit_pair, dtype=np.int64), unit_seed, index


def plan_chunks(designs: Sequence[Design], *, units_per_chunk: int | None = None, skip_frozen: bool = True,
                executor=None, device=None):
    """Deduplicated units of ``designs`` packed into equal-size chunks, one size per program.

    An ``executor`` whose workers have a memory limit (:class:`tabsim.runtime.dask.DaskExecutor`) caps the
    units per chunk so that one chunk fits it. ``device`` (a ``jax.Device``) is where the chunks run: an
    accelerator's chunks are as large as its memory holds (:func:`tabsim.runtime.planning.units_per_chunk`).

    Returns:
      ``(chunks, unit_index, programs)``: ``chunks`` a list of ``(unit ids, Chunk)``;
      ``unit_index[d][(static, traced, seed)]`` the unit id of each cell x seed of design ``d``;
      ``programs`` static key -> compiled config.
    """
    programs, pairs, unit_pair, unit_seed, index = _plan_units(designs, skip_frozen)
    unit_program = np.asarray([pair[0] for pair in pairs], dtype=np.int64)[unit_pair]
    hypers, seeds = np.empty(len(pairs), dtype=object), np.empty(len(unit_seed), dtype=object)
    hypers[:], seeds[:] = [pair[1] for pair in pairs], unit_seed
    chunks = []
    for g, cfg in enumerate(programs.values()):
        ids = np.flatnonzero(unit_program == g)
        u = planning.units_per_chunk(cfg, ids.size, executor, units_per_chunk, device)  # a unit: condition x seed
        conf = cfg.model_dump(mode="json")
        for start in range(0, ids.size, u):
            part = ids[start:start + u]
            padded = np.concatenate([part, np.repeat(part[-1:], u - part.size)])
            chunks.append((part.tolist(), Chunk(config=conf, hypers=tuple(hypers[unit_pair[padded]]),
                                                seeds=tuple(seeds[padded]), n_real=part.size, index=len(chunks))))
    return chunks, index, programs
