"""``tabsim prereg``: validate, keygen, lock, amend, run and report a pre-registered study.

The pre-registration itself lives in :mod:`tabsim.prereg`. Its modules (but for the error class of
:mod:`tabsim.prereg.errors`) are imported when a subcommand runs, so ``tabsim prereg --help`` stays fast.
"""
from __future__ import annotations

from pathlib import Path

import click

from tabsim.cli.jsonout import emit, json_option
from tabsim.cli.options import (check_options, check_out, chosen, executor_options, guarded, open_executor,
                                output_options)
from tabsim.cli.phases import Phases
from tabsim.prereg.errors import PreregError


def _fail(err: Exception):
    raise click.ClickException(str(err))


_FILE = click.Path(dir_okay=False, path_type=Path)
_PUBLIC_KEY_HELP = ("The public key the lock and results must be signed with: a public key file (KEYFILE.pub) or a "
                    "fingerprint sha256:<hex>; default $TABSIM_PREREG_PUBKEY. Catches a forger re-signing with "
                    "their own key.")


def _pin(public_key):
    # lazy: `tabsim prereg ... --help` loads none of the prereg stack
    from tabsim.prereg.signing import pinned

    try:
        return pinned(public_key)
    except PreregError as err:
        _fail(err)


@click.group("prereg")
def command():
    """Pre-registration: validate, lock, amend, run confirmatory, report against the plan."""


@command.command("validate")
@click.argument("file", type=_FILE)
@click.option("--public-key", default=None, metavar="KEY", help=_PUBLIC_KEY_HELP)
@json_option
def validate_cmd(file, public_key, as_json):
    """Check FILE against the pre-registration schema; list every problem, naming its field.

    With a lock, also check that the plan matches it and that its signature verifies (exit 1
    otherwise), and say whether it is signed, whether the installed code is the locked code and
    which git commit holds the plan.
    """
    # lazy: `tabsim prereg ... --help` loads none of the prereg stack
    from tabsim.prereg import locking as lk
    from tabsim.prereg.hashing import plan_hash
    from tabsim.prereg.locking import PlanChangedError, verify
    from tabsim.prereg.schema import load_plan
    from tabsim.prereg.signing import SignatureError
    from tabsim.prereg.summary import plan_summary

    pin = _pin(public_key)
    try:
        plan, doc = load_plan(file)
    except PreregError as err:
        _fail(err)
    n_conf = len(plan.confirmatory)
    info = {"command": "tabsim prereg validate", "file": str(file), "valid": True, "sha256": plan_hash(doc),
            "confirmatory_hypotheses": n_conf, "exploratory_hypotheses": len(plan.hypotheses) - n_conf,
            "exploratory_analyses": len(plan.exploratory), "lock": "none"}

    def done(lock: str, problem: str | None = None, lines: list | None = None):
        if as_json:  # the object also when the lock fails (the exit status says so)
            emit({**info, "lock": lock, "problem": problem, "lock_lines": lines or []})
        if problem:
            _fail(PreregError(problem))

    click.echo(f"{file}: valid ({plan_summary(plan)}); sha256 {plan_hash(doc)}", err=as_json)
    if not lk.lock_path(file).exists():
        click.echo("lock: none (run `tabsim prereg lock` before the study)", err=as_json)
        done("none")
        return
    try:
        rec = verify(file, public_key=pin)
    except SignatureError as err:
        click.echo(f"lock: BAD SIGNATURE -- {err}", err=as_json)
        done("bad signature", f"{lk.lock_path(file)}: the lock's or an amendment's signature does not hold; a "
                              f"confirmatory run refuses it")
    except PlanChangedError as err:
        click.echo(f"lock: DOES NOT MATCH -- {err}", err=as_json)
        done("does not match", f"{lk.lock_path(file)}: the plan does not match its lock; a confirmatory run refuses it")
    except PreregError as err:
        click.echo(f"lock: REFUSED -- {err}", err=as_json)
        done("refused", f"{lk.lock_path(file)}: the lock cannot be used; a confirmatory run refuses it")
    lines, problem = _lock_lines(file, rec, pin)
    for line in lines:
        click.echo(line, err=as_json)
    done("matches", problem, lines)


