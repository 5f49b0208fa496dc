"""``reproduce``: train the five studies as one packed job, analyse them and write the output folder."""
from __future__ import annotations

import dataclasses
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from tabsim.base import clock
from tabsim.base.host import process_seconds
from tabsim.config import Config, resolve
from tabsim.files.atomic import atomic_write_text, write_frame, write_json
from tabsim.files.provenance import provenance
from tabsim.base import defaults
from tabsim.plotting.figure_pool import LocalFigures, open_figures, warm_up
from tabsim.plotting.formats import figure_formats
from tabsim.runtime import planning
from tabsim.runtime.store import RunStore, job_key
from tabsim.studies import factorial  # run_designs is looked up when called (tests stand in for it)
from tabsim.studies.reference.analysis import sections
from tabsim.studies.reference.design import (
    ADDITIVITY_THRESHOLD,
    CI_LEVEL,
    FIGURE_MODULE,
    GATE_TOLERANCE,
    PAPER,
    SHARE_THRESHOLD,
    TARGET_HALF_WIDTH,
    Settings,
    build_designs,
    settings,
)
from tabsim.studies.reference.figures import FIGURES, figures
from tabsim.studies.reference.paper import compare_every_point, compare_with_paper, difference_reasons
from tabsim.studies.reference.report import render_report, summary_json


def reproduce(out: str | Path, *, scale: str = "default", seeds: int | None = None, steps: int | None = None,
              preset: str = "paper", fmt: str = "parquet", progress: bool = True,
              log: Callable[[str], None] | None = None, n_resamples: int = 2000, overwrite: bool = False,
              resume: bool = False, executor=None, started: float | None = None,
              overrides: dict | None = None, figure: bool = True, device: str | None = None,
              precision: str | None = None, formats=None) -> dict:
    """Run the five studies, write ``out``'s report, figures, data and provenance; return the summary.

    Args:
      out: output folder, published whole when everything is written (a run store: see
        :mod:`tabsim.runtime.store`); a non-empty ``out`` is refused unless ``overwrite`` or ``resume``.
      scale: ``"default"`` (the paper's sizes) or ``"heavy"`` (the reference's heavy settings).
      seeds, steps: override seeds per condition / training steps of every study.
      preset: the preset the studies start from (must train the four partition arms).
      fmt: data format, ``"parquet"`` or ``"csv"``.
      progress: progress bar and stage lines (on stderr).
      log: where stage lines go (default stderr when ``progress``).
      n_resamples: bootstrap resamples of every interval.
      overwrite: replace a non-empty ``out`` (kept until the new run is published).
      resume: continue an interrupted run into ``out`` (finished chunks are reused).
      executor: where the training chunks run (default in this process; e.g.
        :class:`tabsim.runtime.dask.DaskExecutor`); the results are the same.
      started: the ``time.perf_counter()`` reading the stage lines and the recorded wall time count from
        (default: this call; ``tabsim reproduce`` gives its process's start, :func:`tabsim.base.host.started_at`).
      overrides: config values over the preset in the base of every study, as a nested mapping
        (``{"algo": {"lr": 0.05}}``; ``tabsim reproduce --set algo.lr=0.05``); see :func:`settings`. They
        are recorded in ``config.json``, ``summary.json`` and ``provenance.json``, and the report lists
        them among the changes to the paper's settings.
      figure: draw the three figures (``tabsim reproduce --no-figure``: none, no figure pool, and a report
        that points to none).
      device: where the packed job computes, as in :func:`tabsim.studies.factorial.run_designs`.
      precision: ``"float32"`` (the only one the packed job computes in; default the user's,
        :func:`tabsim.base.defaults.precision`).
      formats: the figures' file formats (default the user's, :func:`tabsim.plotting.formats.figure_formats`).

    Returns:
      The ``summary.json`` content.
    """
    t0 = time.perf_counter() if started is None else started
    clock.reset()
    clock.add("imports", time.perf_counter() - t0)  # the command's imports and start-up (0 from Python)
    if fmt not in ("parquet", "csv"):
        raise ValueError(f"fmt: unknown data format {fmt!r}; allowed: csv, parquet")
    if defaults.precision(precision) != "float32":
        raise ValueError(f"precision: {defaults.precision(precision)!r}: the reference study's packed job computes in "
                         "float32 only; allowed: float32")
    formats = figure_formats(formats)  # checked before anything is written
    device = defaults.device_choice(device)  # resolved once here; the packed job's plan takes it as it is
    s = settings(scale=scale, seeds=seeds, steps=steps, preset=preset, n_resamples=n_resamples, overrides=overrides)
    out = Path(out)
    say = log or ((lambda m: print(m, file=sys.stderr, flush=True)) if progress else (lambda m: None))
    designs = build_designs(s)  # validates every study's config before anything is written
    cfg = resolve(s.base(s.steps))
    fields = dataclasses.asdict(s)
    if not s.overrides:  # the key of a run without overrides is the one it had before they existed (--resume)
        del fields["overrides"]
    key = job_key("reproduce", fields, fmt)
    with RunStore(out, overwrite=overwrite, resume=resume, key=key, description="tabsim reproduce") as store:
        if store.complete:
            say(f"nothing to resume: {out} already holds this reproduction, complete")
            summary = json.loads((out / "summary.json").read_text())
        else:
            job = Reproduction(designs=designs, s=s, cfg=cfg, fmt=fmt, progress=progress, say=say, t0=t0,
                               executor=executor, device=device, formats=formats)
            summary = _reproduce_into(store.dir, job, figure=figure)
        t_published = time.perf_counter()  # the report is written: the rest is the store's publish
    if not store.complete:
        say(f"[{time.perf_counter() - t0:5.1f}s] published {out}/")
        clock.add("publish", time.perf_counter() - t_published)
    return summary


