"""The user's defaults: every environment variable tabsim reads, read here and nowhere else, never written.

A library call takes its options as arguments (``ts.run(device=..., precision=...)``,
``reproduce(..., formats=...)``); an argument left out falls back to the variable below, then to the
built-in default. A command parses its options (``--device``, ``--precision``, ``--pdf``,
``--compile-cache``) and resolves each once, at the command, through the functions here (its option, else
the variable, else the default), then passes the value as an argument to the calls that use it: nothing
below the commands reads a command's options from a context. The device is resolved so once, where a run
starts (:func:`device_choice`: ``ts.run``, ``ts.run_factorial``, ``reproduce``; a command builds its
``DeviceChoice(name, process=True)`` itself), into a :class:`DeviceChoice` handed down as an argument; the
planner and the compute stage read neither the command's options nor the environment.

=============================  ==========================================================  ===============
variable                       what it sets                                                default
=============================  ==========================================================  ===============
``TABSIM_DEVICE``              where programs compute: ``auto``, ``cpu`` or ``gpu``        ``auto``
``TABSIM_PRECISION``           floating type of the programs: ``float32``, ``float64``     ``float32``
``TABSIM_FIGURE_FORMATS``      figure files, comma-separated: ``png``, ``pdf``, ``svg``    ``png``
``TABSIM_COMPILATION_CACHE``   compiled programs' folder; ``0``/``off``: none              see below
``TABSIM_CACHE``               tabsim's cache folder (compiled programs in ``jax/``)       ``$XDG_CACHE_HOME/tabsim``
``TABSIM_THREADS``             chunks computed at a time in this process                   the cores
``TABSIM_EXECUTABLE_CACHE``    ``0``/``off``: keep no traced programs beside the cache     on
``TABSIM_FIGURE_PROCESS``      ``0``/``off``: draw figures in the command's own process    on
``TABSIM_XLA_DEFAULTS``        ``0``: compile with XLA's defaults (no tuned options)       tuned
``TABSIM_PREREG_PUBKEY``       the pinned public key of ``tabsim prereg verify``           none
=============================  ==========================================================  ===============

JAX's own variables (``JAX_PLATFORMS``, ``JAX_COMPILATION_CACHE_DIR``, ``XLA_FLAGS``) and MLflow's
``MLFLOW_TRACKING_URI`` are read here too, to respect what the user set for them, and are never changed
by tabsim's own process. Two child processes set variables for themselves only, before their libraries
load (:func:`set_in_this_process`): the figure server (its thread pools) and a Dask worker (the client's
``XLA_FLAGS``); and MLflow's ``MLFLOW_ALLOW_FILE_STORE``, which MLflow 3 reads from the environment only, is
set around a ``--track mlflow`` write to a local file store and restored after it
(:func:`tabsim.runtime.mlflow_io.file_store`), as are ``MLFLOW_HTTP_REQUEST_TIMEOUT`` and
``MLFLOW_HTTP_REQUEST_MAX_RETRIES`` where the user set neither (:func:`tabsim.runtime.mlflow_io.bounded`; both
through :func:`while_unset`), in the MLflow writer process (:mod:`tabsim.runtime.writer_process`), which takes
the run's ``MLFLOW_*`` variables when a tracker opens (:func:`with_prefix`).

This module is the only one of tabsim that reads or writes the environment (a test checks it); it sits on
the ground floor, so every floor reads its options from here. It was ``tabsim.files.defaults``, which
still imports, with a DeprecationWarning.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
from pathlib import Path

DEVICE, PRECISION, FIGURE_FORMATS = "TABSIM_DEVICE", "TABSIM_PRECISION", "TABSIM_FIGURE_FORMATS"
COMPILATION_CACHE, CACHE, THREADS = "TABSIM_COMPILATION_CACHE", "TABSIM_CACHE", "TABSIM_THREADS"
EXECUTABLE_CACHE = "TABSIM_EXECUTABLE_CACHE"
OFF = ("0", "off", "no", "false", "none")

def _env(name: str) -> str:
    return os.environ.get(name, "").strip()


def device(choice: str | None = None) -> str:
    """``choice``, else ``$TABSIM_DEVICE``, else ``auto`` (unchecked)."""
    return choice or _env(DEVICE) or "auto"


@dataclasses.dataclass(frozen=True)
class DeviceChoice:
    """A device option resolved once, where a run starts (:func:`device_choice`), and passed down as an
    argument: ``name`` (``auto``, ``cpu`` or ``gpu``; checked by :func:`tabsim.runtime.device.check_choice`)
    and ``process``: whether it is the process's own choice (a command's ``--device``, which the command
    passes as ``DeviceChoice(name, process=True)``, or ``$TABSIM_DEVICE``; not a library call's argument), so
    that a CPU choice keeps JAX from starting an accelerator at all."""

    name: str = "auto"
    process: bool = False


def device_choice(argument: "str | DeviceChoice | None" = None) -> DeviceChoice:
    """The device option of a run, resolved: ``argument`` (a :class:`DeviceChoice` is already resolved: a
    command's ``--device`` arrives so), else ``$TABSIM_DEVICE`` (the process's own choice), else ``auto``.
    The entry points (``ts.run``, ``ts.run_factorial``, ``reproduce``) call this once; the runtime below
    them reads neither the command's options nor the environment."""
    if isinstance(argument, DeviceChoice):
        return argument
    return DeviceChoice(device(argument), argument is None and bool(_env(DEVICE)))


