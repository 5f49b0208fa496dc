"""``tabsim verify FOLDER``: re-check a published run folder against the digests written when it was published."""
from __future__ import annotations

from pathlib import Path

import click

from tabsim.cli.jsonout import emit, json_option
from tabsim.cli.options import fail
from tabsim.runtime.manifest import MARKER, ManifestError, check_folder


def _names(paths: list[str], limit: int = 8) -> str:
    more = f" and {len(paths) - limit} more" if len(paths) > limit else ""
    return ", ".join(paths[:limit]) + more


@click.command("verify")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@json_option
def command(folder, as_json):
    """Re-check the files of a published FOLDER against the SHA-256 manifest in its .tabsim-run.json.

    Exits 1 naming every file that changed, went missing or was added since the folder was published.

    \b
    Example:
      tabsim verify results/priors
    """
    try:
        got = check_folder(folder)
    except ManifestError as err:
        fail(str(err))
    problems = [f"{kind} {_names(got[kind])}" for kind in ("changed", "missing", "added") if got[kind]]
    when = got["marker"].get("published_utc", "?")
    if as_json:  # the object first, also when the folder differs (the exit status still says so)
        emit({"command": "tabsim verify", "folder": str(folder), "ok": not problems, "n_files": got["n_files"],
              "published_utc": when, "published_by": got["marker"].get("command"),
              **{kind: got[kind] for kind in ("changed", "missing", "added")}})
    if problems:
        fail(f"{folder}: differs from the run published at {when} ({MARKER}): " + "; ".join(problems))
    click.echo(f"{folder}: all {got['n_files']} file(s) as published at {when}", err=as_json)
