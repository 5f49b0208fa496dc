"""What every writing command shares: the ``--overwrite``/``--resume`` options and one-line errors for
output problems (an existing ``--out``, a full disk, a read-only target) and for Ctrl-C."""
from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import click

# Nothing heavy at import: every command's options are defined from here, and ``tabsim CMD --help``
# must not pay for JAX, pandas or the config schema.


def _figure_formats(ctx, param, pdf: bool) -> None:
    # read by tabsim.plotting.save_figure; set on every invocation, so a call without --pdf resets it
    os.environ["TABSIM_FIGURE_FORMATS"] = "png,pdf" if pdf else "png"


def output_options(fn):
    """Add ``--overwrite``, ``--resume`` and ``--pdf`` to a command that writes ``--out``."""
    fn = click.option("--pdf", is_flag=True, expose_value=False, callback=_figure_formats,
                      help="Also write every figure as PDF beside its PNG (PNG only by default).")(fn)
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
    from tabsim.config import ConfigError
    from tabsim.store import OutputError, staging_path

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
    from tabsim.store import RunStore

    with guarded(out):
        with RunStore(out, overwrite=overwrite, resume=resume, key=key, description=description) as store:
            yield store


def _draw_once(modules: tuple[str, ...], draw: bool = True) -> None:
    import importlib
    import io

    for name in modules:
        importlib.import_module(name)
    if not draw:
        return
    from tabsim import plotting  # selects the Agg backend
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.errorbar([0, 1], [0, 1], yerr=[0.1, 0.1], marker="o", label="x")
    ax.legend()
    ax.set(xscale="log", title="warm-up")
    for ext in plotting.figure_formats():
        fig.savefig(io.BytesIO(), format=ext, dpi=130, bbox_inches="tight")
    plt.close(fig)


def warm_up(*modules: str, draw: bool = True):
    """Import ``modules`` and (``draw``) the plotting stack and draw one small figure, in a background thread.

    Started before the engine compiles and trains (XLA releases the GIL meanwhile), so that the
    imports and the first draw (fonts, backend) are done when the results need them. The caller
    joins the returned thread before it touches matplotlib itself.
    """
    import threading

    thread = threading.Thread(target=_draw_once, args=(modules, draw), name="tabsim-warm-up", daemon=True)
    thread.start()
    return thread
