"""``tabsim run CONFIG`` and ``tabsim sweep``: train the arms of a config and write its results."""
from __future__ import annotations

import warnings
from pathlib import Path

import click

from tabsim.base import clock
from tabsim.cli.jsonout import emit, json_option, say as _human
from tabsim.cli.options import (MissingExtra, check_options, check_out, chosen, executor_options, fail as _fail,
                                open_executor, open_store, output_options)
from tabsim.cli.phases import Phases
from tabsim.cli.reproduce import refuse_reproduce_config
from tabsim.cli.study import (DEFAULT_SWEEP, announce_estimate, build_config, compile_estimate, estimate_seconds,
                              study_options, usage)
from tabsim.plotting.figure_pool import LocalFigures, open_figures, prestart, warm_up

# bounds of the run-size options, the same as train.seeds and train.steps in a config
SEEDS = click.IntRange(1, 100_000)


STEPS = click.IntRange(1, 10_000_000)


FIGURE_MODULE = "tabsim.plotting.figures"  # the pass@1 figure's functions, preloaded by the figure pool's server
# conditions beyond which the pass@1 figure is one summary (final pass@1 against a swept factor, per arm)
# instead of one panel of curves per condition
CURVE_PANELS = 8


def _configs(cfg) -> list:
    """The configs a run computes: ``cfg``, or the groups' of a sweep of static fields (one program each)."""
    return [g.config for g in cfg.groups] if hasattr(cfg, "groups") else [cfg]


def _describe(cfg, n_cond: int) -> str:
    """``32 conditions x 8 seeds x 4 arms, 300 steps``: the size of the run."""
    if hasattr(cfg, "groups"):
        return f"{len(cfg.groups)} groups of one compiled program each, " + _describe(_configs(cfg)[0], n_cond)
    runs = ("the expected flow" if cfg.train.dynamics == "expected"
            else f"{cfg.train.seeds} seed{'s' * (cfg.train.seeds != 1)}")
    return (f"{n_cond} condition{'s' * (n_cond != 1)} x {runs} x {len(cfg.arms.arms)} arm"
            f"{'s' * (len(cfg.arms.arms) != 1)}, {cfg.train.steps} steps")


def figure_title(cfg, metric: str) -> str:
    """What was run, as the figure's title: ``pass1 per arm: paper, 8 seeds x 200 steps (every 10), varying
    prior_strength, lr``."""
    first = _configs(cfg)[0]
    tr = first.train
    runs = "the expected flow" if tr.dynamics == "expected" else f"{tr.seeds} seed{'s' * (tr.seeds != 1)}"
    every = f" (every {tr.eval_every})" if tr.eval_every and tr.eval_every != tr.steps else ""
    factors = list(cfg.factors) if hasattr(cfg, "groups") else list(first.sweep)
    steps = f"{tr.steps} steps{every}"
    if hasattr(cfg, "groups") and "train.steps" in cfg.static:
        steps = "steps varied"
    what = (f"presets {', '.join(cfg.static['preset'])}" if hasattr(cfg, "groups") and "preset" in cfg.static
            else first.preset or "custom")
    return f"{metric} per arm: {what}, {runs} x {steps}" + (f", varying {', '.join(factors)}" if factors else "")


