"""``run(config) -> Result``: the engine behind a tidy-frame interface.

A run goes through the pipeline every runner shares: its work (every condition of the sweep grid with
every seed; a sweep over static fields is one such grid per group, :mod:`tabsim.runtime.sweeps`) is
planned as data in one plan (:func:`tabsim.runtime.planning.plan`: chunks of equal size per program, one
compilation for each), computed (:func:`compute`: each chunk by
:func:`tabsim.runtime.programs.run_chunk` through an :class:`Executor`, with a progress bar for long runs)
and assembled into one tidy frame here. Compiled programs are cached per static configuration for the
life of the process (:mod:`tabsim.runtime.programs`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import sys
import time
import warnings
from pathlib import Path
from typing import Callable

import jax
import numpy as np
import pandas as pd

from tabsim.base import precision as precision_mod
from tabsim.config import Config, resolve
from tabsim.config.static import algo_spec, expected, make_env, schedule, static_key  # noqa: F401 (re-exported)
from tabsim.sim.expected import EXPECTED_SEED
from tabsim.base import defaults
from tabsim.files.atomic import write_frame, write_json
from tabsim.files.provenance import provenance
from tabsim.sim.params import HYPER_FIELDS, stack_hypers
from tabsim.stats.partition_terms import TERM_ARMS
from tabsim.sim.rng import seed_array
from tabsim.runtime import device as device_mod
from tabsim.runtime import planning, segments
from tabsim.runtime import progress as bars
from tabsim.runtime.cache import apply_default as _apply_default_cache
from tabsim.runtime.planning import Work
from tabsim.runtime.programs import (call_program, check_dynamics, compiled_segments,  # noqa: F401 (re-exported)
                                     compiled_train, compiled_units, run_chunk)
from tabsim.runtime.executors import Executor, LocalExecutor, using
from tabsim.runtime.loading import read_prompts, read_run_folder
from tabsim.runtime.prompts import check_prompt_history, prompt_frame, run_columns, split_prompts
from tabsim.runtime.store import RunStore, current_store, execute, job_key, writing_into
from tabsim.runtime.sweeps import Group, Sweep, split


class ExpectedFlowNote(UserWarning):
    """An expected flow that is known to sit further from the mean of sampled runs than usual."""


# Jensen gaps measured by experiments/expected_flow/run.py (docs/expected.md#the-jensen-gap), beyond the
# paper preset's 0.0033: estimator -> what to say
JENSEN_NOTES = {
    "gpg": "GPG's expected flow sits further from the mean of sampled runs than other estimators' (its n / m "
           "factor is far from linear in the policy): MAJORITY's final pass@1 is 0.011-0.021 higher on seeds "
           "than on the flow at priors 0.35-0.80, against at most 0.0033 for the paper preset "
           "(docs/expected.md, the Jensen gap); check a quantity that matters against seeds",
}


def expected_note(cfg: Config) -> str | None:
    """What to tell the user about an expected-flow run whose Jensen gap is known to be large (None: nothing)."""
    return JENSEN_NOTES.get(cfg.algo.estimator) if expected(cfg) else None


@dataclasses.dataclass
class Result:
    """A run's tidy frame (one row per condition x seed x arm x eval step), config and provenance; with
    ``train.prompt_metrics``, ``prompts``: those metrics per prompt, one row per condition x seed x arm x eval
    step x prompt (:func:`tabsim.runtime.prompts.prompt_frame`; None otherwise)."""

    frame: pd.DataFrame
    config: dict
    provenance: dict
    prompts: pd.DataFrame | None = None

    @property
    def factors(self) -> list[str]:
        return list(self.config.get("sweep", {}))

    def final(self) -> pd.DataFrame:
        """Rows at the last evaluated step."""
        return self.frame[self.frame["step"] == self.frame["step"].max()].reset_index(drop=True)

    def save(self, out_dir: str | Path, fmt: str = "parquet", *, overwrite: bool = False) -> Path:
        """Write ``results.<fmt>``, ``config.json`` and ``provenance.json`` into ``out_dir``, published whole.

        A non-empty ``out_dir`` is refused unless ``overwrite`` (see :class:`tabsim.runtime.store.RunStore`);
        inside an open store's staging folder the files are written there directly.
        """
        out = Path(out_dir)
        if writing_into(out):
            self.write(out, fmt)
            return out
        with RunStore(out, overwrite=overwrite, key=self.provenance.get("config_hash"),
                      description="Result.save") as store:
            self.write(store.dir, fmt)
        return out

    def write(self, folder: str | Path, fmt: str = "parquet") -> Path:
        """Write the three files into ``folder`` (each atomically; no folder-level checks), and ``prompts.<fmt>``
        when the run recorded per-prompt metrics."""
        folder = Path(folder)
        write_frame(folder / f"results.{fmt}", self.frame)
        if self.prompts is not None:
            write_frame(folder / f"prompts.{fmt}", self.prompts)
        write_json(folder / "config.json", self.config)
        write_json(folder / "provenance.json", self.provenance)
        return folder

    @classmethod
    def load(cls, out_dir: str | Path, *, verify: bool = True) -> "Result":
        """The run saved in ``out_dir`` (:func:`tabsim.runtime.loading.read_run_folder`).

        ``verify`` (default) refuses a folder that tabsim did not publish or whose files changed since, as
        ``tabsim verify`` reports them; False reads the files unchecked. Raises
        :class:`tabsim.runtime.loading.ResultFolderError` (a ``ValueError``) naming the file."""
        frame, config, prov = read_run_folder(out_dir, verify=verify)
        return cls(frame=frame, config=config, provenance=prov, prompts=read_prompts(out_dir))


def _tidy(hist: dict, grid: list[dict], seeds: list[int], arms: list[str], steps: list[int]) -> pd.DataFrame:
    C, S, A, E = next(iter(hist.values())).shape
    ci, si, ai, ei = (a.ravel() for a in np.meshgrid(np.arange(C), np.arange(S), np.arange(A), np.arange(E),
                                                        indexing="ij"))
    cols = run_columns(grid, seeds, arms, steps, ci, si, ai, ei)
    for k in sorted(hist):
        cols[k] = np.asarray(hist[k], dtype=np.float64).reshape(-1)
    return pd.DataFrame(cols)


def _column(levels: list, n: int, value) -> pd.Series | list:
    if all(isinstance(x, str) for x in levels):
        return pd.Categorical([value] * n, categories=levels)
    if all(isinstance(x, bool) for x in levels):
        return [bool(value)] * n
    if all(isinstance(x, int) and not isinstance(x, bool) for x in levels):
        return pd.array([value] * n, dtype="int64")
    return pd.array([float(value)] * n, dtype="float64")


def group_frame(sweep: Sweep, group: Group, frame: pd.DataFrame) -> pd.DataFrame:
    """A group's frame with a column per static field in front (strings as ordered categories)."""
    static = pd.DataFrame({f: _column(sweep.static[f], len(frame), v) for f, v in group.values.items()},
                          index=frame.index)
    out = pd.concat([static, frame], axis=1)
    return out[[c for c in sweep.factors if c in out] + [c for c in out if c not in sweep.factors]]


