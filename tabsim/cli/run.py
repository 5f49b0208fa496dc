"""``tabsim run CONFIG`` and ``tabsim sweep``: train the arms of a config and write its results."""
from __future__ import annotations

import math
from pathlib import Path

import click

from tabsim.cli.options import (check_options, check_out, executor_options, fail as _fail, open_executor, open_store,
                                output_options)
from tabsim.plotting import helper as figure_helper
from tabsim.plotting.helper import warm_up
from tabsim.presets import PRESETS

# bounds of the run-size options, the same as train.seeds and train.steps in a config
SEEDS = click.IntRange(1, 100_000)


STEPS = click.IntRange(1, 10_000_000)


def _run_and_write(cfg, out: Path, fmt: str, quiet: bool, *, overwrite: bool = False, resume: bool = False,
                   command: str = "tabsim run", desc: str = "tabsim run", executor: tuple = ("local", None, None)):
    """Run ``cfg`` into a run store at ``out`` (published whole at the end) and print a summary.

    ``executor`` is ``(--executor, --workers, --scheduler)``."""
    with open_executor(*executor, quiet=quiet) as ex, \
            open_store(out, overwrite=overwrite, resume=resume, key=cfg.digest(), description=command) as store:
        if store.complete:
            click.echo(f"nothing to resume: {out} already holds this run, complete")
            return None
        # lazy: `tabsim run --help` and `tabsim sweep --help` load no JAX
        from tabsim.runtime.run import run

        # the figure helper loads matplotlib, this process the Parquet writer, while the engine runs
        with figure_helper.start(("tabsim.plotting.figures",)) as pool:
            warm = warm_up("pyarrow.parquet", draw=isinstance(pool, figure_helper.LocalFigures))
            res = run(cfg, progress=not quiet, store=store, desc=desc, executor=ex)
            pool.submit("tabsim.plotting.figures:plot_curves", res.frame, metric="pass1", by=res.factors,
                        title=f"pass@1 per arm ({cfg.preset or 'custom'})", stem=store.dir / "pass1")
            warm.join()
            res.write(store.dir, fmt=fmt)  # while the helper draws
            figs = [Path(p) for p in pool.wait()]
    if not quiet:
        final = res.final()
        table = final.groupby(res.factors + ["arm"], observed=True)["pass1"].agg(["mean", "sem"]).unstack("arm")
        click.echo(table.round(4).to_string())
        click.echo(f"wrote {out}/results.{fmt}, config.json, provenance.json, {', '.join(p.name for p in figs)} "
                   f"({res.provenance['wall_seconds']} s)")
    return res


@click.command("run")
@click.argument("config", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", "-o", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Output folder (default: results/<config name>).")
@click.option("--format", "fmt", type=click.Choice(["parquet", "csv"]), default="parquet", show_default=True,
              help="Format of the results frame (results.parquet or results.csv).")
@click.option("--seeds", type=SEEDS, default=None, help="Seeds per condition, overriding the file's train.seeds.")
@click.option("--steps", type=STEPS, default=None, help="Training steps, overriding the file's train.steps.")
@click.option("--quiet", "-q", is_flag=True, help="No progress or summary.")
@output_options
@executor_options
def run_cmd(config, out, fmt, seeds, steps, quiet, overwrite, resume, executor, workers, scheduler):
    """Run the study described by CONFIG (a TOML or YAML file).

    Writes a tidy results frame, the resolved config, provenance and a plot of pass@1 against step
    per arm.

    \b
    Example:
      tabsim run experiments/configs/paper_sweep.toml --out results/paper
    """
    # lazy: `tabsim run --help` and `tabsim sweep --help` load no JAX
    from tabsim.config import ConfigError, load_config, read_config_file
    from tabsim.runtime.planning import check_run
    from tabsim.runtime.run import check_dynamics

    check_options(executor, workers, scheduler)
    check_out(out)
    over = {"train": {k: v for k, v in (("seeds", seeds), ("steps", steps)) if v is not None}}
    try:
        _note_seed(read_config_file(config), seeds)
        cfg = load_config(config, **over)
        check_run(cfg)  # a run that cannot fit in memory is refused before anything is written
        check_dynamics(cfg)  # and so is an expected flow that cannot be computed exactly
    except ConfigError as err:
        _fail(str(err))
    _run_and_write(cfg, out or Path("results") / config.stem, fmt, quiet, overwrite=overwrite, resume=resume,
                   executor=(executor, workers, scheduler))


def _parse_levels(spec: str):
    """``FIELD=v1,v2,...`` -> ``(FIELD, [v1, v2, ...])``: finite numbers, none empty or repeated."""
    name, _, levels = spec.partition("=")
    name = name.strip()
    if not name or not levels.strip():
        _fail(f"--vary {spec!r}: expected FIELD=v1,v2,... (e.g. --vary lr=0.05,0.1)")
    out = []
    for x in levels.split(","):
        x = x.strip()
        if not x:
            _fail(f"--vary {spec!r}: an empty level in {name}'s levels (two commas, or a trailing comma)")
        try:
            v = float(x)
        except ValueError:
            _fail(f"--vary {spec!r}: {name}'s level {x!r} is not a number")
        if not math.isfinite(v):
            _fail(f"--vary {spec!r}: {name}'s level {x!r} is not a finite number")
        out.append(v)
    return name, out


