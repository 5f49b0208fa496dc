"""What every command shares: the ``--overwrite``/``--resume``/``--pdf`` options, the executor options,
and one-line errors for output problems (an existing ``--out``, a full disk, a read-only target) and
for Ctrl-C."""
from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path

import click

from tabsim.base.host import cpu_count
from tabsim.base.defaults import (DeviceChoice, compilation_cache, device_choice, figure_formats as user_formats,
                                  precision as user_precision)
from tabsim.files.overlap import OverlapError, check_apart
from tabsim.runtime.executors import ExecutorError, check_address
from tabsim.runtime.manifest import ManifestError, check_file

# Nothing heavy at import: every command's options are defined from here, and ``tabsim CMD --help``
# must not pay for JAX, pandas or the config schema.


def fail(msg: str):
    """End the command with ``msg`` as a one-line error."""
    raise click.ClickException(msg)


def give(ctx: click.Context, **options) -> None:
    """Keep a command's parsed options (``device``, ``precision``, ``figure_formats``, ``compilation_cache``)
    in its click context, each resolved at the command (the option, else the user's variable:
    :mod:`tabsim.base.defaults`), for :func:`chosen`: the command passes them as arguments to the calls that
    use them (never ``os.environ``, never a context the library reads)."""
    ctx.meta.update({f"tabsim.{k}": v for k, v in options.items()})


def chosen(name: str):
    """The running command's ``name`` option as :func:`give` kept it (None: not given)."""
    ctx = click.get_current_context(silent=True)
    return ctx.meta.get(f"tabsim.{name}") if ctx is not None else None


def _figure_formats(ctx, param, pdf: bool) -> None:
    # resolved here, at the edge: --pdf, else the user's $TABSIM_FIGURE_FORMATS, else PNG; checked now (a bad
    # variable is refused before anything runs) and passed to the figures as an argument (chosen("figure_formats"))
    if ctx.resilient_parsing:
        return
    from tabsim.plotting.formats import figure_formats  # lazy: the option's callback only; the ground floor, no matplotlib

    try:
        give(ctx, figure_formats=("png", "pdf") if pdf else figure_formats(user_formats()))
    except ValueError as err:
        raise UserDefaultError(f"$TABSIM_FIGURE_FORMATS: {err}") from None


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


class OverlappingOutput(click.ClickException):
    """An ``--out`` that is, holds or lies inside an input of the command: one line, exit code 2."""

    exit_code = 2


def _use_compile_cache() -> Path | bool | None:
    """Apply the command's ``--compile-cache DIR`` (JAX's compilation cache in ``DIR``) or ``--no-compile-cache``
    (none) to this process, passing the folder as an argument; the folder, ``False`` (none) or ``None``
    (neither given: the user's default applies when a run builds its first program,
    :func:`tabsim.runtime.cache.apply_default`)."""
    value = chosen("compilation_cache")
    if value is None:
        return None
    from tabsim.runtime import cache  # lazy: JAX loads when the command computes, not for its --help

    if value == "0":
        cache.disable_compilation_cache()
        return False
    return cache.enable_compilation_cache(value)


def compile_cache_folder() -> Path | None:
    """The compiled programs' folder this command reads (None: off), ``--compile-cache`` first."""
    value = chosen("compilation_cache")
    if value is not None:
        return None if value == "0" else Path(value)
    return compilation_cache()


def check_out(out, reads=()) -> None:
    """Refuse an ``--out`` that names no folder of its own: empty (``--out ''`` reads as the current folder),
    ``.``, ``..`` or a root, which a run cannot be published into (its staging folder would sit beside it
    as ``..staging``); and one that is, holds or lies inside anything the command reads: ``reads`` (pairs of
    what it is and its path) and the compilation cache (:func:`tabsim.files.overlap.check_apart`)."""
    if out is None:
        return
    text = str(out)
    if not text.strip() or Path(text).name in ("", ".", ".."):
        shown = "''" if not text.strip() else repr(text)
        raise click.UsageError(f"--out {shown}: not an output folder; give the name of a folder to publish into "
                               "(created if missing), e.g. --out results/run1")
    try:
        check_apart(out, [*reads, ("compilation cache it reads and writes", compile_cache_folder())])
    except OverlapError as err:
        raise OverlappingOutput(str(err)) from None
    check_inputs(reads)