def run(config: Config | Sweep | dict | None = None, *, progress: bool | None = None,
        executor: Executor | None = None, store=None, desc: str = "tabsim run", device: str | None = None,
        precision: str | None = None, tracker=None, tracker_dir=None, run_name: str | None = None,
        announce: Callable[[str], None] | None = None, **overrides) -> Result:
    """Train every arm x seed x sweep condition of ``config`` and return a :class:`Result`.

    A sweep that varies static fields (:mod:`tabsim.runtime.sweeps`) is one design: every group's chunks
    are planned in one plan, computed in one pass with the same seeds, and assembled into one frame with
    a column per static field, in group order.

    Args:
      config: a :class:`Config`, a mapping validated with :func:`tabsim.config.resolve`, or a
        :class:`tabsim.runtime.sweeps.Sweep`.
      progress: show a progress bar counting training steps (default: when stderr is a terminal, in a
        Jupyter kernel, or when there is more than one chunk). A shown bar cuts a run of one or a few
        chunks into segments (:func:`tabsim.runtime.segments.progress_segment`), so that it advances
        step by step; the numbers are the same bits.
      executor: where chunks run (default :class:`LocalExecutor`; :class:`tabsim.runtime.dask.DaskExecutor`
        runs them on a Dask cluster, with the same results). Chunks also fit its workers' memory limit.
      store: a :class:`tabsim.runtime.store.RunStore` that keeps each finished chunk, so an interrupted run
        resumes where it stopped (default: the store of an enclosing ``with RunStore(...)``, if any).
      desc: progress bar label.
      device: ``"cpu"``, ``"gpu"`` or ``"auto"`` (:mod:`tabsim.runtime.device`: a GPU only for a run large
        enough to pay for its fixed cost); default the command's ``--device``, else ``$TABSIM_DEVICE``, else
        ``"auto"``, resolved here once (:func:`tabsim.base.defaults.device_choice`) and passed down to the plan.
        A device that is not there is a :class:`tabsim.runtime.device.DeviceError` naming what is.
      precision: ``"float32"`` or ``"float64"`` (default the user's, :func:`tabsim.base.defaults.precision`:
        a command's ``--precision``, ``$TABSIM_PRECISION``, else float32): float64 traces and runs the run's programs in double precision, for this run only (:mod:`tabsim.base.precision`; its cost: docs/performance.md).
        Every matrix product is at full precision either way.
      tracker: ``"mlflow"``, ``"tensorboard"``, a list of them, or a tracker object
        (:mod:`tabsim.runtime.trackers`): the config, then each group's per-step metrics and the partition,
        are streamed to it once the run is computed (nothing when None).
      tracker_dir: where named trackers write (``mlruns``/``runs`` inside it; default their own defaults).
      run_name: the tracker's name for the run.
      announce: called with one line saying what a sweep over static fields computes, before it compiles.
      **overrides: nested config values, e.g. ``train={"seeds": 4}``.
    """
    t0 = time.perf_counter()
    _apply_default_cache()  # where a run starts, in the caller's thread (its command's --compile-cache)
    precision = precision_mod.chosen(defaults.precision(precision))
    device = defaults.device_choice(device)  # the entry point resolves the option; the runtime below takes it
    sweep = config if isinstance(config, Sweep) else split(config, **overrides)
    groups = sweep.groups if sweep is not None else (Group({}, _resolved(config, overrides)),)
    for note in dict.fromkeys(n for n in (expected_note(g.config) for g in groups) if n is not None):
        warnings.warn(note, ExpectedFlowNote, stacklevel=_caller_level())
    with _tracking(tracker, tracker_dir, run_name) as track:
        if track is not None:
            track.log_config(sweep.data if sweep is not None else groups[0].config.model_dump(mode="json"))
        plan = plan_of(sweep or groups[0].config, executor=executor, device=device, progress=progress, build=True,
                       precision=precision)
        job, jobs = _jobs(sweep, groups, plan, precision)
        if announce is not None and sweep is not None:
            announce(f"{len(groups)} groups ({'; '.join(g.label for g in groups)}): {plan.conditions} condition(s), "
                     f"{plan.chunks} chunk(s), one compiled program each")
        parts = _compute([g.config for g in groups], plan, job, jobs, store, desc)
        frames, prompts = zip(*(_assemble(sweep, g, [out for (_, c), out in zip(plan.parts, parts) if c.program == i])
                                for i, g in enumerate(groups)))
        prompts = [p for p in prompts if p is not None]
        wall = round(time.perf_counter() - t0, 3)  # the run's own time, without the trackers' writing
        for g, frame in zip(groups, frames) if track is not None else ():
            track.log_frame(frame, list(sweep.factors if sweep is not None else g.config.sweep))
    prov = _provenance(sweep, groups, plan, wall, precision)
    if sweep is None:
        return Result(frame=frames[0], config=groups[0].config.model_dump(mode="json"), provenance=prov,
                      prompts=prompts[0] if prompts else None)
    return Result(frame=pd.concat(frames, ignore_index=True), config=sweep.data, provenance=prov,
                  prompts=pd.concat(prompts, ignore_index=True) if prompts else None)


