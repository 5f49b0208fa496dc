"""Factorial designs on the compiled engine: declare factors, get one tidy frame.

A factor is ``name -> config field -> levels``; any number of factors, any number of levels. The
field decides how a factor is run:

* ``arm``: the engine's arm axis (levels are arm names; every arm of a seed shares its randomness);
* a traced numeric field (``prior_strength``, ``algo.filter``, ``lr``, ``gamma``, ... any field of
  :class:`tabsim.sim.params.Hyper`): a value of the vmapped hyperparameter pytree, never a recompile;
* a static field (``preset``, ``algo.estimator``, ``task.n_prompts``, ``train.steps``, ...): each
  combination of static levels is its own compiled program.

The work is the set of units (program, traced condition, seed). Units are deduplicated across the
designs of one call, packed into chunks of ``U`` units and each chunk is one call of
``jit(vmap(train))`` over its units, so a program compiles once whatever the number of cells,
seeds or chunks. The units are data (:class:`tabsim.runtime.planning.Work`) that the one planner
(:func:`tabsim.runtime.planning.plan`) packs into the runtime's one chunk type, computed by
:func:`tabsim.runtime.programs.run_chunk` through an :class:`tabsim.runtime.executors.Executor`, so a
distributed executor can run them.

    import tabsim as ts
    res = ts.run_factorial({"preset": "paper"}, {
        "reward": {"arm": ["true", "majority"]},
        "filter": {"algo.filter": [1, 0]},
        "prior": {"task.prior_strength": [0.80, 0.35]},
    }, seeds=8)
    res.final()   # columns reward, filter, prior, seed, arm, step, pass1, ...
"""
from __future__ import annotations

import dataclasses
import json
import time
from typing import Sequence

import numpy as np

from tabsim.base import clock, defaults
from tabsim.config import Config
from tabsim.files.provenance import provenance
from tabsim.runtime import device as device_mod
from tabsim.runtime import planning
from tabsim.runtime.cache import apply_default as apply_default_cache
from tabsim.runtime.executors import Executor
from tabsim.runtime.progress import progress_bar
from tabsim.runtime.planning import Chunk
from tabsim.runtime.programs import compiled_train, compiled_units, run_chunk
from tabsim.runtime.run import compute
from tabsim.runtime.store import job_key
from tabsim.studies.chunks import plan_units, run_config
from tabsim.studies.designs import Design, Factor, as_factors, field_kind, make_design, program_config, static_combos
from tabsim.studies.frames import unit_outputs
from tabsim.studies.heartbeat import until_first_chunk
from tabsim.studies.results import DesignResult, design_frame, frames_by_design