def _lock_lines(file, rec: dict, pin) -> tuple[list[str], str | None]:
    """What ``validate`` says about a matching lock (signature, code, git commit), and why it must fail."""
    # lazy: `tabsim prereg ... --help` loads none of the prereg stack
    from tabsim.prereg import integrity
    from tabsim.prereg.signing import short

    lock = rec["lock"]
    n = len(rec["amendments"])
    lines = [f"lock: matches (locked {lock['locked_at_utc']}{f', {n} amendment(s)' if n else ''})"]
    fp = (lock.get("signature") or {}).get("fingerprint")
    if fp:
        lines.append(f"signature: verified, key {short(fp)}" + (" (the pinned key)" if pin else
                     " (no key pinned: pass --public-key to catch a lock re-signed with another key)"))
    elif lock["schema"] == "tabsim.prereg.lock/1":
        lines.append("warning: old-format lock: unsigned, no code digest; its hash guards against accidents only")
    else:
        lines.append("warning: unsigned lock: its hashes guard against accidents only (anyone who edits the plan can "
                     "recompute them); `tabsim prereg lock --key` signs a lock")
    stale = integrity.executed_code_problems()
    if stale:
        lines.append(f"code: BYTECODE DOES NOT MATCH THE SOURCE -- {stale[0]}"
                     + (f" (and {len(stale) - 1} more)" if len(stale) > 1 else ""))
        return lines, (f"{file}: the code Python runs is not the tabsim source the code digest covers; a confirmatory "
                       f"run refuses it. Delete the __pycache__ folders under {integrity.code_root()} (or reinstall "
                       f"tabsim)")
    if lock.get("code"):
        diff = integrity.code_changes(lock["code"], integrity.code_digest())
        if integrity.code_same(diff):
            lines.append(f"code: same as at the lock (sha256 {lock['code']['sha256'][:12]}, "
                         f"{lock['code']['n_files']} files)")
        else:
            lines.append(f"warning: code: differs from the lock: {integrity.describe_changes(diff)}; a confirmatory "
                         f"run refuses it without --allow-code-change")
    commit = integrity.plan_commit(file, rec["sha256"])
    if commit["state"] == "committed":
        lines.append(f"git: plan committed in {commit['commit'][:7]} at {commit['commit_time_utc']}")
    elif commit["state"] == "not committed":
        lines.append("warning: git: the plan with this content is not committed; commit the plan and its lock before "
                     "the run, so that git can show the plan preceded the results")
    else:
        lines.append("git: not in a git repository; the check that the plan was committed before the results "
                     "cannot be made")
    return lines, None