def _provenance(sweep: Sweep | None, groups, plan: planning.RunPlan, wall: float, precision: str) -> dict:
    """A run's provenance: its plan, device and precision; a sweep's, each group's too."""
    cfg = groups[-1].config
    extra = {"dynamics": "expected", "task_seed": cfg.train.seed} if expected(cfg) else {}
    if sweep is not None:
        extra["groups"] = [{"values": g.values, "config_hash": g.config.digest(), "n_conditions": len(g.config.grid()),
                            "n_chunks": sum(c.program == i for _, c in plan.parts)} for i, g in enumerate(groups)]
    return provenance(config_hash=cfg.digest() if sweep is None else sweep.digest(),
                      seeds=[EXPECTED_SEED] if expected(cfg) else run_seeds(cfg), wall_seconds=wall,
                      n_conditions=plan.conditions, n_chunks=plan.chunks,
                      **device_mod.describe(plan.device, plan.device_choice, plan.used_devices),
                      **precision_mod.describe(precision), plan=plan.as_dict(), **extra)


def _tracking(tracker, tracker_dir, run_name: str | None):
    """The trackers of a run as a context (:func:`tabsim.runtime.trackers.session`), or none."""
    if tracker is None:
        return contextlib.nullcontext()
    from tabsim.runtime import trackers  # lazy: a run without a tracker loads no writer-process code

    return trackers.session(tracker, tracker_dir, run_name=run_name, terms=TERM_ARMS)


