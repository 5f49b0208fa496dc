"""Pre-registration you can verify: a plan file, a lock, a confirmatory run, a report against the plan.

    tabsim prereg validate preregistration/clipping_null/plan.yaml
    tabsim prereg lock     preregistration/clipping_null/plan.yaml     # before any result exists
    tabsim prereg run      preregistration/clipping_null/plan.yaml --out preregistration/clipping_null/results
    tabsim prereg report   preregistration/clipping_null/results

* :mod:`tabsim.prereg.schema` -- the YAML format and its validation.
* :mod:`tabsim.prereg.locking` -- normalised hashing, locks, amendments, verification.
* :mod:`tabsim.prereg.runner` -- running the design with the run-folder status protocol.
* :mod:`tabsim.prereg.analysis` -- estimands, intervals, decision rules, Holm, verdicts.
* :mod:`tabsim.prereg.report` -- ``report.md`` / ``report.json``.

See ``docs/prereg.md``.
"""
from __future__ import annotations

from pathlib import Path

import click

from tabsim._cli_common import output_options
from tabsim.executors import executor_options

from tabsim.prereg.locking import amend, changed_fields, lock, plan_hash, read_lock, verify
from tabsim.prereg.schema import Plan, PreregError, load_plan, validate_document

__all__ = ["Plan", "PreregError", "load_plan", "validate_document", "lock", "amend", "verify", "read_lock",
           "plan_hash", "changed_fields", "run_study", "write_report", "command"]


def run_study(*args, **kwargs):
    """See :func:`tabsim.prereg.runner.run_study`."""
    from tabsim.prereg.runner import run_study as _run

    return _run(*args, **kwargs)


def write_report(out):
    """See :func:`tabsim.prereg.report.write_report`."""
    from tabsim.prereg.report import write_report as _write

    return _write(out)


def _fail(err: Exception):
    raise click.ClickException(str(err))


_FILE = click.Path(dir_okay=False, path_type=Path)


@click.group("prereg")
def command():
    """Pre-registration: validate, lock, amend, run confirmatory, report against the plan."""


@command.command("validate")
@click.argument("file", type=_FILE)
def validate_cmd(file):
    """Check FILE against the pre-registration schema; list every problem, naming its field."""
    from tabsim.prereg import locking as lk

    try:
        plan, doc = load_plan(file)
    except PreregError as err:
        _fail(err)
    n_conf = len(plan.confirmatory)
    click.echo(f"{file}: valid ({n_conf} confirmatory and {len(plan.hypotheses) - n_conf} exploratory "
               f"hypotheses, {len(plan.exploratory)} exploratory analyses); sha256 {plan_hash(doc)}")
    if lk.lock_path(file).exists():
        try:
            rec = verify(file)
            n = len(rec["amendments"])
            click.echo(f"lock: matches (locked {rec['lock']['locked_at_utc']}"
                       f"{f', {n} amendment(s)' if n else ''})")
        except PreregError as err:
            click.echo(f"lock: DOES NOT MATCH -- {err}")
    else:
        click.echo("lock: none (run `tabsim prereg lock` before the study)")


@command.command("lock")
@click.argument("file", type=_FILE)
def lock_cmd(file):
    """Write FILE.lock.json (normalised SHA-256, UTC time, git commit, version); never overwrites."""
    from tabsim.prereg.locking import lock_path

    try:
        rec = lock(file)
    except PreregError as err:
        _fail(err)
    click.echo(f"locked {file}: sha256 {rec['sha256']} at {rec['locked_at_utc']} "
               f"(git {rec['git_commit'] or 'n/a'}) -> {lock_path(file)}")


@command.command("amend")
@click.argument("file", type=_FILE)
@click.option("--reason", required=True, help="Why the locked plan changed (appears in every report).")
def amend_cmd(file, reason):
    """Record a change to a locked FILE in FILE.amendments.json (reported as a deviation)."""
    try:
        rec = amend(file, reason)
    except PreregError as err:
        _fail(err)
    click.echo(f"amendment {rec['n']} of {file}: {rec['old_sha256'][:12]} -> {rec['new_sha256'][:12]}; changed "
               f"{', '.join(rec['changed_fields'])}")


@command.command("run")
@click.argument("file", type=_FILE)
@click.option("--out", "-o", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Output folder for data, results.json, status.json and the report.")
@click.option("--exploratory", is_flag=True,
              help="Run without a lock; everything is labelled exploratory (default: confirmatory).")
@click.option("--quiet", "-q", is_flag=True)
@output_options
@executor_options
def run_cmd(file, out, exploratory, quiet, overwrite, resume, executor, workers, scheduler):
    """Run the study of FILE; confirmatory mode refuses a missing or mismatched lock.

    \b
    Example:
      tabsim prereg run preregistration/clipping_null/plan.yaml --out preregistration/clipping_null/results
    """
    from tabsim._cli_common import guarded
    from tabsim.config import ConfigError
    from tabsim.executors import check_options, open_executor

    check_options(executor, workers, scheduler)
    try:
        with guarded(out), open_executor(executor, workers, scheduler, quiet=quiet) as ex:
            res = run_study(file, out, confirmatory=not exploratory, overwrite=overwrite, progress=not quiet,
                            resume=resume, executor=ex)
    except (PreregError, ConfigError) as err:
        _fail(err)
    if not quiet:
        for h in res["analysis"]["hypotheses"]:
            click.echo(f"{h['id']:>6} [{h['kind'][:4]}] {h['verdict']:<13} {h['estimand']} = {h['estimate']:.4f} "
                       f"[{h['ci_low']:.4f}, {h['ci_high']:.4f}]  ({h['rule_text']})")
        click.echo(f"wrote {out}/report.md, report.json, results.json, data.parquet ({res['wall_seconds']} s)")


@command.command("report")
@click.argument("dir", type=click.Path(file_okay=False, path_type=Path))
def report_cmd(dir):
    """Write DIR/report.md and DIR/report.json for a complete run; refuses incomplete runs."""
    try:
        rep = write_report(dir)
    except PreregError as err:
        _fail(err)
    c = rep["confirmatory_counts"]
    click.echo(f"{rep['title']}: {c['SUPPORTED']} supported, {c['NOT SUPPORTED']} not supported, "
               f"{c['INCONCLUSIVE']} inconclusive; {len(rep['deviations'])} deviation(s) -> {dir}/report.md")