@command.command("keygen")
@click.option("--out", "-o", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Private key file to create (PEM, mode 0600); the public key goes to OUT.pub. Never overwrites.")
@json_option
def keygen_cmd(out, as_json):
    """Create an Ed25519 key pair for signing locks and results."""
    # lazy: `tabsim prereg ... --help` loads none of the prereg stack
    from tabsim.prereg.signing import keygen

    try:
        rec = keygen(out)
    except PreregError as err:
        _fail(err)
    except OSError as err:
        _fail(PreregError(f"--out: cannot write {err.filename or out}: {err.strerror or err}"))
    click.echo(f"wrote private key {rec['private_key']} (mode 0600: keep it secret) and public key "
               f"{rec['public_key']}; fingerprint {rec['fingerprint']}", err=as_json)
    if as_json:
        emit({"command": "tabsim prereg keygen", **rec})


@command.command("lock")
@click.argument("file", type=_FILE)
@click.option("--key", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="Sign the lock with this private key (`tabsim prereg keygen`); unsigned without.")
@json_option
def lock_cmd(file, key, as_json):
    """Write FILE.lock.json (normalised SHA-256, UTC time, git commit, versions, code digest); never overwrites."""
    # lazy: `tabsim prereg ... --help` loads none of the prereg stack
    from tabsim.prereg.locking import lock, lock_path
    from tabsim.prereg.signing import short

    try:
        rec = lock(file, key=key)
    except PreregError as err:
        _fail(err)
    signed = f"signed by key {short(rec['signature']['fingerprint'])}" if "signature" in rec else "unsigned"
    click.echo(f"locked {file}: sha256 {rec['sha256']} at {rec['locked_at_utc']} "
               f"(git {rec['git_commit'] or 'n/a'}; code sha256 {rec['code']['sha256'][:12]}; {signed}) "
               f"-> {lock_path(file)}", err=as_json)
    if rec["plan_commit"]["state"] == "not committed":
        click.echo("next: commit the plan and its lock before the run (the report checks the plan's commit precedes "
                   "the results; pushing it to a public host shows when)", err=as_json)
    if as_json:
        emit({"command": "tabsim prereg lock", "file": str(file), "lock": str(lock_path(file)), "sha256": rec["sha256"],
              "locked_at_utc": rec["locked_at_utc"], "git_commit": rec["git_commit"], "signed": "signature" in rec,
              "plan_commit": rec["plan_commit"]})


@command.command("amend")
@click.argument("file", type=_FILE)
@click.option("--reason", required=True, help="Why the locked plan changed (appears in every report).")
@click.option("--key", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="Sign the amendment with this private key; required, and it must be the lock's key, when the "
                   "lock is signed.")
@json_option
def amend_cmd(file, reason, key, as_json):
    """Record a change to a locked FILE in FILE.amendments.json (reported as a deviation)."""
    # lazy: `tabsim prereg ... --help` loads none of the prereg stack
    from tabsim.prereg.locking import amend
    from tabsim.prereg.signing import short

    try:
        rec = amend(file, reason, key=key)
    except PreregError as err:
        _fail(err)
    signed = f"signed by key {short(rec['signature']['fingerprint'])}" if "signature" in rec else "unsigned"
    click.echo(f"amendment {rec['n']} of {file}: {rec['old_sha256'][:12]} -> {rec['new_sha256'][:12]}; changed "
               f"{', '.join(rec['changed_fields'])} ({signed})", err=as_json)
    if as_json:
        emit({"command": "tabsim prereg amend", "file": str(file), "n": rec["n"], "old_sha256": rec["old_sha256"],
              "new_sha256": rec["new_sha256"], "changed_fields": rec["changed_fields"], "signed": "signature" in rec})


@command.command("run")
@click.argument("file", type=_FILE)
@click.option("--out", "-o", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Output folder for data, results.json, status.json and the report.")
@click.option("--exploratory", is_flag=True,
              help="Run without a lock; everything is labelled exploratory (default: confirmatory).")
@click.option("--key", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="Sign the results (status.json's digests of the result files) with this private key.")
@click.option("--public-key", default=None, metavar="KEY", help=_PUBLIC_KEY_HELP)
@click.option("--allow-code-change", is_flag=True,
              help="Run although the tabsim source or library versions differ from the lock's; the report shows "
                   "the change as a deviation (refused by default).")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar or summary.")
@json_option
@output_options
@executor_options
def run_cmd(file, out, exploratory, key, public_key, allow_code_change, quiet, as_json, overwrite, resume, executor,
            workers, scheduler):
    """Run the study of FILE; confirmatory mode refuses a missing or mismatched lock.

    \b
    Example:
      tabsim prereg run preregistration/clipping_null/plan.yaml --out preregistration/clipping_null/results
    """
    check_options(executor, workers, scheduler)  # usage errors first, before any line
    reads = [("plan it reads", file), ("key it reads", key),
             ("public key it reads", public_key if public_key and Path(public_key).exists() else None)]
    check_out(out, reads=reads)  # the plan's lock and amendments, beside it, once their module is loaded
    say = Phases(quiet)
    say("tabsim prereg run: loading the engine (JAX, pandas)")
    # lazy: `tabsim prereg ... --help` loads none of the prereg stack; the engine first, then the statistics,
    # each announced (together they take seconds)
    import tabsim.studies.factorial  # noqa: F401
    from tabsim.config import ConfigError

    say("loading the statistics (scipy, statsmodels)")
    from tabsim.prereg.locking import amendments_path, lock_path  # lazy: as above
    from tabsim.prereg.runner import run_study

    reads += [("plan's lock it reads", lock_path(file)), ("plan's amendments it reads", amendments_path(file))]
    try:
        with guarded(out, reads), open_executor(executor, workers, scheduler, quiet=quiet) as ex:
            # results.json's wall time is the command's, from the process's start
            res = run_study(file, out, confirmatory=not exploratory, overwrite=overwrite, progress=not quiet,
                            resume=resume, executor=ex, key=key, public_key=public_key,
                            allow_code_change=allow_code_change, log=say, started=say.t0, device=chosen("device"))
    except (PreregError, ConfigError) as err:
        _fail(err)
    if not quiet:
        for h in res["analysis"]["hypotheses"]:
            click.echo(f"{h['id']:>6} [{h['kind'][:4]}] {h['verdict']:<13} {h['estimand']} = {h['estimate']:.4f} "
                       f"[{h['ci_low']:.4f}, {h['ci_high']:.4f}]  ({h['rule_text']})", err=as_json)
        # the command's time to here (results.json records it as of its writing, a moment earlier)
        click.echo(f"wrote {out}/report.md, report.json, results.json, data.parquet ({say.seconds():.1f} s)",
                   err=as_json)
    if as_json:
        keep = ("id", "kind", "verdict", "estimand", "estimate", "ci_low", "ci_high", "rule_text")
        emit({"command": "tabsim prereg run", "file": str(file), "out": str(out), "complete": True,
              "confirmatory": not exploratory, "wall_seconds": round(say.seconds(), 3),
              "hypotheses": [{k: h.get(k) for k in keep} for h in res["analysis"]["hypotheses"]]})


@command.command("report")
@click.argument("dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--public-key", default=None, metavar="KEY", help=_PUBLIC_KEY_HELP)
@click.option("--strict", is_flag=True,
              help="Exit 1 (after writing the report) on any deviation from the plan: changed code, a plan not "
                   "committed before the run, a recorded commit that does not hold, a lock or amendment dated after "
                   "the run, an amendment, a failed manipulation check, reused seeds, an unlocked run.")
@json_option
def report_cmd(dir, public_key, strict, as_json):
    """Write DIR/report.md and DIR/report.json for a complete run; refuses incomplete, altered or badly
    signed runs."""
    # lazy: `tabsim prereg ... --help` loads none of the prereg stack
    from tabsim.prereg.report import strict_failures, write_report

    pin = _pin(public_key)
    try:
        rep = write_report(dir, public_key=pin)
    except PreregError as err:
        _fail(err)
    c = rep["confirmatory_counts"]
    click.echo(f"{rep['title']}: {c['SUPPORTED']} supported, {c['NOT SUPPORTED']} not supported, "
               f"{c['INCONCLUSIVE']} inconclusive; {len(rep['deviations'])} deviation(s), "
               f"{len(rep['limitations'])} limitation(s) -> {dir}/report.md", err=as_json)
    failed = strict_failures(rep)
    if as_json:
        emit({"command": "tabsim prereg report", "dir": str(dir), "report": str(Path(dir) / "report.md"),
              "title": rep["title"], "confirmatory_counts": c, "deviations": rep["deviations"],
              "limitations": rep["limitations"], "strict_failed": bool(strict and failed)})
    if strict and failed:
        _fail(PreregError(f"{dir}: --strict: integrity check failed: {len(failed)} problem(s) (deviations from the "
                          "plan, or a check that could not be made): "
                          + "; ".join(f"{d['kind']}: {d['text']}" for d in failed)))