def _jobs(sweep: Sweep | None, groups, plan: planning.RunPlan, precision: str) -> tuple[str, list[str]]:
    """The run's job key in its store, and each group's (naming its segments' checkpoints). A sweep's chunks
    are one job, named by its groups and their chunk sizes (not by the segments: a run cut for a watched
    bar resumes unwatched); a run of one config keeps the key its chunks always had."""
    tag = () if precision == precision_mod.DEFAULT else (precision,)
    jobs = [job_key("run", g.config.digest(), u, *tag) for g, (u, _, _) in zip(groups, _sizes(plan))]
    return (jobs[0] if sweep is None else job_key("run", sweep.digest(), [u for u, _, _ in _sizes(plan)], *tag)), jobs


def _assemble(sweep: Sweep | None, group: Group, parts: list) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """One group's chunk outputs, in order, as its tidy frame and its per-prompt frame (or None), with a
    column per static field of a sweep in front."""
    cfg = group.config
    grid = cfg.grid()
    hist = {k: np.concatenate([p[k] for p in parts], axis=0)[:len(grid)] for k in parts[0]}
    steps = list(range(0, cfg.train.steps + 1, cfg.train.eval_every or cfg.train.steps))
    per_prompt = split_prompts(hist)  # train.prompt_metrics: the per-prompt history, out of the means'
    seeds = [EXPECTED_SEED] if expected(cfg) else run_seeds(cfg)
    frame = _tidy(hist, grid, seeds, list(cfg.arms.arms), steps)
    prompts = prompt_frame(per_prompt, grid, seeds, list(cfg.arms.arms), steps) if per_prompt else None
    if sweep is None:
        return frame, prompts
    return group_frame(sweep, group, frame), None if prompts is None else group_frame(sweep, group, prompts)


def _sizes(plan: planning.RunPlan) -> tuple:
    """Each program's ``(per_chunk, chunks, segment)``."""
    return plan.sizes or ((plan.per_chunk, plan.chunks, plan.segment),)