def plan(*, scale: str = "default", seeds: int | None = None, steps: int | None = None, preset: str = "paper",
         overrides: dict | None = None, executor=None, device: str | None = None) -> planning.RunPlan:
    """The plan of :func:`reproduce`'s packed job (its chunks, executor, device, memory and work), made as
    :func:`tabsim.studies.factorial.run_designs` makes it; nothing is compiled, run or written."""
    s = settings(scale=scale, seeds=seeds, steps=steps, preset=preset, overrides=overrides)
    designs = list(build_designs(s).values())
    work, _ = factorial.plan_units(designs)
    return planning.plan(work, executor=executor, device=defaults.device_choice(device))


@dataclasses.dataclass(frozen=True)
class Reproduction:
    """What the body of :func:`reproduce` reads: the studies' ``designs``, the settings ``s`` and their base
    config ``cfg``, the data format ``fmt``, whether a bar is shown (``progress``), where stage lines go
    (``say``), the clock's start ``t0``, the ``executor`` and ``device`` the training runs on, and the
    figures' ``formats``."""

    designs: dict
    s: Settings
    cfg: Config
    fmt: str
    progress: bool
    say: Callable[[str], None]
    t0: float
    executor: object = None
    device: defaults.DeviceChoice | None = None
    formats: object = None


def _reproduce_into(dest: Path, job: Reproduction, figure: bool = True) -> dict:
    """The body of :func:`reproduce`: train, analyse and write everything into ``dest`` (a staging folder)."""
    # the figures are drawn by a process pool whose fork server loads matplotlib while the engine trains;
    # this process loads the statistics stack meanwhile (XLA releases the GIL while it computes). Without
    # figures neither the pool nor matplotlib is started.
    with (open_figures((FIGURE_MODULE,)) if figure else LocalFigures()) as pool:
        warm = warm_up("tabsim.stats", draw=figure and isinstance(pool, LocalFigures),
                       also=(provenance,))  # its git state and versions, asked once training ends
        return _train_and_report(dest, job, warm, pool if figure else None)


def _write_data(folder: Path, frames: dict, fmt: str) -> None:
    """Each frame of ``frames`` as ``folder/<name>.<fmt>`` (the studies' data, the tables)."""
    for name, fr in frames.items():
        write_frame(folder / f"{name}.{fmt}", fr)


