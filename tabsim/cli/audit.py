"""``tabsim audit FILE [FILE...] --out DIR``."""
from __future__ import annotations

import shlex
from pathlib import Path

import click

from tabsim.cli.jsonout import emit, json_option
from tabsim.cli.options import check_options, check_out, chosen, executor_options, open_executor, output_options
from tabsim.cli.phases import Phases
from tabsim.base.defaults import cache_home


@click.command("audit")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", "-o", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Output folder, published whole when every output is written (a non-empty one is refused "
                   "without --overwrite).")
@click.option("--seed-sd", type=float, default=0.0, show_default=True,
              help="Assumed seed sd (points) of single-run trained arms; 0 leaves seed spread out.")
@click.option("--ci", type=float, default=0.95, show_default=True, help="Two-sided interval level.")
@click.option("--threshold", type=float, default=0.60, show_default=True,
              help="Share threshold of the reference rule (its elicitation share includes d_null).")
@click.option("--dominance", type=float, default=0.5, show_default=True,
              help="Share of d_total above which one of d_null, d_elicit, d_rd dominates (three-term rule).")
@click.option("--rule", type=click.Choice(["terms", "reference"]), default="terms", show_default=True,
              help="Rule of the verdict column: terms (names the dominant term) or reference (the reference "
                   "study's rule); both are always written.")
@click.option("--family", "families", multiple=True, metavar="NAME",
              help="Simulator family for the missing-arm calibration (repeatable): paper, reuse (2 clipped epochs), "
                   "reuse8 (8 clipped epochs, the Spurious Rewards recipe); default: paper.")
@click.option("--no-calibration", is_flag=True, help="Bound missing arms logically only (no simulation).")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Cache of the calibration sweep (default $TABSIM_CACHE or ~/.cache/tabsim).")
@click.option("--no-cache", is_flag=True, help="Do not read or write the on-disk calibration cache.")
@click.option("--quiet", "-q", is_flag=True, help="No progress lines or summary.")
@json_option
@output_options
@executor_options
def command(files, out, seed_sd, ci, threshold, dominance, rule, families, no_calibration, cache_dir, no_cache, quiet,
            as_json, overwrite, resume, executor, workers, scheduler):
    """Audit published RLVR results: partition, intervals, bounds for missing arms, verdict.

    FILES are YAML or CSV tables of published accuracies (format: docs/audit.md); a folder
    stands for its .yaml/.yml/.csv files. Writes
    DIR/audit.csv, terms.csv, entries.csv, calibration.csv, report.md, terms.png (.pdf too with --pdf) and
    provenance.json. Nothing is written unless every file is valid.

    \b
    Example (the shipped tables):
      tabsim audit experiments/audits --out results/audit
    """
    _check_numbers(ci, seed_sd, threshold, dominance)  # usage errors first, before any line
    check_options(executor, workers, scheduler)
    reads = [*(("table (or folder of tables) it reads", f) for f in files),
             ("calibration cache it reads and writes", None if no_cache else (cache_dir or cache_home()))]
    check_out(out, reads=reads)
    say = Phases(quiet)
    say("tabsim audit: loading the engine (JAX, pandas)")
    # lazy: `tabsim audit --help` loads none of the audit's stack; the engine first, then the audit's
    # statistics and figure, each announced (together they take seconds)
    import tabsim.runtime.run  # noqa: F401

    say("loading the audit (scipy, matplotlib)")
    from tabsim.audit.calibrate import default_cache_dir  # lazy: as above
    from tabsim.audit.core import audit
    from tabsim.audit.report import write_outputs
    from tabsim.cli.options import open_store
    from tabsim.runtime.manifest import file_sha256
    from tabsim.runtime.store import job_key

    grid = _grid(families)
    entries = _load(files)
    say(f"read {len(entries)} entr{'y' if len(entries) == 1 else 'ies'} from {len(files)} input(s)")
    cache = None if no_cache else (cache_dir or default_cache_dir())
    cmd = _command_line(files, out, seed_sd=seed_sd, ci=ci, threshold=threshold, dominance=dominance, rule=rule,
                        families=families, no_calibration=no_calibration)
    inputs = list(dict.fromkeys(e.file for e in entries))
    key = job_key("audit", [file_sha256(f) for f in inputs], seed_sd, ci, threshold, dominance, rule, list(families),
                  no_calibration)
    with open_executor(executor, workers, scheduler, quiet=quiet) as ex, \
            open_store(out, overwrite=overwrite, resume=resume, key=key, description="tabsim audit",
                       reads=reads) as store:
        if store.complete:
            click.echo(f"nothing to resume: {out} already holds this audit, complete", err=as_json)
            if as_json:
                emit({"command": "tabsim audit", "out": str(out), "complete": True, "resumed_nothing": True})
            return
        res = audit(entries, ci=ci, seed_sd=seed_sd, threshold=threshold, calibrate=not no_calibration, grid=grid,
                    cache_dir=cache, progress=not quiet, executor=ex, rule=rule, dominance=dominance, log=say,
                    device=chosen("device"), precision=chosen("precision"))
        say("writing the tables and report.md")
        # provenance's wall time is the command's, from the process's start to its last file
        write_outputs(res, store.dir, files=inputs, command=cmd, log=say, started=say.t0,
                      formats=chosen("figure_formats"))
    _summary(res, out, inputs, say, quiet=quiet, as_json=as_json)


