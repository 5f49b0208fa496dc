"""A saved run folder read back (:meth:`tabsim.runtime.run.Result.load`): checked against its manifest
first, then each file read or refused in one line that names it.

A folder published by tabsim (``Result.save``, ``tabsim run``, ``tabsim sweep``) carries the SHA-256 of
its files (:mod:`tabsim.runtime.manifest`); a changed or missing file, or a results file added since,
is refused as ``tabsim verify`` would report it, before anything is read.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa

from tabsim.files.atomic import read_frame
from tabsim.runtime.manifest import ManifestError, check_unchanged
from tabsim.runtime.storefiles import read_json

FRAME_NAMES = ("results.parquet", "results.csv")  # the first one present is read
JSON_NAMES = ("config.json", "provenance.json")
PROMPT_NAMES = ("prompts.parquet", "prompts.csv")  # train.prompt_metrics' per-prompt frame, when recorded
KEY_COLUMNS = ("seed", "arm", "step")  # every run's frame has them, after its swept fields, before its metrics


class ResultFolderError(ValueError):
    """A folder that cannot be read back as a run: the message names the folder, the file and what is wrong."""


def read_run_folder(out: str | Path, *, verify: bool = True) -> tuple[pd.DataFrame, dict, dict]:
    """``(frame, config, provenance)`` of a saved run folder.

    Args:
      verify: refuse a folder that is not published by tabsim or differs from what was published
        (:func:`tabsim.runtime.manifest.check_unchanged`); False reads the files unchecked.

    Raises:
      ResultFolderError: not a folder, not published or changed since (with ``verify``), or a file that is
        missing, unreadable, or not a run's (a results table without its seed, arm or step column).
    """
    out = Path(out)
    if not out.is_dir():
        raise ResultFolderError(f"{out}: not a folder (a run or sweep folder holds results.parquet, config.json "
                                "and provenance.json)")
    if verify:
        try:
            check_unchanged(out, reads=FRAME_NAMES + JSON_NAMES + PROMPT_NAMES)
        except ManifestError as err:
            raise ResultFolderError(str(err)) from None
    names = [n for n in FRAME_NAMES if (out / n).exists()]
    if not names:
        raise ResultFolderError(f"{out}: no results.parquet or results.csv; not a run or sweep folder")
    frame = _frame(out / names[0])
    config, provenance = (_json(out / n) for n in JSON_NAMES)
    return frame, config, provenance


def read_prompts(out: str | Path) -> pd.DataFrame | None:
    """The per-prompt frame of a saved run folder (``prompts.parquet``, else ``prompts.csv``; None: the run recorded
    none). Read after :func:`read_run_folder`, which checks it against the manifest with the others."""
    names = [n for n in PROMPT_NAMES if (Path(out) / n).exists()]
    return _frame(Path(out) / names[0]) if names else None


def _frame(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise ResultFolderError(f"{path}: not a regular file")
    try:
        frame = read_frame(path)
    except (OSError, ValueError, pa.ArrowException) as err:
        why = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ResultFolderError(f"{path}: not a readable results table ({why})") from None
    lacking = [c for c in KEY_COLUMNS if c not in frame.columns]
    if lacking:
        raise ResultFolderError(f"{path}: no {', '.join(lacking)} column{'s' * (len(lacking) > 1)}; a run's results "
                                f"hold its swept fields, then {', '.join(KEY_COLUMNS)}, then its metrics")
    if frame.empty:
        raise ResultFolderError(f"{path}: holds no rows")
    return frame


def _json(path: Path) -> dict:
    obj, why = read_json(path, why=True)
    if obj is None:
        raise ResultFolderError(f"{path.parent}: {why}")
    return obj


__all__ = ["ResultFolderError", "read_run_folder", "read_prompts", "FRAME_NAMES", "PROMPT_NAMES", "KEY_COLUMNS"]