def check_inputs(reads) -> None:
    """Refuse an input file of ``reads`` (pairs of what it is and its path) that lies in a published run
    folder and differs from what was published there (:func:`tabsim.runtime.manifest.check_file`): a
    run's ``config.json`` edited since, for instance. One line, exit status 1."""
    for _, path in reads:
        if path is not None and Path(path).is_file():
            try:
                check_file(path)
            except (ManifestError, OSError) as err:
                raise click.ClickException(str(err)) from None


@contextlib.contextmanager
def guarded(out: Path, reads=()):
    """Turn output errors, OS errors and Ctrl-C inside the block into one-line messages and exit codes.

    Ctrl-C (SIGINT) exits with 130 after one line saying what was kept; the staging folder's finished
    chunks are what ``--resume`` continues from.
    """
    # lazy: every command imports this module; its `--help` loads no JAX or pyarrow
    from tabsim.config import ConfigError
    from tabsim.plotting.figure_pool import FiguresUnavailable
    from tabsim.runtime.store import OutputError, staging_path

    check_out(out, reads)
    try:
        yield
    except (OutputError, ConfigError, FiguresUnavailable) as err:
        raise click.ClickException(str(err)) from None
    except OSError as err:
        where = err.filename or out
        raise click.ClickException(f"cannot write {where}: {err.strerror or err}; {out} is unchanged") from None
    except KeyboardInterrupt:
        stage = staging_path(out)
        kept = ""
        if stage.is_dir():
            n = len(list((stage / "chunks").glob("*.parquet"))) if (stage / "chunks").is_dir() else 0
            seg = stage / "chunks" / "segments"
            part = len(list(seg.glob("*.npz"))) if seg.is_dir() else 0
            also = f" and {part} chunk(s) saved at their last segment" if part else ""
            kept = (f"; {n} finished chunk(s){also} kept in {stage}: rerun the same command with --resume to "
                    "continue")
        click.echo(f"interrupted: {out} is unchanged{kept}", err=True)
        sys.exit(130)


@contextlib.contextmanager
def open_store(out: Path, *, overwrite: bool, resume: bool, key: str | None, description: str, reads=()):
    """``guarded`` around an open :class:`RunStore`: yields the store, publishes when the block succeeds.
    ``reads``: what the command reads, which ``out`` must stay apart from (:func:`check_out`)."""
    # lazy: every command imports this module; its `--help` loads no JAX or pyarrow
    from tabsim.runtime.store import RunStore

    with guarded(out, reads):
        with RunStore(out, overwrite=overwrite, resume=resume, key=key, description=description) as store:
            yield store



def _oversubscribe(ctx, param, value: bool) -> None:
    # kept in the context (not a parameter of every command): read by check_options and open_executor
    ctx.meta["tabsim.oversubscribe"] = bool(value)


def _oversubscribed() -> bool:
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.meta.get("tabsim.oversubscribe"))


def _dask_timeout(ctx, param, value: int) -> None:
    # kept in the context as --oversubscribe is: read by open_executor (chosen("dask_timeout"))
    ctx.meta["tabsim.dask_timeout"] = value


class DeviceUnavailable(click.ClickException):
    """An unavailable ``--device``: one line, exit code 2 (a usage error), before anything is written."""

    exit_code = 2