def _train_and_report(dest: Path, job: Reproduction, warm, pool) -> dict:
    """Train, analyse, write; ``pool`` draws the figures (None: no figure)."""
    designs, s, cfg, fmt, say, t0, formats = job.designs, job.s, job.cfg, job.fmt, job.say, job.t0, job.formats
    say(f"[{time.perf_counter() - t0:5.1f}s] tabsim reproduce: 5 studies, preset {s.preset}, scale {s.scale}")
    with clock.timed("training"):
        results = factorial.run_designs(list(designs.values()), progress=job.progress,
                                        desc="training (compile + run)", executor=job.executor, device=job.device)
    frames = {name: r.frame for name, r in zip(designs, results)}
    t_train = time.perf_counter() - t0
    say(f"[{t_train:5.1f}s] trained {results[0].provenance['n_units_job']} seed x condition units in "
        f"{results[0].provenance['n_chunks_job']} chunks, "
        f"{results[0].provenance['n_programs_job']} compiled program(s)")
    # the data files, then the tables, are written by a thread while this one computes the statistics and
    # waits for the figures (Parquet's encoding releases the GIL; nothing here changes a frame once built)
    with ThreadPoolExecutor(1, thread_name_prefix="tabsim-data") as writer:
        data = writer.submit(_write_data, dest / "data", frames, fmt)
        early = []  # the per-seed partition, the largest table, is written as soon as it is computed

        with clock.timed("statistics"):
            warm.join()
            for name, a in sections(frames, s, cfg):  # a figure's statistics: drawn while the rest are computed
                if name == "prior_sweep":
                    early.append(writer.submit(_write_data, dest / "tables", {"partition_seeds": a["sweep_seeds"]},
                                               "csv"))
                if pool is not None and name != "all":
                    figures(a, dest, pool, which=(name,), formats=formats)
            cmp = compare_with_paper(a, s)
            reasons = difference_reasons(cmp, a, s, cfg)
        t_stats = time.perf_counter() - t0
        say(f"[{t_stats:5.1f}s] statistics done")
        tables = {
            "partition_summary": a["sweep_summary"], "rd_fraction_fieller": a["fieller"],
            "crossover_curve": a["crossover"].curve, "factorial_coefficients": a["fit"].coefficients,
            "factorial_anova": a["fit"].anova.reset_index().rename(columns={"index": "source"}),
            "gate_pilot": a["gate_pilot"], "gate_stability": a["gate_stability"], "families": a["families_summary"],
            "verdicts": a["verdicts"], "power_curve": a["power_curve"], "paper_comparison": cmp,
            "paper_comparison_every_point": compare_every_point(a, s), "power_mde": a["power_mde"],
        }
        if not early:  # written above as soon as the prior sweep was reported, else here
            tables["partition_seeds"] = a["sweep_seeds"]
        written = writer.submit(_write_data, dest / "tables", tables, "csv")
        with clock.timed("figures"):
            # in the order of FIGURES whatever order the statistics reached them in
            figs = sorted(pool.wait(), key=lambda p: FIGURES.index(Path(p).stem)) if pool is not None else []
        if pool is not None:
            say(f"[{time.perf_counter() - t0:5.1f}s] figures written")
        with clock.timed("publish"):
            for job in (data, *early, written):
                job.result()
    wall = time.perf_counter() - t0
    t_written = time.perf_counter()
    prov = provenance(command="tabsim reproduce", wall_seconds=round(wall, 3), seconds_training=round(t_train, 3),
                      seconds_statistics=round(t_stats - t_train, 3), config_hash=cfg.digest(),
                      n_units=results[0].provenance["n_units_job"], n_chunks=results[0].provenance["n_chunks_job"],
                      n_programs=results[0].provenance["n_programs_job"], argv=sys.argv, overrides=s.overrides,
                      process_seconds=process_seconds(), phase_seconds=clock.net(),
                      **{k: results[0].provenance[k] for k in ("device", "device_kind", "device_choice", "devices")})
    write_json(dest / "provenance.json", prov)
    write_json(dest / "config.json", {"settings": dataclasses.asdict(s),
                                     "designs": {n: r.config for n, r in zip(designs, results)},
                                     "constants": {"ci_level": CI_LEVEL, "additivity_threshold": ADDITIVITY_THRESHOLD,
                                                   "share_threshold": SHARE_THRESHOLD, "gate_tolerance": GATE_TOLERANCE,
                                                   "target_half_width": TARGET_HALF_WIDTH, "paper": PAPER}})
    summary = summary_json(a, cmp, s)
    summary["figures"] = [str(Path(p).relative_to(dest)) for p in figs]
    summary["wall_seconds"] = round(wall, 3)
    summary["phase_seconds"] = prov["phase_seconds"]  # as of the report; --json's are the whole command's
    write_json(dest / "summary.json", summary)
    atomic_write_text(dest / "report.md", render_report(a, cmp, reasons, s, cfg, wall, prov,
                                                              figures=pool is not None))  # last: marks completion
    clock.add("publish", time.perf_counter() - t_written)
    say(f"[{time.perf_counter() - t0:5.1f}s] wrote report.md")
    return summary