def _caller_level() -> int:
    """The ``stacklevel`` of the first caller outside :mod:`tabsim.runtime` (``ts.run`` is
    :func:`run`): a warning names the user's line, not the library's."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith("tabsim.runtime."):
        frame, level = frame.f_back, level + 1
    return level


def _resolved(config, overrides: dict) -> Config:
    """``config`` as a validated :class:`Config`, with ``overrides`` applied."""
    if isinstance(config, Config) and not overrides:
        return config
    return resolve(config.model_dump() if isinstance(config, Config) else config, **overrides)


def run_seeds(cfg: Config) -> list[int]:
    """The seeds a run of ``cfg`` trains (the expected flow has none: ``train.seed`` only draws its task)."""
    return [cfg.train.seed] if expected(cfg) else list(range(cfg.train.seed, cfg.train.seed + cfg.train.seeds))


def plan_of(config: Config | Sweep | dict | None = None, *, executor: Executor | None = None,
            device: defaults.DeviceChoice | str | None = None, progress: bool | None = None, build: bool = False,
            precision: str = precision_mod.DEFAULT, **overrides) -> planning.RunPlan:
    """The :class:`tabsim.runtime.planning.RunPlan` of ``run(config, ...)``: its chunks (every group's, for a
    sweep over static fields), segment length, executor, device, memory and work, decided before anything
    compiles (``build``: the programs are then built and validated, as a run does). ``device`` as
    :func:`run` takes it (resolved here when it is not resolved already)."""
    device = defaults.device_choice(device)
    sweep = config if isinstance(config, Sweep) else split(config, **overrides)
    configs = [g.config for g in sweep.groups] if sweep is not None else [_resolved(config, overrides)]
    for cfg in configs:
        check_prompt_history(cfg, len(cfg.grid()), len(run_seeds(cfg)))  # its frame must fit beside the chunks
        if build:
            check_dynamics(cfg)
    work = Work.of_groups(configs, [[cfg.hyper_values(g) for g in cfg.grid()] for cfg in configs],
                          [run_seeds(cfg) for cfg in configs], precision)
    plan = planning.plan(work, executor=executor, device=device, progress=progress, watched=bars.watched())
    if build:
        for cfg in configs:
            compiled_train(cfg)
    return plan


def compute(plan: planning.RunPlan, job: str, *, store=None, progress=None, fn=None) -> list:
    """The compute stage of every runner: each chunk of ``plan`` computed by ``fn`` (default
    :func:`run_chunk`) on the plan's executor and device, in chunk order; with a store (``store`` or the
    enclosing one) and the ``job`` key, finished chunks are kept and a resumed job reuses them
    (:func:`tabsim.runtime.store.execute`). ``progress``: an object with ``update(n)``. Everything it needs
    was decided by the plan: it neither plans nor picks a device."""
    with using(plan.device):
        return execute(fn or run_chunk, [c for _, c in plan.parts], executor=plan.executor, store=store, job=job,
                       progress=progress)


def _compute(configs: list, plan: planning.RunPlan, job: str, jobs: list, store, desc: str) -> list:
    """:func:`compute` with ``ts.run``'s progress in training steps on one bar: a chunk computed here ticks
    its own program's steps (in segments, as they go), a chunk from the store or another executor its share."""
    steps = [c.train.steps for c in configs]
    per = [n for _, n, _ in _sizes(plan)]
    total = sum(s * n for s, n in zip(steps, per))
    segmented = [bool(seg) for _, _, seg in _sizes(plan)]
    local = isinstance(plan.executor, LocalExecutor)
    with bars.progress_bar(total, plan.shown, f"{desc}: compiling", "step") as bar:
        share = total // plan.chunks if plan.chunks and total % plan.chunks == 0 else total / max(plan.chunks, 1)
        ticks = bars.StepTicks(bar, share, desc)
        fn = run_chunk
        if local and (any(segmented) or len(set(steps)) > 1):  # each chunk ticks its own steps
            where = store if store is not None else current_store()
            hooks = [segments.Hooks(where.dir / "chunks" / "segments" if where is not None else None, jobs[g],
                                    tick=ticks.step, chunks=plan.chunks,
                                    parallel=min(plan.executor.threads, plan.chunks), announce=plan.shown,
                                    desc=desc, say=bars.write,  # above the bar
                                    done=segments.steps_done(segments.calls(steps[g], ev, seg), ev))
                     if seg else None
                     for g, (c, (_, _, seg)) in enumerate(zip(configs, _sizes(plan)))
                     for ev in [c.train.eval_every or c.train.steps]]
            fn = functools.partial(_local_chunk, hooks=hooks, ticks=ticks, steps=steps)
            fn.interruptible = any(segmented)  # computed in a helper thread, so that Ctrl-C is seen at once
        try:
            return compute(plan, job, store=store, progress=ticks, fn=fn)
        finally:
            ticks.close()


