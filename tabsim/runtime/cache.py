"""JAX's on-disk compilation cache, on by default in the user's cache folder.

A new process running a config of a static structure seen before loads the compiled program from disk
instead of compiling it (about 0.4-1 s of XLA time per program). Where it lives:

* ``TABSIM_COMPILATION_CACHE=DIR``: in ``DIR``;
* ``TABSIM_COMPILATION_CACHE=0`` (or ``off``, ``no``, ``false``, ``none``): no cache;
* otherwise ``$TABSIM_CACHE/jax``, else ``$XDG_CACHE_HOME/tabsim/jax``, else
  ``~/.cache/tabsim/jax``;
* ``tabsim --compile-cache DIR`` / ``tabsim --no-compile-cache`` give a folder, or none: the command
  passes it to :func:`enable_compilation_cache` / :func:`disable_compilation_cache` before it compiles
  (the environment is not changed); in Python, call them yourself.

A folder the user configured for JAX itself (``JAX_COMPILATION_CACHE_DIR``, or
``jax.config.update("jax_compilation_cache_dir", ...)``) is left as it is. The cache
is applied when a run builds its first program (:func:`tabsim.runtime.run.compiled_train`), never by
importing a module: importing tabsim changes no process-wide JAX setting (a test checks every module).

It is safe under concurrent processes: the cache is bounded (:data:`MAX_BYTES`, least recently used
programs evicted), which makes JAX take a file lock around every read and write of an entry, so a
process never reads another's half-written program. Results are the same bits with or without it.

The same folder keeps what tabsim learns alongside the compiled programs: the traced programs
(:mod:`tabsim.runtime.executables`, ``tabsim-programs/``) and the XLA options the running jaxlib
accepts (:mod:`tabsim.base.xla`, ``xla-options.json``). Everything read from it must be a small regular file
(opened without blocking); anything else counts as absent. An explicit ``TABSIM_COMPILATION_CACHE``
that cannot be used prints one line, ``tabsim: TABSIM_COMPILATION_CACHE ignored (...)``, and the
command runs without the cache.
"""
from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

from tabsim.base import xla
from tabsim.base import defaults

ENV, OFF = defaults.COMPILATION_CACHE, defaults.OFF
# The file names of JAX's bounded cache (a program ``KEY-cache`` and its last-use record ``KEY-atime``);
# read as files on disk, not from JAX's private modules. A JAX that names them otherwise finds nothing here.
CACHE_SUFFIX, ATIME_SUFFIX = "-cache", "-atime"
MAX_BYTES = 2 * 1024**3  # least recently used programs are evicted beyond this (a program is 0.1-2 MB)
ANSWERS_MAX_BYTES = 1 << 16  # xla-options.json: a few lines per jaxlib version

_applied = False


def default_compilation_cache() -> Path | None:
    """The folder the cache uses by default (``None``: switched off): the environment's
    (:func:`tabsim.base.defaults.compilation_cache`)."""
    return defaults.compilation_cache()


def check_folder(path: str | Path) -> Path:
    """``path`` created if needed; a :class:`ValueError` naming it if it cannot be a cache folder."""
    path = Path(path).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"compilation cache: cannot create folder {str(path)!r}: {e.strerror}") from None
    if not path.is_dir():
        raise ValueError(f"compilation cache: {str(path)!r} is not a folder")
    if not os.access(path, os.W_OK | os.X_OK):
        raise ValueError(f"compilation cache: folder {str(path)!r} is not writable")
    return path


def enable_compilation_cache(path: str | Path) -> Path:
    """Keep compiled programs on disk in ``path`` (JAX's persistent compilation cache), so a new
    process running a config of the same static structure skips XLA compilation.

    Every program is cached, however short its compilation (JAX's own threshold is 1 s; tabsim's
    programs take 0.3-1 s). Results are the same with or without the cache, so a program the cache
    cannot store (a full disk, a file-size limit) costs only its next compilation: JAX's warning
    about it is silenced, and a command on a full disk says one line about its own output.
    """
    # lazy: `tabsim --help` imports this module (the group's options); JAX loads on use
    import jax

    global _applied
    path = check_folder(path)
    _applied = True  # the caller's folder: a run's default does not replace it
    _add_missing_atimes(path)
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    jax.config.update("jax_compilation_cache_max_size", MAX_BYTES)
    warnings.filterwarnings("ignore", message="Error writing persistent compilation cache entry")
    _reset_jax_cache()
    return path


