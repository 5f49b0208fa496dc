"""``tabsim claims``: published claims as pre-registered studies; list them, run them, write their page.

The claim studies live in :mod:`tabsim.prereg.claims` (loaded when a subcommand runs, so ``--help`` stays
fast); each is a folder of ``preregistration/claims`` holding ``claim.yaml`` and a locked ``plan.yaml``.
"""
from __future__ import annotations

from pathlib import Path

import click

from tabsim.cli.jsonout import emit, json_option, say as tell
from tabsim.cli.options import chosen, executor_options, guarded, open_executor, output_options
from tabsim.cli.phases import Phases
from tabsim.prereg.errors import PreregError

_ROOT = click.option("--root", default=Path("preregistration/claims"), show_default=True,
                     type=click.Path(file_okay=False, path_type=Path),
                     help="The folder of claim studies (one folder per claim, and waiting.yaml).")


def _fail(err: Exception):
    raise click.ClickException(str(err))


@click.group("claims", invoke_without_command=True)
@_ROOT
@json_option
@click.pass_context
def command(ctx, root, as_json):
    """Published claims as pre-registered studies: list them with their verdicts, run them, write their page.

    \b
    Examples:
      tabsim claims                          # the studies, their verdicts, the claims that wait
      tabsim claims run --quick --out results/claims    # a reduced run of every study
      tabsim claims run B17                  # the confirmatory run of one (needs its lock)
      tabsim claims report                   # docs/claims.md and its figures, from the runs
    """
    ctx.obj = root
    if ctx.invoked_subcommand is not None:
        return
    from tabsim.prereg import claims  # lazy: see the module docstring

    try:
        studies, waiting = claims.load_claims(root), claims.load_waiting(root)
        rows = []
        for c in studies:
            run = claims.read_claim_run(c, verify=False)
            state = "locked, not run" if (c.folder / "plan.yaml.lock.json").is_file() else "not locked"
            verdict = f"{run.verdict.verdict} ({run.verdict.region_text})" if run else state
            rows.append({"id": c.id, "title": c.title, "arxiv": c.paper.arxiv,
                         "verdict": run.verdict.verdict if run else None,
                         "region": run.verdict.region_text if run else None, "state": "run" if run else state})
            tell(f"{c.id:<10} {verdict}\n{'':<10} {c.title} (arXiv {c.paper.arxiv})", as_json)
        for w in waiting:
            tell(f"{w.id:<10} {w.status.upper()}: {w.claim}\n{'':<10} waits for {w.waits_for}", as_json)
    except PreregError as err:
        _fail(err)
    if as_json:
        emit({"command": "claims", "studies": rows,
              "waiting": [{"id": w.id, "status": w.status, "claim": w.claim, "waits_for": w.waits_for}
                          for w in waiting]})


@command.command("run")
@click.argument("ids", nargs=-1)
@click.option("--quick", is_flag=True,
              help="A reduced run of each study (its few seeds and steps, the same design), exploratory, into --out.")
@click.option("--out", "-o", default=Path("results/claims"), show_default=True,
              type=click.Path(file_okay=False, path_type=Path),
              help="Where the summary table and figures go (and the reduced runs, with --quick); full runs go "
                   "into each study's results/ folder.")
@click.option("--key", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="Sign a confirmatory run's results with this private key (the lock's key, if it is signed).")
@click.option("--public-key", default=None, metavar="KEY", help="The key the locks must be signed with.")
@click.option("--quiet", "-q", is_flag=True, help="No phase lines.")
@output_options
@executor_options
@json_option
@click.pass_obj
def run_cmd(root, ids, quick, out, key, public_key, quiet, overwrite, resume, executor, workers, scheduler, as_json):
    """Run the claim studies IDS (default: all): confirmatory from their locks, or reduced with --quick."""
    say = Phases(quiet)
    say("tabsim claims run: loading the engine and the statistics")
    from tabsim.prereg import claims  # lazy: see the module docstring

    try:
        studies = claims.load_claims(root, list(ids) or None)
        reads = [("claim studies (--root)", root)] + [(what, Path(k)) for what, k in
                                                       (("private key (--key)", key), ("public key", public_key)) if k]
        with guarded(out, reads=reads), open_executor(executor, workers, scheduler, quiet=quiet) as ex:
            runs = [claims.run_claim(c, quick=quick, out=out, resume=resume, overwrite=overwrite, key=key,
                                     public_key=public_key, executor=ex, log=say, device=chosen("device"),
                                     precision=chosen("precision")) for c in studies]
            claims.write_summary(out, runs, formats=chosen("figure_formats"))
    except PreregError as err:
        _fail(err)
    for r in runs:
        tell(f"{r.claim.id:<8} {r.verdict.verdict:<14} {r.verdict.region_text}", as_json)
    tell(f"wrote {out}/summary.md, summary.csv and one figure per claim ({say.seconds():.1f} s)", as_json)
    if as_json:
        emit({"command": "claims run", "out": str(out), "quick": quick, "seconds": say.seconds(),
              "claims": [{"id": r.claim.id, "verdict": r.verdict.verdict, "region": r.verdict.region_text}
                         for r in runs]})


@command.command("report")
@click.option("--page", default=Path("docs/claims.md"), show_default=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The page to write; the figures go to assets/claims/ beside it.")
@click.option("--public-key", default=None, metavar="KEY", help="The key the runs must be signed with.")
@json_option
@click.pass_obj
def report_cmd(root, page, public_key, as_json):
    """Write the claims page and its figures from the studies' verified confirmatory runs."""
    from tabsim.prereg import claims  # lazy: see the module docstring

    try:
        studies = claims.load_claims(root)
        runs = [r for r in (claims.read_claim_run(c, public_key=public_key) for c in studies) if r is not None]
        not_run = [c.id for c in studies if c.id not in {r.claim.id for r in runs}]
        claims.write_page(runs, claims.load_waiting(root), page)
    except PreregError as err:
        _fail(err)
    extra = f"; not run yet, left out: {', '.join(not_run)}" if not_run else ""
    tell(f"wrote {page} ({len(runs)} claim stud{'y' if len(runs) == 1 else 'ies'}){extra}", as_json)
    if as_json:
        emit({"command": "claims report", "page": str(page), "claims": [r.claim.id for r in runs],
              "not_run": not_run})