def _run_and_write(cfg, out: Path, fmt: str, quiet: bool, *, overwrite: bool = False, resume: bool = False,
                   command: str = "tabsim run", desc: str = "tabsim run", executor: tuple = ("local", None, None),
                   figure: bool = True, say: Phases | None = None, as_json: bool = False, track=(),
                   track_dir: Path | None = None, track_timeout: int = 30):
    """Run ``cfg`` (a config, or a plan of groups) into a run store at ``out`` (published whole at the end)
    and print a summary.

    ``executor`` is ``(--executor, --workers, --scheduler)``; ``figure``: draw the pass@1 figure; ``say``:
    the command's phase lines (and its clock); ``track``: the trackers fed (``--track``), ``track_timeout``:
    seconds a tracking server is waited for (``--track-timeout``)."""
    say = say or Phases(quiet)
    first = _configs(cfg)[0]
    # the figure and summary show pass@1, or the first metric recorded when train.metrics leaves it out
    metric = "pass1" if first.train.metrics is None or "pass1" in first.train.metrics else first.train.metrics[0]
    n_cond = sum(len(c.grid()) for c in _configs(cfg))
    announce_estimate(cfg, command, quiet)
    with open_executor(*executor, quiet=quiet) as ex, \
            open_store(out, overwrite=overwrite, resume=resume, key=cfg.digest(), description=command) as store:
        if store.complete:
            _human(f"nothing to resume: {out} already holds this run, complete", as_json)
            if as_json:
                emit({"command": command, "out": str(out), "complete": True, "resumed_nothing": True,
                      "config_digest": cfg.digest()})
            return None
        # lazy: `tabsim run --help` and `tabsim sweep --help` load no JAX
        from tabsim.files.atomic import write_json
        from tabsim.files.provenance import provenance
        from tabsim.runtime.run import run
        from tabsim.runtime.run import TERM_ARMS, ExpectedFlowNote, expected_note
        from tabsim.runtime.trackers import TrackerError, open_trackers

        for note in dict.fromkeys(n for n in map(expected_note, _configs(cfg)) if n is not None):
            if not quiet:
                click.echo(f"note: {note}", err=True)

        # the figure pool loads matplotlib, this process the Parquet writer, while the engine runs
        with (open_figures((FIGURE_MODULE,)) if figure else LocalFigures()) as pool:
            warm = warm_up("pyarrow.parquet", draw=figure and isinstance(pool, LocalFigures),
                           also=(provenance,))  # its git state and versions, asked once training ends
            say(f"{_describe(cfg, n_cond)}: compiling, then training (the bar counts steps)")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ExpectedFlowNote)  # said above, as one line
                # the trackers write on a thread of their own, beside the results and the figure
                tk = open_trackers(list(track), track_dir, run_name=out.name, terms=TERM_ARMS, timeout=track_timeout)
                started = say.seconds()
                res = run(cfg, progress=not quiet, store=store, desc=desc, executor=ex, tracker=tk, announce=say,
                          device=chosen("device"), precision=chosen("precision"))
            trained = res.provenance["wall_seconds"]
            if figure:
                many = n_cond > CURVE_PANELS
                say(f"trained in {trained:.1f} s; writing results and drawing the pass@1 figure"
                    + (f" (final pass@1 of {n_cond} conditions)" if many else ""))
                pool.submit(f"tabsim.plotting.figures:{'plot_final' if many else 'plot_curves'}", res.frame,
                            metric=metric, by=res.factors, title=figure_title(cfg, metric),
                            stem=store.dir / metric, formats=chosen("figure_formats"))
            else:
                say(f"trained in {trained:.1f} s; writing results (no figure)")
            warm.join()
            res.write(store.dir, fmt=fmt)  # while the pool draws
            figs = [Path(p) for p in pool.wait()]
            if figure:
                say("figure written")
            # the record's time is the command's, from the process's start to its last file
            res.provenance.update(wall_seconds=round(say.seconds(), 3), seconds_training=trained,
                                  phase_seconds=_phase_seconds(say, started, trained))
            write_json(store.dir / "provenance.json", res.provenance)
    if tk is not None:  # after the store is published: a tracker's failure leaves the results in place
        try:
            tk.close()
        except TrackerError as err:
            raise click.ClickException(f"{err} (the results are written: {out})") from None
        say(f"trackers written: {', '.join(track)}")
    files = [f"results.{fmt}", *([f"prompts.{fmt}"] if res.prompts is not None else []), "config.json",
             "provenance.json", *(p.name for p in figs)]
    _summarise(res, cfg, out, files, metric, quiet, as_json, say, command)
    return res


def _summarise(res, cfg, out: Path, files: list, metric: str, quiet: bool, as_json: bool, say: Phases,
               command: str) -> None:
    """The final ``metric`` per condition and arm (mean and standard error over seeds), and the files
    written: as lines on the terminal, or one JSON object with ``--json``."""
    final = res.final().groupby(res.factors + ["arm"], observed=True)[metric].agg(["mean", "sem", "count"])
    if not quiet:
        _human(f"final {metric} (mean and standard error over seeds):", as_json)
        _human(final[["mean", "sem"]].unstack("arm").round(4).to_string(), as_json)
        _human(f"wrote {out}/{', '.join(files)} ({say.seconds():.1f} s)", as_json)
    if as_json:
        emit({"command": command, "out": str(out), "complete": True, "config_digest": cfg.digest(),
              "preset": _configs(cfg)[0].preset, "factors": res.factors, "metric": metric, "files": files,
              "wall_seconds": res.provenance.get("wall_seconds"),
              "phase_seconds": res.provenance.get("phase_seconds"),
              "final": [{**dict(zip(res.factors + ["arm"], key if isinstance(key, tuple) else (key,))),
                         "mean": row["mean"], "sem": row["sem"], "n": int(row["count"])}
                        for key, row in final.iterrows()]})