def _add_missing_atimes(path: Path) -> None:
    """Give every program in ``path`` the last-use record JAX's bounded cache reads before each write (jax
    0.10.2 and JAX's main branch): in a folder written without a size bound JAX would write no new program
    (silently: its warning is silenced above). The record is the program file's modification time."""
    try:
        for entry in path.glob(f"*{CACHE_SUFFIX}"):
            atime = path / (entry.name.removesuffix(CACHE_SUFFIX) + ATIME_SUFFIX)
            if not atime.exists():
                atime.write_bytes(entry.stat().st_mtime_ns.to_bytes(8, "little"))
    except OSError:  # a folder we cannot fix: programs are compiled anew, as without a cache
        pass


def disable_compilation_cache() -> None:
    """Compile every program anew in this process (no on-disk cache)."""
    # lazy: `tabsim --help` imports this module (the group's options); JAX loads on use
    import jax

    global _applied
    _applied = True  # as enable_compilation_cache
    jax.config.update("jax_compilation_cache_dir", None)
    _reset_jax_cache()


def _reset_jax_cache() -> None:
    """JAX opens its cache once, on the first compilation, and no setting reopens it (jax 0.10.2 and JAX's
    main branch): a later folder, or none, needs a reset."""
    try:
        # lazy: `tabsim --help` imports this module (the group's options); JAX loads on use
        from jax.experimental.compilation_cache import compilation_cache

        compilation_cache.reset_cache()
    except (ImportError, AttributeError):  # pragma: no cover - another JAX: the folder applies if not yet open
        pass


def apply_default() -> Path | None:
    """Enable the default cache once per process (see the module docstring); the folder, or ``None``.

    A default folder that cannot be used (a read-only home) leaves the cache off without a word; an
    explicit ``TABSIM_COMPILATION_CACHE`` that cannot be used is said in one line on stderr."""
    import jax  # lazy: as above

    global _applied
    if _applied:
        return None
    _applied = True
    if jax.config.jax_compilation_cache_dir:  # the user's, for JAX itself ($JAX_COMPILATION_CACHE_DIR or Python)
        return None
    path = default_compilation_cache()
    if path is None:
        return None
    try:
        return enable_compilation_cache(path)
    except ValueError as err:
        if defaults.compilation_cache_setting():
            print(f"tabsim: {ENV} ignored ({err}); programs are compiled anew in this process",
                  file=sys.stderr, flush=True)
        return None


def current_folder() -> Path | None:
    """The compilation cache folder this process uses (``None``: the cache is off)."""
    # lazy: `tabsim --help` imports this module (the group's options); JAX loads on use
    import jax

    where = jax.config.jax_compilation_cache_dir
    return Path(where) if where and jax.config.jax_enable_compilation_cache else None


def read_answers() -> dict:
    """The XLA option answers kept in the cache folder (:data:`tabsim.base.xla.FILE`): ``{}`` where there
    are none, or the file is not a small regular JSON file of answers (read without blocking)."""
    where = current_folder()
    if where is None:
        return {}
    # lazy: as above (the safe loader is read only when a program is built)
    from tabsim.files.safeload import LoadError, load_json

    try:
        data = load_json(where / xla.FILE, max_bytes=ANSWERS_MAX_BYTES, what="XLA options file")
    except LoadError:
        return {}
    return {k: v for k, v in data.items() if isinstance(v, bool)} if isinstance(data, dict) else {}


def write_answers(answers: dict) -> None:
    """Keep ``answers`` in the cache folder (atomically); nothing where the cache is off or unwritable."""
    where = current_folder()
    if where is None:
        return
    from tabsim.files.atomic import write_json  # lazy: as above (it loads pandas)

    try:
        write_json(where / xla.FILE, answers)
    except OSError:
        pass


xla.keep_answers(read_answers, write_answers)  # beside the compiled programs, whichever folder is used
