"""``tabsim reproduce``: the command's options, loaded without the study's imports (JAX, pandas,
statsmodels, matplotlib come with :func:`tabsim.studies.reference.reproduce` when it runs)."""
from __future__ import annotations

import json
from pathlib import Path

import click

from tabsim.cli.jsonout import emit, json_option
from tabsim.cli.options import (check_options, check_out, chosen, executor_options, guarded, open_executor,
                                output_options)
from tabsim.base import clock
from tabsim.cli.phases import Phases
from tabsim.cli.study import complete_preset, parse_set, set_option, usage
from tabsim.config.presets import PRESETS
from tabsim.plotting.figure_pool import prestart
from tabsim.studies.reference.design import FIGURE_MODULE, SCALES, settings


@click.option("--out", "-o", type=click.Path(file_okay=False, path_type=Path), default=Path("results/reproduce"),
              show_default=True, help="Output folder.")
@click.option("--seeds", type=click.IntRange(min=2, max=100_000), default=None,
              help="Seeds per condition for every study (default 8; heavy: 50 sweep / 100 factorial).")
@click.option("--steps", type=click.IntRange(min=1, max=10_000_000), default=None,
              help="Training steps of every study (default: the preset's; heavy: 400 sweep / 500 factorial).")
@click.option("--preset", default="paper", show_default=True, shell_complete=complete_preset,
              help="Preset the studies start from (it must train the four partition arms), one of: "
                   + ", ".join(sorted(PRESETS)) + ".")
@click.option("--scale", type=click.Choice(SCALES), default="default", show_default=True,
              help="heavy = the reference's heavy settings (N=80, K=10, G=10, batch 20, more seeds and steps).")
@click.option("--format", "fmt", type=click.Choice(["parquet", "csv"]), default="parquet", show_default=True,
              help="Data format of the run frames.")
@set_option("applied over the preset and --scale in the base of every study; the prior strength, the seeds "
            "and the steps are the studies' own", example="--set algo.lr=0.05 --set train.group_size=16")
@click.option("--quiet", "-q", is_flag=True, help="No progress display.")
@click.option("--no-figure", "no_figure", is_flag=True,
              help="Write no figure (report, summary, tables, data, config and provenance only).")
@click.option("--dry-run", "dry_run", is_flag=True,
              help="Show the plan of the packed job (chunks, executor, device, memory); run nothing and write nothing.")
@json_option
@output_options
@executor_options
def _reproduce_cmd(out, seeds, steps, preset, scale, fmt, sets, quiet, no_figure, as_json, overwrite, resume, executor,
                   workers, scheduler, dry_run):
    """Rebuild the reference study (arXiv 2606.05932) and compare with its headline numbers.

    Runs the prior sweep, the 2x2x2 factorial, the pilot gate, the two simulated families and a
    power study on the `paper` preset, and writes OUT/report.md, summary.json, figures, tables,
    data and provenance.

    \b
    Example:
      tabsim reproduce --out results/reproduce
      tabsim reproduce --scale heavy --out results/reproduce_heavy
      tabsim reproduce --set algo.lr=0.05 --out results/reproduce_lr005
    """
    say = Phases(quiet)  # the report's time is the command's, imports and start-up counted
    if preset not in PRESETS:
        raise click.BadParameter(f"unknown preset {preset!r}; allowed: {', '.join(sorted(PRESETS))}",
                                 param_hint="--preset")
    if not dry_run:
        check_out(out)  # before anything loads: an --out that overlaps what it reads (the compilation cache)

    if not (no_figure or dry_run):  # the figure server loads matplotlib while this process loads the rest
        prestart((FIGURE_MODULE,))
    say("tabsim reproduce: loading the engine and the statistics (JAX, pandas, SciPy)")
    # lazy: `tabsim reproduce --help` loads only the light design module
    from tabsim.studies.reference import reproduce
    from tabsim.studies.reference.design import check_overrides

    check_options(executor, workers, scheduler)
    overrides = parse_set(sets)  # a malformed or unknown key is a usage error naming the allowed ones
    try:
        check_overrides(overrides)
    except ValueError as err:
        usage(f"--set {err}")
    if dry_run:
        return _show_plan(scale=scale, seeds=seeds, steps=steps, preset=preset, overrides=overrides,
                          executor=executor, as_json=as_json, device=chosen("device"))
    try:
        with guarded(out), open_executor(executor, workers, scheduler, quiet=quiet) as ex:
            summary = reproduce(out, scale=scale, seeds=seeds, steps=steps, preset=preset, fmt=fmt,
                                progress=not quiet, overwrite=overwrite, resume=resume, executor=ex,
                                started=say.t0, overrides=overrides, figure=not no_figure, device=chosen("device"),
                                precision=chosen("precision"), formats=chosen("figure_formats"))
    except ValueError as err:
        raise click.ClickException(str(err)) from None
    if not quiet:
        # the command's time to here (the report records it as of its writing, a moment earlier)
        click.echo(f"report: {out / 'report.md'} ({say.seconds():.1f} s)", err=as_json)
    if as_json:
        emit({"command": "tabsim reproduce", "out": str(out), "complete": True, "report": str(out / "report.md"),
              "wall_seconds": round(say.seconds(), 3), "phase_seconds": clock.net(), "summary": summary})