def _local_chunk(chunk, *, hooks: list, ticks: bars.StepTicks, steps: list) -> dict:
    """:func:`run_chunk` in this process, ticking ``ticks`` with the chunk's steps (by its segments' hooks,
    or at its end)."""
    ticks.live = True  # from now on the store's count of finished chunks is not the bar's
    if hooks[chunk.program] is not None:
        return run_chunk(chunk, hooks=hooks[chunk.program])
    out = run_chunk(chunk)
    ticks.step(steps[chunk.program])
    return out


def expected_crossover(config: Config | dict | None = None, *, term: str = "d_elicit", bracket=(0.3, 0.6),
                       task_seeds: int = 8, xtol: float = 1e-5, **overrides) -> float:
    """The prior strength where the expected flow's ``term`` changes sign, by Brent's method.

    The flow is deterministic (``train.dynamics = "expected"``), so the root has no sampling noise: each
    evaluation runs the flow at one prior strength (one compiled program for all of them) and reads the
    final pass@1 of the term's two arms (``d_elicit = acc(majority) - acc(random)``). A task draw (the
    answer positions, which the majority's lowest-index tie rule reads) changes the flow a little, so
    the term is averaged over the tasks of ``task_seeds`` seeds (``train.seed``, ``train.seed + 1``, ...),
    as a many-seed Monte Carlo mean averages over its seeds' tasks.

    Args:
      config: a config or mapping (default: the ``paper`` preset); ``train.dynamics`` is set to
        ``"expected"`` and the term's arms are added if missing.
      term: one of :data:`TERM_ARMS`.
      bracket: prior strengths whose terms have opposite signs.
      task_seeds: task draws averaged (each runs the flow).
      xtol: absolute tolerance on the root.

    Raises:
      ValueError: unknown term, or no sign change over ``bracket``.
    """
    if term not in TERM_ARMS:
        raise ValueError(f"term: unknown term {term!r}; allowed: {', '.join(TERM_ARMS)}")
    base = config.model_dump() if isinstance(config, Config) else dict(config or {"preset": "paper"})
    cfg = resolve(base, **overrides)
    arms = list(TERM_ARMS[term])
    cfg = resolve(cfg.model_dump(), train={"dynamics": "expected"}, arms={"arms": arms}, sweep={})
    program = compiled_train(cfg)
    seeds = seed_array(range(cfg.train.seed, cfg.train.seed + task_seeds))

    def f(p: float) -> float:
        hp = stack_hypers([cfg.hyper_values({"prior_strength": float(p)})], shared=HYPER_FIELDS)
        acc = np.asarray(jax.device_get(program(seeds, hp))["pass1"], np.float64)[0, :, :, -1].mean(0)
        return float(acc[0] - acc[1])

    lo, hi = bracket
    f_lo, f_hi = f(lo), f(hi)
    if f_lo * f_hi > 0:
        raise ValueError(f"bracket: {term} has the same sign at prior_strength {lo} ({f_lo:+.4g}) and {hi} "
                         f"({f_hi:+.4g}); give a bracket where it changes sign")
    from scipy.optimize import brentq  # lazy: 0.2 s of imports that training never needs

    return float(brentq(f, lo, hi, xtol=xtol))