def _phase_seconds(say: Phases, started: float, trained: float) -> dict:
    """The command's seconds per phase to here: its imports and start-up (before training began at
    ``started``), training (``trained``; its compile, bookkeeping and frames apart: :mod:`tabsim.base.clock`)
    and what followed (writing the results, the figure and the record: publish)."""
    raw = {**clock.totals(), "imports": started, "training": trained,
           "publish": max(0.0, say.seconds() - started - trained)}
    return clock.net(raw)


def track_options(fn):
    """Add ``--track``, ``--track-dir``, ``--track-timeout`` and ``--dry-run`` (shared by ``run`` and ``sweep``)."""
    fn = click.option("--track-timeout", "track_timeout", type=click.IntRange(1, 3600), default=30,
                      show_default=True, metavar="SECONDS",
                      help="With --track mlflow: give up a tracking server request after this many seconds without "
                           "an answer (tried twice); the results are kept and the tracker fails in one line.")(fn)
    fn = click.option("--dry-run", "dry_run", is_flag=True,
                      help="Show the groups (one compiled program each), their conditions and the estimate; run "
                           "nothing and write nothing.")(fn)
    fn = click.option("--track-dir", "track_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                      help="Where --track writes: DIR/mlruns (MLflow's file store) and DIR/runs (TensorBoard); "
                           "default $MLFLOW_TRACKING_URI, else ./mlruns, and ./runs.")(fn)
    fn = click.option("--track", multiple=True, type=click.Choice(["mlflow", "tensorboard"]),
                      help="Stream per-step metrics per arm and condition, the config and the partition to an "
                           "experiment tracker (repeatable; needs the track extra).")(fn)
    return fn


def check_track(track, start: bool = True) -> None:
    """Refuse a tracker whose library is not installed: one line naming the extra (exit 2). ``start``: then
    start importing the trackers' libraries (:func:`tabsim.runtime.trackers.preload`), beside the command's
    own start-up."""
    if not track:
        return  # nothing to check: the trackers' module loads pandas
    from tabsim.runtime.trackers import TrackerError, check, preload  # lazy: loads pandas

    for name in track:
        try:
            check(name)
        except TrackerError as err:
            raise MissingExtra(f"--track {name}: {str(err).partition(': ')[2]}") from None
    if start:
        try:
            preload(track)
        except TrackerError as err:  # installed but broken: before anything runs or is written
            raise click.ClickException(f"--track {str(err).removeprefix('tracker ')}") from None


def _check(cfg) -> None:
    """Refuse, before anything is written, a run that cannot fit in memory or an expected flow that cannot
    be computed exactly (every group's)."""
    # lazy: these load the engine (JAX), after the config has been checked without it
    from tabsim.runtime.planning import check_run
    from tabsim.runtime.run import check_dynamics

    for c in _configs(cfg):
        check_run(c)
        check_dynamics(c)


def show_plan(cfg, command: str, as_json: bool, *, device: str | None = None, executor: str = "local") -> None:
    """Print the groups of ``cfg`` (one compiled program each), their conditions, the estimate and each
    group's run plan (chunks, executor, device, memory: :class:`tabsim.runtime.planning.RunPlan`)."""
    # lazy: these load the engine (JAX)
    from tabsim.base.defaults import device_choice
    from tabsim.runtime.planning import describe_seconds
    from tabsim.runtime.run import plan_of

    groups = cfg.groups if hasattr(cfg, "groups") else ()
    rows = [(g.label, g.config) for g in groups] or [("", cfg)]
    n_cond = sum(len(c.grid()) for _, c in rows)
    seconds = estimate_seconds(cfg)
    compiling, programs = compile_estimate(cfg)
    choice = device_choice(device)  # once, for every group's plan
    plans = plan_of(cfg, device=choice).by_program()  # the run's one plan, group by group
    if as_json:  # estimate_seconds: compilation and training; each apart too
        emit({"command": command, "dry_run": True, "conditions": n_cond,
              "estimate_seconds": round(seconds + compiling, 3), "training_seconds": round(seconds, 3),
              "compile_seconds": round(compiling, 3), "programs": programs,
              "groups": [{"values": dict(g.values) if groups else {}, "conditions": len(c.grid()),
                          "sweep": c.sweep, "config_digest": c.digest(), "plan": p.as_dict()}
                         for g, (_, c), p in zip(groups or [None], rows, plans)]})
        return
    click.echo(f"{command} (dry run): {_describe(cfg, n_cond)}")
    for i, ((lab, c), p) in enumerate(zip(rows, plans)):
        traced = "; ".join(f"{k}={','.join(f'{v:g}' for v in lv)}" for k, lv in c.sweep.items()) or "no traced sweep"
        click.echo(f"  group {i + 1}/{len(rows)}{f' ({lab})' if lab else ''}: {len(c.grid())} condition(s) "
                   f"({traced}), one compiled program ({describe_seconds(compile_estimate(c)[0])} to compile), "
                   f"{describe_seconds(estimate_seconds(c))} of training")
        for line in p.lines():
            click.echo(f"    {line}")
    if executor != "local":
        click.echo(f"  (planned for this process: --executor {executor} caps chunks to its workers' memory as it runs)")
    click.echo("nothing run, nothing written")


@click.command("run")
@click.argument("config", type=click.Path(dir_okay=False, path_type=Path))
@study_options
@click.option("--out", "-o", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Output folder (default: results/<config name>).")
@click.option("--format", "fmt", type=click.Choice(["parquet", "csv"]), default="parquet", show_default=True,
              help="Format of the results frame (results.parquet or results.csv).")
@click.option("--seeds", type=SEEDS, default=None, help="Seeds per condition, overriding the file's train.seeds.")
@click.option("--steps", type=STEPS, default=None, help="Training steps, overriding the file's train.steps.")
@click.option("--quiet", "-q", is_flag=True, help="No progress or summary.")
@click.option("--no-figure", "no_figure", is_flag=True, help="Write no figure (results, config and provenance only).")
@json_option
@output_options
@executor_options
@track_options
def run_cmd(config, overrides, preset, vary, arms, sets, multirun, out, fmt, seeds, steps, quiet, no_figure, as_json, overwrite, resume,
            executor, workers, scheduler, track, track_dir, track_timeout, dry_run):
    """Run the study described by CONFIG (a TOML, YAML or a run's config.json file).

    Writes a tidy results frame, the resolved config, provenance and a figure of pass@1 per arm
    (against step, one panel per condition; final pass@1 against a swept factor beyond 8 conditions).
    KEY=VALUE arguments override the file's values (as --set); with --multirun a comma list,
    range(start,stop[,step]) or glob(PATTERN) sweeps the field (as --vary).

    \b
    Example:
      tabsim run experiments/configs/paper_sweep.toml --out results/paper
      tabsim run my_study.toml --multirun algo.lr=0.05,0.1 train.steps=100
    """
    check_options(executor, workers, scheduler)  # usage errors first, before any line
    check_out(out or Path("results") / config.stem, reads=_reads(config, track_dir))
    check_track(track, start=not dry_run)
    if not (no_figure or dry_run):  # the figure server loads matplotlib while this process loads the rest
        prestart((FIGURE_MODULE,))
    say = Phases(quiet)
    # lazy: `tabsim run --help` loads no config schema; the config is refused, if bad, before JAX loads
    from tabsim.config import ConfigError, read_config_file

    if not config.exists() and not config.is_symlink():
        usage(f"config file not found: {config}")
    try:
        data = read_config_file(config)
        refuse_reproduce_config(data, config)
        _note_seed(data, seeds)
        cfg = build_config(data, preset=preset, vary=vary, arms=arms, sets=sets, seeds=seeds, steps=steps,
                           overrides=overrides, multirun=multirun)
        say("tabsim run: loading the engine (JAX)")
        _check(cfg)
    except ConfigError as err:
        _fail(str(err).replace("invalid config:", f"invalid config {config}:", 1))
    if dry_run:
        return show_plan(cfg, "tabsim run", as_json, executor=executor, device=chosen("device"))
    _run_and_write(cfg, out or Path("results") / config.stem, fmt, quiet, overwrite=overwrite, resume=resume,
                   executor=(executor, workers, scheduler), figure=not no_figure, say=say, as_json=as_json,
                   track=track, track_dir=track_dir, track_timeout=track_timeout)


def _reads(config, track_dir) -> list:
    """What ``--out`` must stay apart from (:func:`tabsim.cli.options.check_out`): the config file and the
    trackers' folder."""
    return [("config file it reads", config), ("tracker folder it writes (--track-dir)", track_dir)]


def _note_seed(data: dict, seeds_option) -> None:
    """A file that sets ``train.seed`` (the first seed) but not ``train.seeds`` (how many) runs the preset's
    number of seeds from it: say so, since ``seed = 2`` is easily read as two seeds."""
    train = data.get("train") if isinstance(data, dict) else None
    if (isinstance(train, dict) and "seed" in train and "seeds" not in train and seeds_option is None
            and train.get("dynamics", "sampled") == "sampled"):
        click.echo(f"note: train.seed = {train['seed']} is the first seed, not the number of seeds; the run uses "
                   "the preset's train.seeds from it (set train.seeds, or --seeds, to choose how many)", err=True)


@click.command("sweep")
@click.option("--config", "config", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Optional config file (its values override the preset; a run's config.json works too).")
@study_options
@click.option("--seeds", type=SEEDS, default=None, help="Seeds per condition (default: the preset's or the file's).")
@click.option("--steps", type=STEPS, default=None, help="Training steps (default: the preset's or the file's).")
@click.option("--out", "-o", type=click.Path(file_okay=False, path_type=Path), default=Path("results/sweep"),
              show_default=True, help="Output folder.")
@click.option("--format", "fmt", type=click.Choice(["parquet", "csv"]), default="parquet", show_default=True,
              help="Format of the results frame (results.parquet or results.csv).")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar or summary table.")
@click.option("--no-figure", "no_figure", is_flag=True, help="Write no figure (results, config and provenance only).")
@json_option
@output_options
@executor_options
@track_options
def sweep_cmd(config, overrides, preset, vary, arms, sets, multirun, seeds, steps, out, fmt, quiet, no_figure, as_json, overwrite, resume,
              executor, workers, scheduler, track, track_dir, track_timeout, dry_run):
    """Sweep numeric fields of a preset without writing a config file.

    Without --vary (and no sweep in --config) it sweeps prior_strength=0.2,0.35,0.5,0.65,0.8; without
    --preset (and no preset in --config) it starts from paper.

    KEY=VALUE arguments, Hydra style: one value sets the field, a comma list, range(start,stop[,step]) or
    glob(PATTERN) sweeps it (algo.lr=0.05,0.1 is --vary algo.lr=0.05,0.1).

    \b
    Example (the reference prior sweep):
      tabsim sweep --preset paper --vary prior_strength=0.2,0.35,0.5,0.65,0.8 --out results/prior
      tabsim sweep task.prior_strength='range(0.2,0.9,0.15)' algo.estimator='glob(*grpo*)' train.steps=50
    """
    check_options(executor, workers, scheduler)  # usage errors first, before any line
    check_out(out, reads=_reads(config, track_dir))
    check_track(track, start=not dry_run)
    if not (no_figure or dry_run):  # the figure server loads matplotlib while this process loads the rest
        prestart((FIGURE_MODULE,))
    say = Phases(quiet)
    # lazy: `tabsim sweep --help` loads no config schema; the config is refused, if bad, before JAX loads
    from tabsim.config import ConfigError, read_config_file

    if config is not None and not config.exists() and not config.is_symlink():
        usage(f"--config: config file not found: {config}")
    try:
        data = read_config_file(config) if config else {}
    except ConfigError as err:
        _fail(str(err))
    refuse_reproduce_config(data, config, "--config ")
    _note_seed(data, seeds)
    try:
        cfg = build_config(data, preset=preset, vary=vary, arms=arms, sets=sets, seeds=seeds, steps=steps,
                           default_preset="paper", default_sweep=DEFAULT_SWEEP, overrides=overrides,
                           multirun=True, command="tabsim sweep")
        say("tabsim sweep: loading the engine (JAX)")
        _check(cfg)
    except ConfigError as err:
        _fail(str(err))
    if dry_run:
        return show_plan(cfg, "tabsim sweep", as_json, executor=executor, device=chosen("device"))
    _run_and_write(cfg, out, fmt, quiet, overwrite=overwrite, resume=resume, command="tabsim sweep",
                   desc="tabsim sweep", executor=(executor, workers, scheduler), figure=not no_figure, say=say,
                   as_json=as_json, track=track, track_dir=track_dir, track_timeout=track_timeout)
