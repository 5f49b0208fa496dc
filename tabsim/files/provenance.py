"""Provenance of a result: what computed it (tabsim, its dependencies' versions, the device, XLA's
settings and the variables of the environment that can change the numbers), from which code (the git
commit of the working folder, and whether it had uncommitted changes; the package's own commit, and
whether its code differs from it), on which command line, where and when."""
from __future__ import annotations

import datetime as _dt
import functools
import importlib.metadata
import platform
import subprocess
import sys
import time
from pathlib import Path

import jax

from tabsim import __version__
from tabsim.base import xla
from tabsim.base import defaults

# the direct dependencies whose versions can change a result or its files
DEPENDENCIES = ("jax", "jaxlib", "numpy", "scipy", "optax", "pandas", "statsmodels", "matplotlib", "pyarrow", "pydantic")


PACKAGE = Path(__file__).resolve().parent.parent  # the folder of tabsim's own code
_GIT_SECONDS = 5.0  # a command asks several times (once per study): git's answer is reused this long
_git_answers: dict = {}


def _git(args: tuple, cwd: Path, reuse: bool = False):
    """``git ARGS`` in ``cwd``: ``(returncode, stdout)``, or None where git cannot run. ``reuse``: an
    answer at most :data:`_GIT_SECONDS` old is reused (provenance, asked once per study of a command)."""
    key = (args, str(cwd))
    hit = _git_answers.get(key)
    if reuse and hit is not None and time.monotonic() - hit[0] < _GIT_SECONDS:
        return hit[1]
    try:
        # file names are bytes to git (core.quotepath false prints them raw): undecodable ones are replaced
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=5)
        answer = (out.returncode, out.stdout.decode("utf-8", errors="replace"))
    except (OSError, subprocess.SubprocessError):
        answer = None
    _git_answers[key] = (time.monotonic(), answer)
    return answer


def git_commit(cwd: str | Path | None = None, *, reuse: bool = False) -> str | None:
    """The current git commit of ``cwd`` (or of the package's folder), or None outside a checkout."""
    cwd = Path(cwd) if cwd else PACKAGE
    answer = _git(("rev-parse", "HEAD"), cwd, reuse)
    return answer[1].strip() or None if answer is not None and answer[0] == 0 else None


def git_dirty(cwd: str | Path | None = None, *, reuse: bool = False, only_here: bool = False) -> bool | None:
    """Whether the checkout of ``cwd`` has uncommitted changes to tracked files (None outside one, or where
    the folder is gone). ``only_here``: changes under ``cwd`` only (the package's own code)."""
    cwd = Path(cwd) if cwd else working_folder()
    if cwd is None:
        return None
    answer = _git(("status", "--porcelain", "--untracked-files=no", *(("--", ".") if only_here else ())), cwd, reuse)
    return bool(answer[1].strip()) if answer is not None and answer[0] == 0 else None


def repo_top(path: str | Path) -> Path | None:
    """The top of the git work tree holding ``path``: the nearest folder at or above it with a ``.git``
    (a folder, or the file of a linked work tree), or None outside one."""
    p = Path(path).resolve()
    return next((folder for folder in (p, *p.parents) if (folder / ".git").exists()), None)


def path_anchors(path: str | Path) -> tuple[Path, ...]:
    """The folders that paths beside the file ``path`` are recorded relative to: the git work tree
    holding it (where there is one), then its own folder."""
    p = Path(path).resolve()
    return tuple(a for a in (repo_top(p.parent), p.parent) if a is not None)


def portable_path(path: str | Path, anchors: tuple[Path, ...] = ()) -> str:
    """``path`` as a result records it: relative to the first of ``anchors`` that holds it, else its file
    name alone; ``/``-separated, never the absolute path of the machine that wrote it. A relative
    ``path`` is read from the working folder."""
    p = Path(path).resolve()
    for anchor in anchors:
        if p.is_relative_to(anchor.resolve()):
            return p.relative_to(anchor.resolve()).as_posix()
    return p.name


def portable_argv(argv: list[str], anchors: tuple[Path, ...] = ()) -> list[str]:
    """A command line as a result records it: the program by its name, every absolute path (also the
    value of ``--option=/path``) by :func:`portable_path`; relative arguments as typed."""
    out = [Path(argv[0]).name] if argv else []
    for arg in argv[1:]:
        opt, eq, value = arg.partition("=") if arg.startswith("-") else ("", "", arg)
        if Path(value).is_absolute():
            value = portable_path(value, anchors)
        out.append(f"{opt}{eq}{value}")
    return out


def working_folder() -> Path | None:
    """The working folder, or None where it was removed while the command ran."""
    try:
        return Path.cwd()
    except OSError:
        return None


@functools.lru_cache(maxsize=1)
def versions() -> dict:
    """tabsim's and its direct dependencies' installed versions (None for one that is not installed)."""
    found = {"tabsim": __version__}  # a copy is returned by provenance(): callers may not change this one
    for name in DEPENDENCIES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def provenance(**extra) -> dict:
    """Versions, the working folder's git commit and dirty flag, the package's own commit (where it is a
    checkout), the command line, ``XLA_FLAGS`` and JAX's other variables that can change a result's numbers
    (``environment``: :func:`tabsim.base.defaults.numeric_environment`), the platform and UTC time, plus
    ``extra``.

    ``git_commit`` is the commit of the folder the run was started in (None outside a git checkout: the
    package's own commit is ``tabsim_commit``, never passed off as the user's); ``tabsim_dirty`` says
    whether the package's code differs from that commit (None where it is no checkout)."""
    cwd = working_folder()
    tabsim_commit = git_commit(PACKAGE, reuse=True)
    return {
        "tabsim_version": __version__,
        "git_commit": git_commit(cwd, reuse=True) if cwd is not None else None,
        "git_dirty": git_dirty(cwd, reuse=True) if cwd is not None else None,
        "tabsim_commit": tabsim_commit,
        "tabsim_dirty": git_dirty(PACKAGE, reuse=True, only_here=True) if tabsim_commit else None,
        "time_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "versions": dict(versions()),
        "backend": jax.default_backend(),
        "xla_flags": defaults.xla_flags(),
        "environment": defaults.numeric_environment(),
        "xla_options_dropped": xla.dropped(),
        "argv": list(sys.argv),
        "platform": platform.platform(),
        **extra,
    }
