"""Provenance of a result: what computed it (tabsim, its dependencies' versions, the device and XLA's
settings), from which code (the git commit of the working folder, and whether it had uncommitted
changes), on which command line, where and when."""
from __future__ import annotations

import datetime as _dt
import importlib.metadata
import os
import platform
import subprocess
import sys
from pathlib import Path

import jax

from tabsim import __version__, _xla

# the direct dependencies whose versions can change a result or its files
DEPENDENCIES = ("jax", "jaxlib", "numpy", "scipy", "optax", "pandas", "statsmodels", "matplotlib", "pyarrow", "pydantic")


def git_commit(cwd: str | Path | None = None) -> str | None:
    """The current git commit of ``cwd`` (or of the package's folder), or None outside a checkout."""
    cwd = Path(cwd) if cwd else Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def git_dirty(cwd: str | Path | None = None) -> bool | None:
    """Whether the checkout of ``cwd`` has uncommitted changes to tracked files (None outside one)."""
    cwd = Path(cwd) if cwd else Path.cwd()
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd, capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return bool(out.stdout.strip()) if out.returncode == 0 else None


def versions() -> dict:
    """tabsim's and its direct dependencies' installed versions (None for one that is not installed)."""
    found = {"tabsim": __version__}
    for name in DEPENDENCIES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def provenance(**extra) -> dict:
    """Versions, the working folder's git commit and dirty flag, the package's own commit (where it is a
    checkout), the command line, ``XLA_FLAGS``, the platform and UTC time, plus ``extra``.

    ``git_commit`` is the commit of the folder the run was started in (None outside a git checkout: the
    package's own commit is ``tabsim_commit``, never passed off as the user's)."""
    return {
        "tabsim_version": __version__,
        "git_commit": git_commit(Path.cwd()),
        "git_dirty": git_dirty(Path.cwd()),
        "tabsim_commit": git_commit(),
        "time_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "versions": versions(),
        "backend": jax.default_backend(),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "xla_options_dropped": _xla.dropped(),
        "argv": list(sys.argv),
        "platform": platform.platform(),
        **extra,
    }