def _device(ctx, param, value: str | None) -> str | None:
    # resolved here, at the edge: the option, else the user's $TABSIM_DEVICE, else auto; kept as the command's
    # own choice (a CPU one starts no accelerator, device.pick) and passed as device= where the command
    # computes (ts.run, run_designs, reproduce; the default of the prereg, claims and audit runs). Checked
    # now, so that a device that is not there is refused before anything is written
    if ctx.resilient_parsing:
        return value
    # lazy: the module is light, but checking a device loads JAX, which `--help` never does
    from tabsim.runtime.device import DeviceError, check_choice, check_startable

    name = device_choice(value).name
    try:
        if value is None:  # the environment's: a bad one is named as the variable
            name = check_choice(name, what="$TABSIM_DEVICE")
        choice = DeviceChoice(name, process=True)  # the process's own: a CPU one starts no accelerator
        give(ctx, device=choice)
        check_startable(choice)
    except DeviceError as err:
        raise DeviceUnavailable(str(err) if value is not None or "TABSIM_DEVICE" in str(err)
                                else f"$TABSIM_DEVICE={name}: {err}") from None
    return value


PRECISIONS = ("float32", "float64")


class UserDefaultError(click.ClickException):
    """A user default (an environment variable) that is not a value its option takes: one line, exit code 2."""

    exit_code = 2


def _precision(ctx, param, value: str | None) -> str | None:
    # resolved here, at the edge: the option, else the user's $TABSIM_PRECISION, else float32; passed as
    # precision= where the command computes; each program is traced and run in it
    if not ctx.resilient_parsing:
        name = value or user_precision()
        if name not in PRECISIONS:  # the environment's (the option's choices are checked by click)
            raise UserDefaultError(f"$TABSIM_PRECISION: {name!r} is not a precision; allowed: {', '.join(PRECISIONS)}")
        give(ctx, precision=name)
    return value


def executor_options(fn):
    """Add ``--executor``, ``--workers``, ``--scheduler``, ``--device`` and ``--precision`` to a click command
    (the command passes ``chosen("device")`` and ``chosen("precision")`` to the calls that compute)."""
    fn = click.option("--precision", type=click.Choice(PRECISIONS), default=None,
                      show_default="$TABSIM_PRECISION, else float32",
                      expose_value=False, callback=_precision,
                      help="Floating type of the computed programs: float64 runs each in double precision "
                           "(its cost: docs/performance.md); every matrix product is at full precision either way.")(fn)
    fn = click.option("--device", type=click.Choice(["auto", "cpu", "gpu"], case_sensitive=False), default=None,
                      show_default="$TABSIM_DEVICE, else auto", expose_value=False, callback=_device,
                      help="Where the programs compute: the CPU, a GPU, or auto (a GPU only for a study large "
                           "enough to repay its start-up and compile time; the reference study stays on the CPU).")(fn)
    fn = click.option("--scheduler", metavar="tcp://HOST:PORT", default=None,
                      help="With --executor dask: run on the existing Dask cluster of this scheduler (left "
                           "running afterwards).")(fn)
    fn = click.option("--dask-timeout", type=click.IntRange(1, 3600), default=30, show_default=True,
                      metavar="SECONDS", expose_value=False, callback=_dask_timeout,
                      help="With --executor dask: the longest the scheduler is waited for, to connect, to answer "
                           "during the run and to close; one that does not answer ends the run in one line "
                           "(finished chunks are kept for --resume).")(fn)
    fn = click.option("--oversubscribe", is_flag=True, expose_value=False, callback=_oversubscribe,
                      help="With --workers N: start N workers even when N is more than the cores (by default a "
                           "local cluster is capped at the cores).")(fn)
    fn = click.option("--workers", type=int, default=None, metavar="N",
                      help="With --executor dask: start a local cluster of N single-threaded worker processes "
                           "(default: one per CPU core; at most one per core unless --oversubscribe).")(fn)
    fn = click.option("--executor", "executor", type=click.Choice(["local", "dask"]), default="local",
                      show_default=True,
                      help="Where chunks run: in this process, or on a Dask cluster (results are the same).")(fn)
    return fn


