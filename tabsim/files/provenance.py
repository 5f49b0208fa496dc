"""Provenance of a result: tabsim's version, the git commit, the platform and the time."""
from __future__ import annotations

import datetime as _dt
import platform
import subprocess
from pathlib import Path

import jax

from tabsim import __version__


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
