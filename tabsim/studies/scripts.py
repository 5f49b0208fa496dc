"""The command line and output files shared by the study scripts under ``experiments/``."""
from __future__ import annotations

import argparse
import contextlib
import time
from pathlib import Path

import pandas as pd

from tabsim.files.atomic import write_frame, write_json
from tabsim.files.provenance import provenance
from tabsim.plotting.figures import save_figure
from tabsim.runtime.store import OutputError, RunStore, staging_path


def study_args(doc: str, quick_help: str, out: Path, argv=None) -> argparse.Namespace:
    """Parse a study script's command line: ``--quick`` (help ``quick_help``), ``--out`` (default ``out``),
    ``--overwrite`` and ``--resume`` (see :func:`study_store`).

    The description is the first line of ``doc`` (the script's docstring).
    """
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=quick_help)
    ap.add_argument("--out", type=Path, default=out, help=f"output folder (default: {out})")
    ap.add_argument("--overwrite", action="store_true",
                    help="replace a non-empty --out (its old contents stay until the new run is published)")
    ap.add_argument("--resume", action="store_true",
                    help="continue an interrupted run into --out (finished chunks are reused)")
    return ap.parse_args(argv)


@contextlib.contextmanager
def study_store(args: argparse.Namespace, description: str = "study"):
    """Open a run store for a study script's ``--out`` and yield its staging folder.

    Everything written into the yielded folder is published to ``args.out`` in one rename when the block
    ends; runs inside the block checkpoint their chunks, so ``--resume`` continues an interrupted study.
    A non-empty ``--out``, an unwritable target or Ctrl-C end the script with a one-line message.
    """
    try:
        with RunStore(args.out, overwrite=args.overwrite, resume=args.resume, description=description) as store:
            if store.complete:
                raise SystemExit(f"nothing to resume: {args.out} is complete")
            yield store.dir
    except OutputError as err:
        raise SystemExit(f"error: {err}") from None
    except OSError as err:
        raise SystemExit(f"error: cannot write {err.filename or args.out}: {err.strerror or err}; "
                         f"{args.out} is unchanged") from None
    except KeyboardInterrupt:
        raise SystemExit(f"interrupted: {args.out} is unchanged; finished chunks are kept in "
                         f"{staging_path(args.out)}: rerun with --resume to continue") from None


def write_study(out: str | Path, frame: pd.DataFrame, figures: dict, summary: dict, *, started: float,
                **extra) -> Path:
    """Write a study's outputs to ``out`` and return the path of its ``summary.json``.

    Writes ``results.parquet`` (``frame``), ``<stem>.png`` (and ``.pdf`` when asked, see :func:`tabsim.plotting.figures.save_figure`) for each ``stem: figure`` of ``figures``,
    and ``summary.json``: ``summary`` plus ``provenance`` (:func:`provenance` with ``wall_seconds``
    since ``started``, a :func:`time.perf_counter` reading, and ``extra``).
    """
    out = Path(out)
    write_frame(out / "results.parquet", frame)
    for stem, fig in figures.items():
        save_figure(fig, out / stem)
    wall = round(time.perf_counter() - started, 2)
    return write_json(out / "summary.json", {**summary, "provenance": provenance(wall_seconds=wall, **extra)})