def _check_numbers(ci, seed_sd, threshold, dominance) -> None:
    """Every out-of-range number option, in one usage error."""
    problems = []
    if not (0.0 < ci < 1.0):
        problems.append(f"--ci: {ci!r} must be in (0, 1)")
    if not (seed_sd >= 0.0) or seed_sd != seed_sd or seed_sd == float("inf"):
        problems.append(f"--seed-sd: {seed_sd!r} must be a finite number >= 0 (points)")
    if not (0.0 < threshold < 1.0):
        problems.append(f"--threshold: {threshold!r} must be a share in (0, 1)")
    if not (0.0 < dominance < 1.0):
        problems.append(f"--dominance: {dominance!r} must be a share in (0, 1)")
    if problems:
        raise click.UsageError("; ".join(problems))


def _grid(families):
    """The calibration grid of the ``--family`` options (default: the grid's own families)."""
    from tabsim.audit import calibrate as cal  # lazy: loaded by the command after its announcement

    bad = [f for f in families if f not in cal.FAMILY_CONFIGS]
    if bad:
        raise click.UsageError(f"--family: unknown {bad}; allowed: {', '.join(cal.FAMILY_CONFIGS)}")
    if families:
        return cal.CalibrationGrid(families=tuple((f, cal.FAMILY_LR[f]) for f in dict.fromkeys(families)))
    return cal.CalibrationGrid()


def _load(files) -> list:
    """The entries of ``files``; every problem of every file in one error."""
    from tabsim.audit.schema import AuditInputError, load_entries  # lazy: as in _grid

    try:
        return load_entries(list(files))
    except AuditInputError as err:
        raise click.ClickException(str(err))


def _command_line(files, out, *, seed_sd, ci, threshold, dominance, rule, families, no_calibration) -> str:
    """The command as it could be typed again, options at their defaults left out (for provenance)."""
    opts = [f"--seed-sd {seed_sd:g}" if seed_sd else "", f"--ci {ci:g}" if ci != 0.95 else "",
            f"--threshold {threshold:g}" if threshold != 0.60 else "",
            f"--dominance {dominance:g}" if dominance != 0.5 else "", f"--rule {rule}" if rule != "terms" else "", *(f"--family {f}" for f in families),
            "--no-calibration" if no_calibration else ""]
    return " ".join(["tabsim audit", *(shlex.quote(str(f)) for f in files), "--out", shlex.quote(str(out)),
                     *(o for o in opts if o)])


def _summary(res, out, inputs, say, *, quiet: bool, as_json: bool) -> None:
    """The verdicts on the terminal (or as JSON): what each rests on and whether it is fragile."""
    # what a verdict rests on (a simulator bound: model-based) and whether a point of seed spread changes it
    show = res.audit[["source", "model", "benchmark", "train_set", "verdict", "reference_verdict", "verdict_basis",
                      "verdict_model_based", "fragile"]]
    written = ["audit.csv", "terms.csv", "entries.csv", "calibration.csv", "report.md", "terms.png", "provenance.json"]
    if not quiet:
        click.echo(show.rename(columns={"verdict_model_based": "model_based"}).to_string(index=False), err=as_json)
        click.echo(f"wrote {out}/{', '.join(written)} ({say.seconds():.1f} s)", err=as_json)
    if as_json:
        emit({"command": "tabsim audit", "out": str(out), "complete": True, "inputs": [str(f) for f in inputs],
              "files": written, "wall_seconds": round(say.seconds(), 3), "entries": show.to_dict(orient="records")})