def _show_plan(*, executor: str, as_json: bool, **study) -> None:
    """Print the plan of the packed job of ``tabsim reproduce`` (:func:`tabsim.studies.reference.run.plan`)."""
    from tabsim.studies.reference.run import plan  # lazy: as above

    try:
        job = plan(**study)
    except ValueError as err:
        raise click.ClickException(str(err)) from None
    if as_json:
        emit({"command": "tabsim reproduce", "dry_run": True, "plan": job.as_dict()})
        return
    click.echo(f"tabsim reproduce (dry run): 5 studies, preset {study['preset']}, scale {study['scale']}")
    for line in job.lines():
        click.echo(f"  {line}")
    if executor != "local":
        click.echo(f"  (planned for this process: --executor {executor} caps chunks to its workers' memory as it runs)")
    click.echo("nothing run, nothing written")


command = click.command("reproduce", context_settings={"help_option_names": ["-h", "--help"]})(_reproduce_cmd)


def _flat(d: dict, prefix: str = "") -> list[str]:
    out = []
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out += _flat(v, f"{prefix}{k}.")
        else:
            out.append(f"{prefix}{k}={v if isinstance(v, str) else json.dumps(v).replace(' ', '')}")
    return out


def refuse_reproduce_config(data, path, where: str = "") -> None:
    """Refuse, in one line that says how to rerun it, the ``config.json`` a ``tabsim reproduce`` run wrote
    (its ``settings``, ``designs`` and ``constants``: five studies, not one run's config)."""
    if not (isinstance(data, dict) and isinstance(data.get("settings"), dict) and "designs" in data):
        return
    s = data["settings"]
    cmd = ["tabsim reproduce"]
    if isinstance(s.get("preset"), str) and s["preset"] != "paper":
        cmd.append(f"--preset {s['preset']}")
    if s.get("scale") in SCALES and s["scale"] != "default":
        cmd.append(f"--scale {s['scale']}")
    try:  # the sizes the scale gives by itself need no option
        plain = settings(scale=s.get("scale", "default"), preset=s.get("preset", "paper"))
        cmd += [f"--{k} {s[k]}" for k in ("seeds", "steps") if s.get(k) is not None and s.get(k) != getattr(plain, k)]
    except (ValueError, TypeError):
        pass
    cmd += [f"--set {kv}" for kv in _flat(s.get("overrides") or {})]
    usage(f"{where}{path} is the config.json of a tabsim reproduce run (the settings of its five studies), not a run "
          f"config; rerun it with: {' '.join(cmd)} --out DIR")