def precision(value: str | None = None) -> str:
    """``value``, else ``$TABSIM_PRECISION``, else ``float32`` (unchecked)."""
    return value or _env(PRECISION) or "float32"


def figure_formats() -> list[str]:
    """``$TABSIM_FIGURE_FORMATS`` split at commas, else PNG (unchecked: :mod:`tabsim.plotting.formats`)."""
    return [f for f in _env(FIGURE_FORMATS).split(",") if f.strip()] or ["png"]


def compilation_cache_setting() -> str:
    """``$TABSIM_COMPILATION_CACHE`` (a folder, or ``0`` for none; ``""``: not set). A command's
    ``--compile-cache``/``--no-compile-cache`` is applied by the command itself
    (:func:`tabsim.runtime.cache.enable_compilation_cache`)."""
    return _env(COMPILATION_CACHE)


def compilation_cache() -> Path | None:
    """The compiled programs' folder (``None``: switched off): :func:`compilation_cache_setting`, else
    ``$TABSIM_CACHE/jax``, else ``$XDG_CACHE_HOME/tabsim/jax``, else ``~/.cache/tabsim/jax``."""
    value = compilation_cache_setting()
    if value.lower() in OFF:
        return None
    if value:
        return Path(value).expanduser()
    return cache_home() / "jax"


def cache_home() -> Path:
    """tabsim's cache folder: ``$TABSIM_CACHE``, else ``$XDG_CACHE_HOME/tabsim``, else ``~/.cache/tabsim``."""
    if _env(CACHE):
        return Path(_env(CACHE)).expanduser()
    return Path(_env("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "tabsim"


def threads() -> str:
    """``$TABSIM_THREADS`` as given (``""``: not set; checked where it is used)."""
    return _env(THREADS)


def executable_cache_setting() -> str:
    """``$TABSIM_EXECUTABLE_CACHE`` as given (``0``/``off``: no traced programs kept; ``""``: not set)."""
    return _env(EXECUTABLE_CACHE)


def figure_process_setting() -> str:
    """``$TABSIM_FIGURE_PROCESS`` as given (``0``/``off``: figures are drawn in this process; ``""``: not set)."""
    return _env("TABSIM_FIGURE_PROCESS")


def mlflow_tracking_uri() -> str:
    """``$MLFLOW_TRACKING_URI`` (``""``: not set): where an MLflow tracker writes by default."""
    return _env("MLFLOW_TRACKING_URI")


def jax_platforms() -> str:
    """``$JAX_PLATFORMS``: the platforms the user asked JAX for (``""``: JAX's choice)."""
    return _env("JAX_PLATFORMS")


def xla_flags() -> str:
    """``$XLA_FLAGS`` as this process started with them (they decide the bits a program computes)."""
    return os.environ.get("XLA_FLAGS", "")


# JAX's variables that can change the numbers a program computes (JAX reads them when it loads; tabsim
# neutralises what it can per program, e.g. JAX_ENABLE_X64 by tabsim.base.precision, and records them all)
NUMERIC_JAX = ("JAX_ENABLE_X64", "JAX_DEFAULT_DTYPE_BITS", "JAX_DEFAULT_MATMUL_PRECISION", "JAX_DEFAULT_PRNG_IMPL",
               "JAX_THREEFRY_PARTITIONABLE", "JAX_NUMPY_DTYPE_PROMOTION", "JAX_NUMPY_RANK_PROMOTION",
               "JAX_DISABLE_JIT", "JAX_PLATFORMS", "JAX_PLATFORM_NAME", "XLA_FLAGS")


def numeric_environment() -> dict[str, str]:
    """The variables of :data:`NUMERIC_JAX` that are set in this process, as they are set."""
    return {name: os.environ[name] for name in NUMERIC_JAX if name in os.environ}


def xla_defaults_setting() -> str:
    """``$TABSIM_XLA_DEFAULTS`` as given (``0``: programs compile with XLA's defaults; ``""``: not set)."""
    return _env("TABSIM_XLA_DEFAULTS")


def prereg_pubkey() -> str:
    """``$TABSIM_PREREG_PUBKEY`` (``""``: not set): the public key ``tabsim prereg verify`` pins by default."""
    return _env("TABSIM_PREREG_PUBKEY")


def with_prefix(prefixes: tuple[str, ...]) -> dict[str, str]:
    """The variables of this process whose names start with one of ``prefixes`` (``{}`` for none)."""
    return {k: v for k, v in os.environ.items() if k.startswith(prefixes)} if prefixes else {}


def set_in_this_process(values: dict[str, str], *, replacing: tuple[str, ...] = ()) -> None:
    """Set ``values`` in this process's environment, first removing the variables that start with one of
    ``replacing``. Only a child process of tabsim's own (the figure server, a Dask worker, the MLflow
    writer) calls this, for itself, before the libraries that read the variables load."""
    for name in [k for k in os.environ if replacing and k.startswith(replacing)]:
        del os.environ[name]
    os.environ.update(values)


@contextlib.contextmanager
def while_unset(values: dict[str, str]):
    """Within the block, set those of ``values`` that this process has not set; removed again after it (a
    variable the user set is left as set)."""
    ours = {k: v for k, v in values.items() if k not in os.environ}
    os.environ.update(ours)
    try:
        yield
    finally:
        for k in ours:
            os.environ.pop(k, None)