def run_designs(designs: Sequence[Design], *, executor: Executor | None = None, progress: bool | None = None,
                units_per_chunk: int | None = None, skip_frozen: bool = True,
                desc: str = "tabsim factorial", store=None,
                device: defaults.DeviceChoice | str | None = None) -> list[DesignResult]:
    """Run several designs as one packed job: shared units run once, each program compiles once.

    Args:
      designs: validated designs (see :func:`make_design`).
      executor: where chunks run (default :class:`tabsim.runtime.executors.LocalExecutor`); ``executor.map(run_chunk,
        chunks)`` must yield the outputs in chunk order.
      progress: show a progress bar over chunks (default: when there is more than one chunk).
      units_per_chunk: units (condition x seed) per compiled call; default about 4e6 sampled answers.
      skip_frozen: evaluate FROZEN from the step-0 metrics instead of simulating it (identical
        evaluation metrics; its diagnostics ``reward_mean``, ``kept_frac``, ``clip_frac`` are NaN).
      desc: progress bar label.
      store: a :class:`tabsim.runtime.store.RunStore` keeping each finished chunk, so an interrupted job resumes
        where it stopped (default: the store of an enclosing ``with RunStore(...)``, if any).
      device: ``"cpu"``, ``"gpu"`` or ``"auto"`` (default the command's ``--device``, else ``$TABSIM_DEVICE``,
        else ``"auto"``; resolved here once, :func:`tabsim.base.defaults.device_choice`), as in
        :func:`tabsim.runtime.run.run`: chosen by the plan from the work of every chunk together.

    Returns:
      One :class:`DesignResult` per design, in order.
    """
    t0 = time.perf_counter()
    apply_default_cache()  # where a run starts, in the caller's thread (its command's --compile-cache)
    designs = list(designs)
    if units_per_chunk is not None and (not isinstance(units_per_chunk, int) or units_per_chunk < 1):
        raise ValueError(f"units_per_chunk must be an int >= 1, got {units_per_chunk!r}")
    work, index = plan_units(designs, skip_frozen=skip_frozen, units_per_chunk=units_per_chunk)
    plan = planning.plan(work, executor=executor, device=defaults.device_choice(device),
                         progress=progress)  # decided once
    dev, show, n_units, planned = plan.device, plan.shown, plan.conditions, plan.parts
    chunks = [c for _, c in planned]
    job = job_key("designs", [(c.config, c.hypers, c.seeds, c.n_real) for c in chunks])
    with clock.timed("compile"):
        for cfg in work.configs:  # built before the bar: a note about the compile options prints above it
            compiled_train(cfg)
    with progress_bar(len(planned), show, desc) as bar, until_first_chunk(bar):
        outs = compute(plan, job, store=store, progress=bar, fn=run_chunk)  # run_chunk: looked up here (tests)
    t_frames = time.perf_counter()
    outputs = unit_outputs(planned, outs)
    wall = round(time.perf_counter() - t0, 3)
    results = []
    for d, per in zip(designs, index):
        frame = design_frame(d, per, outputs, skip_frozen)
        prov = provenance(design=d.name, seeds=list(d.seeds), wall_seconds_job=wall, n_units_job=n_units,
                          n_chunks_job=len(planned), n_programs_job=len(work.configs), **device_mod.describe(dev, plan.device_choice, plan.used_devices),
                          plan=plan.as_dict(),
                          config_hashes=sorted({program_config(d, s).digest() for s in static_combos(d)}))
        conf = {"base": d.base, "factors": [dataclasses.asdict(f) for f in d.factors], "seeds": list(d.seeds),
                "programs": [program_config(d, s).model_dump(mode="json") for s in static_combos(d)]}
        results.append(DesignResult(frame=frame, factors=d.factors, config=_jsonable(conf), provenance=prov))
    clock.add("frames", time.perf_counter() - t_frames)
    return results


def _jsonable(obj):
    return json.loads(json.dumps(obj, default=lambda o: o.item() if isinstance(o, np.generic) else str(o)))


def run_factorial(base: Config | dict | None, factors, *, seeds: int | Sequence[int] | None = None,
                  executor: Executor | None = None, progress: bool | None = None,
                  units_per_chunk: int | None = None, skip_frozen: bool = True,
                  name: str = "factorial", device: str | None = None) -> DesignResult:
    """Run the full factorial of ``factors`` x ``seeds`` on ``base`` and return its tidy frame.

    Every cell x seed x arm is one trajectory; traced factors and seeds are vmapped units of one
    compiled program per static combination (see the module docstring).

    Args:
      base: config mapping (or :class:`Config`), e.g. ``{"preset": "paper"}``.
      factors: ``{name: {field: levels}}`` or a sequence of :class:`Factor`.
      seeds: a count (from ``train.seed``) or a list of seed ids; default ``train.seeds``.
      executor: chunk executor (default local).
      progress: progress bar over chunks.
      units_per_chunk: units per compiled call (default about 4e6 sampled answers).
      skip_frozen: see :func:`run_designs`.
      name: label for progress and provenance.
      device: ``"cpu"``, ``"gpu"`` or ``"auto"``, see :func:`run_designs`.

    Returns:
      :class:`DesignResult`.
    """
    design = make_design(base, factors, seeds=seeds, name=name)
    return run_designs([design], executor=executor, progress=progress, units_per_chunk=units_per_chunk,
                       skip_frozen=skip_frozen, desc=f"tabsim {name}", device=device)[0]


unit_program = compiled_units  # the units' program, in the runtime's one cache

__all__ = ["Factor", "Design", "Chunk", "DesignResult", "field_kind", "as_factors", "make_design", "plan_units",
           "run_chunk", "run_config", "run_designs", "run_factorial", "unit_program", "frames_by_design"]