MAX_WORKERS_PER_CORE = 4  # with --oversubscribe; without it a local cluster is capped at one per core


class MissingExtra(click.ClickException):
    """An option whose packages are an extra that is not installed: one line naming it, exit code 2."""

    exit_code = 2


def _installed(*modules: str) -> bool:
    """Whether ``modules`` can be imported, without importing them."""
    try:
        return all(importlib.util.find_spec(m) is not None for m in modules)
    except (ImportError, ValueError):
        return False


def check_options(executor: str, workers: int | None, scheduler: str | None) -> None:
    """Refuse bad combinations of the executor options with a :class:`click.UsageError` naming the option."""
    if executor == "dask" and not _installed("dask", "distributed"):
        raise MissingExtra("--executor dask: Dask is not installed; it comes with the dask extra: "
                           "pip install \"tabsim[dask]\" (or pip install -e \".[dask]\" in a checkout)")
    if workers is not None and workers < 1:
        raise click.UsageError(f"--workers: {workers} is not a number of workers (a whole number >= 1)")
    if _oversubscribed() and workers is None:
        raise click.UsageError("--oversubscribe: needs --executor dask --workers N (it lets N exceed the cores)")
    if _oversubscribed() and workers > MAX_WORKERS_PER_CORE * cpu_count():
        # each worker is a process holding JAX (about 0.4 GB); a million of them was tried, one by one
        raise click.UsageError(f"--workers {workers} --oversubscribe: at most {MAX_WORKERS_PER_CORE * cpu_count()} "
                               f"workers on this machine ({MAX_WORKERS_PER_CORE} per core, {cpu_count()} core(s); "
                               "each is a process holding JAX, about 0.4 GB); ask for fewer")
    if executor != "dask":
        used = [f"--{n} {v}" for n, v in (("workers", workers), ("scheduler", scheduler)) if v is not None]
        if used:
            raise click.UsageError(f"{used[0]}: needs --executor dask (the local executor runs in this process)")
        return
    if workers is not None and scheduler is not None:
        raise click.UsageError("--workers and --scheduler: choose one (start a local cluster of N workers, or use "
                               "the cluster at the scheduler address)")
    if scheduler is not None:
        try:
            check_address(scheduler)
        except ValueError as err:
            raise click.UsageError(str(err)) from None


@contextlib.contextmanager
def open_executor(executor: str, workers: int | None = None, scheduler: str | None = None, *, quiet: bool = False):
    """The executor chosen on the command line, as a context (None for local); closes what it started.

    A scheduler address is connected to at once (a wrong address fails before anything is written); a
    local cluster starts when the first chunk is about to run (an output folder that is refused costs no
    cluster start). An :class:`ExecutorError`, or a run refused because a chunk cannot fit a worker
    (:func:`cap_chunk`), becomes a one-line :class:`click.ClickException`. The command's ``--compile-cache``
    or ``--no-compile-cache`` is applied here, before anything compiles, and given to the Dask workers.
    """
    # lazy: every command imports this module; its `--help` loads no JAX or pyarrow
    from tabsim.config import ConfigError

    check_options(executor, workers, scheduler)
    folder = _use_compile_cache()
    if executor != "dask":
        yield None
        return
    try:
        from tabsim.runtime.dask import DaskExecutor  # lazy: loads distributed's client, only when asked for
    except ImportError as err:  # installed (check_options found it) but broken
        raise MissingExtra(f"--executor dask: {err}") from None

    timeout = {"timeout": chosen("dask_timeout")} if chosen("dask_timeout") else {}  # else the library's
    ex = DaskExecutor(workers, scheduler=scheduler, announce=not quiet, oversubscribe=_oversubscribed(),
                      compile_cache=folder, **timeout)
    try:
        if scheduler is not None:
            ex.start()
        yield ex
    except (ExecutorError, ConfigError) as err:
        raise click.ClickException(str(err)) from None
    finally:
        ex.close()
