"""Files: atomic writes, provenance, and saved results that load back to the same frame; the
command line and output files shared by the study scripts under ``experiments/``."""
from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import os
import platform
import subprocess
import tempfile
import time
from pathlib import Path

import pandas as pd


def _umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


@contextlib.contextmanager
def atomic_path(path: str | Path):
    """Yield a temporary path in ``path``'s folder; rename it to ``path`` when the block succeeds.

    The temporary file is removed if the block raises, so ``path`` is either the old file or the
    whole new one, never a part.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, _umask_mode())  # mkstemp creates 0600; give the file ordinary permissions
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder, then rename."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(data)
    return Path(path)


def atomic_write_text(path: str | Path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode())


def write_json(path: str | Path, obj) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


def _json_default(o):
    import numpy as np

    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def write_frame(path: str | Path, frame: pd.DataFrame) -> Path:
    """Write a frame as Parquet (``.parquet``) or CSV (``.csv``), atomically."""
    path = Path(path)
    if path.suffix not in (".parquet", ".csv"):
        raise ValueError(f"unknown results format {path.suffix!r}; allowed: .parquet, .csv")
    with atomic_path(path) as tmp:
        if path.suffix == ".parquet":
            frame.to_parquet(tmp, index=False)
        else:
            frame.to_csv(tmp, index=False)
    return path


def read_frame(path: str | Path) -> pd.DataFrame:
    path = Path(path)
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    return pd.read_csv(path)


def git_commit(cwd: str | Path | None = None) -> str | None:
    """The current git commit of ``cwd`` (or of the package's folder), or None outside a checkout."""
    cwd = Path(cwd) if cwd else Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def provenance(**extra) -> dict:
    """Version, git commit, platform and UTC time, plus ``extra``."""
    import jax

    from tabsim import __version__

    return {
        "tabsim_version": __version__,
        "git_commit": git_commit(Path.cwd()) or git_commit(),
        "time_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "platform": platform.platform(),
        **extra,
    }


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
    from tabsim.store import OutputError, RunStore, staging_path

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

    Writes ``results.parquet`` (``frame``), ``<stem>.png`` (and ``.pdf`` when asked, see :func:`tabsim.plotting.save_figure`) for each ``stem: figure`` of ``figures``,
    and ``summary.json``: ``summary`` plus ``provenance`` (:func:`provenance` with ``wall_seconds``
    since ``started``, a :func:`time.perf_counter` reading, and ``extra``).
    """
    from tabsim.plotting import save_figure

    out = Path(out)
    write_frame(out / "results.parquet", frame)
    for stem, fig in figures.items():
        save_figure(fig, out / stem)
    wall = round(time.perf_counter() - started, 2)
    return write_json(out / "summary.json", {**summary, "provenance": provenance(wall_seconds=wall, **extra)})
