"""What every writing command shares: the ``--overwrite``/``--resume`` options and one-line errors for
output problems (an existing ``--out``, a full disk, a read-only target) and for Ctrl-C."""
from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import click

from tabsim.config import ConfigError
from tabsim.store import OutputError, RunStore, staging_path


def output_options(fn):
    """Add ``--overwrite`` and ``--resume`` to a command that writes ``--out``."""
    fn = click.option("--resume", is_flag=True,
                      help="Continue an interrupted run into the same --out: finished chunks are kept, only the "
                           "missing ones are computed (same config and options).")(fn)
    fn = click.option("--overwrite", is_flag=True,
                      help="Replace a non-empty --out; its old contents stay until the new run is published.")(fn)
    return fn


@contextlib.contextmanager
def guarded(out: Path):
    """Turn output errors, OS errors and Ctrl-C inside the block into one-line messages and exit codes.

    Ctrl-C (SIGINT) exits with 130 after one line saying what was kept; the staging folder's finished
    chunks are what ``--resume`` continues from.
    """
    try:
        yield
    except (OutputError, ConfigError) as err:
        raise click.ClickException(str(err)) from None
    except OSError as err:
        where = err.filename or out
        raise click.ClickException(f"cannot write {where}: {err.strerror or err}; {out} is unchanged") from None
    except KeyboardInterrupt:
        stage = staging_path(out)
        kept = ""
        if stage.is_dir():
            n = len(list((stage / "chunks").glob("*.parquet"))) if (stage / "chunks").is_dir() else 0
            kept = f"; {n} finished chunk(s) kept in {stage}: rerun the same command with --resume to continue"
        click.echo(f"interrupted: {out} is unchanged{kept}", err=True)
        sys.exit(130)


@contextlib.contextmanager
def open_store(out: Path, *, overwrite: bool, resume: bool, key: str | None, description: str):
    """``guarded`` around an open :class:`RunStore`: yields the store, publishes when the block succeeds."""
    with guarded(out):
        with RunStore(out, overwrite=overwrite, resume=resume, key=key, description=description) as store:
            yield store