def _parse_arms(spec: str) -> list[str]:
    """``--arms a,b,c`` -> ``[a, b, c]``: none empty (as ``--vary`` refuses an empty level)."""
    # lazy: `tabsim sweep --help` loads no JAX (tabsim.arms imports it)
    from tabsim.arms import ARMS

    names = [a.strip() for a in spec.split(",")]
    if not spec.strip():
        _fail(f"--arms '': no arms; give comma-separated arms from: {', '.join(ARMS)}")
    if any(not a for a in names):
        _fail(f"--arms {spec!r}: an empty arm name (two commas, or a trailing comma); give comma-separated arms "
              f"from: {', '.join(ARMS)}")
    return names


def _note_seed(data: dict, seeds_option) -> None:
    """A file that sets ``train.seed`` (the first seed) but not ``train.seeds`` (how many) runs the preset's
    number of seeds from it: say so, since ``seed = 2`` is easily read as two seeds."""
    train = data.get("train") if isinstance(data, dict) else None
    if (isinstance(train, dict) and "seed" in train and "seeds" not in train and seeds_option is None
            and train.get("dynamics", "sampled") == "sampled"):
        click.echo(f"note: train.seed = {train['seed']} is the first seed, not the number of seeds; the run uses "
                   "the preset's train.seeds from it (set train.seeds, or --seeds, to choose how many)", err=True)


def _parse_vary(specs) -> dict:
    """Every ``--vary`` into ``{field: levels}``; a field given twice is refused (name its levels once)."""
    sweep: dict = {}
    for spec in specs:
        name, levels = _parse_levels(spec)
        if name in sweep:
            _fail(f"--vary {name}: given twice; list every level of {name} in one --vary "
                  f"(e.g. --vary {name}={','.join(f'{v:g}' for v in sweep[name] + levels)})")
        sweep[name] = levels
    return sweep


@click.command("sweep")
@click.option("--preset", default=None,
              help="Preset to start from, one of: " + ", ".join(sorted(PRESETS))
                   + " (default: the config file's, else paper).")
@click.option("--config", "config", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Optional config file (its values override the preset).")
@click.option("--vary", multiple=True, metavar="FIELD=v1,v2,...",
              help="A numeric field and its levels; repeat for a full factorial (default: the config "
                   "file's sweep, else prior_strength=0.2,0.35,0.5,0.65,0.8).")
@click.option("--arms", default=None, help="Comma-separated arms (default: the preset's).")
@click.option("--seeds", type=SEEDS, default=None, help="Seeds per condition (default: the preset's or the file's).")
@click.option("--steps", type=STEPS, default=None, help="Training steps (default: the preset's or the file's).")
@click.option("--out", "-o", type=click.Path(file_okay=False, path_type=Path), default=Path("results/sweep"),
              show_default=True, help="Output folder.")
@click.option("--format", "fmt", type=click.Choice(["parquet", "csv"]), default="parquet", show_default=True,
              help="Format of the results frame (results.parquet or results.csv).")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar or summary table.")
@output_options
@executor_options
def sweep_cmd(preset, config, vary, arms, seeds, steps, out, fmt, quiet, overwrite, resume, executor, workers,
              scheduler):
    """Sweep numeric fields of a preset without writing a config file.

    \b
    Example (the reference prior sweep):
      tabsim sweep --preset paper --vary prior_strength=0.2,0.35,0.5,0.65,0.8 --out results/prior
    """
    # lazy: `tabsim run --help` and `tabsim sweep --help` load no JAX
    from tabsim.config import ConfigError, read_config_file, resolve
    from tabsim.runtime.planning import check_run
    from tabsim.runtime.run import check_dynamics

    check_options(executor, workers, scheduler)
    check_out(out)
    try:
        data = read_config_file(config) if config else {}
    except ConfigError as err:
        _fail(str(err))
    _note_seed(data, seeds)
    over: dict = {"train": {}}
    if preset is not None or "preset" not in data:  # an explicit --preset wins; else the file's
        over["preset"] = preset or "paper"
    if vary:
        over["sweep"] = _parse_vary(vary)
    elif not data.get("sweep"):
        over["sweep"] = {"prior_strength": [0.2, 0.35, 0.5, 0.65, 0.8]}
    if seeds is not None:
        over["train"]["seeds"] = seeds
    if steps is not None:
        over["train"]["steps"] = steps
    if arms is not None:
        over["arms"] = {"arms": _parse_arms(arms)}
    try:
        cfg = resolve(data, **over)
        check_run(cfg)  # a run that cannot fit in memory is refused before anything is written
        check_dynamics(cfg)  # and so is an expected flow that cannot be computed exactly
    except ConfigError as err:
        _fail(str(err))
    _run_and_write(cfg, out, fmt, quiet, overwrite=overwrite, resume=resume, command="tabsim sweep",
                   desc="tabsim sweep", executor=(executor, workers, scheduler))
