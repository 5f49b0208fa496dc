"""Figures drawn by a pool of processes, off the critical path of a command.

Loading matplotlib and laying out a text-heavy figure costs about 0.5 s per figure on a laptop core.
:class:`FigurePool` is a :class:`concurrent.futures.ProcessPoolExecutor` on :mod:`multiprocessing`'s fork
server: the server starts when the command begins, loads the plotting stack
(:mod:`tabsim.plotting.figure_server`: no native thread pools, matplotlib, one warm-up figure) while the
engine trains, and each worker is forked from it ready to draw, while the command goes on with its
statistics and tables. :meth:`FigurePool.wait` returns the written paths, so a command publishes its
output only after every figure is on disk.

A job names a module-level function (``"module:function"``) that takes plain picklable data (frames,
numbers, dataclasses) and returns a matplotlib figure; it is saved with
:func:`tabsim.plotting.figures.save_figure` in the formats given. Where no pool can be started
(``TABSIM_FIGURE_PROCESS=0``, no fork server on this platform) :func:`open_figures` returns a
:class:`LocalFigures`, which draws in this process with the same interface.

Faults of the pool never cost the command its results: a worker that was killed, that is stopped
(``SIGSTOP``), or a pool that cannot start a worker (the working folder was removed) leaves its figures
to this process, which draws them in :meth:`FigurePool.wait` after one note on stderr. A matplotlib
that cannot be imported raises :class:`FiguresUnavailable`, one line naming ``--no-figure``.

Ctrl-C, which a terminal sends to every process of the command, is the command's alone: the server and
its workers ignore it (and start with it blocked), and the command ends the pool. The console script
ends the server and multiprocessing's resource tracker as it exits (:func:`stop_helpers`), so that no
process outlives the command.
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import functools
import importlib
import io
import multiprocessing
import multiprocessing.context
import multiprocessing.spawn
import os
import queue
import signal
import sys
import threading
import time
from pathlib import Path

from tabsim.base.host import cpu_count, stopped
from tabsim.base import defaults
from tabsim.plotting.formats import figure_formats

SERVER = "tabsim.plotting.figure_server"
# a safety net only: a pool that finishes no figure for this long is given up and this process draws
STALL_SECONDS = 600.0
_POLL = 0.2  # how often a waiting command looks for a stopped worker
_KILL_WAIT = 5.0  # a safety net only: a killed worker is gone within milliseconds


class FigureError(RuntimeError):
    """A figure could not be drawn or written; the message carries the drawing process's traceback."""


class FiguresUnavailable(FigureError):
    """matplotlib cannot be imported, so no figure can be drawn (the message names ``--no-figure``)."""


def draw(target: str, args: tuple, kwargs: dict, stem: str, formats: tuple[str, ...]) -> list[str]:
    """``target(*args, **kwargs)`` saved as ``stem.<format>`` for each format; the written paths."""
    try:
        # lazy: matplotlib loads where figures are drawn, never in the command's process when a pool draws
        import matplotlib
        import matplotlib.pyplot  # noqa: F401

        from tabsim.plotting.figures import SAVE_DPI, save_figure  # lazy: as above
    except Exception as err:  # noqa: BLE001 - any failure of the import means no figure can be drawn
        why = f"{type(err).__name__}: {err}".splitlines()[0]
        raise FiguresUnavailable(f"figures cannot be drawn: matplotlib failed to import ({why}); rerun with "
                                 "--no-figure to write everything else (add --resume to reuse the trained "
                                 "chunks)") from None
    module, _, name = target.partition(":")
    # laid out at the resolution it is written at: the text is measured once for the layout and the file
    # (laid out at another, every label is measured again when the file is written: a sixth of the time)
    with matplotlib.rc_context({"figure.dpi": SAVE_DPI}):
        fig = getattr(importlib.import_module(module), name)(*args, **kwargs)
    return [str(p) for p in save_figure(fig, stem, formats)]


class LocalFigures:
    """Draws each submitted figure at once, in this process (the fallback of :func:`open_figures`)."""

    def __init__(self):
        self._written: list[str] = []

    def submit(self, target: str, *args, stem: str | Path, formats=None, **kwargs) -> None:
        self._written += draw(target, args, kwargs, str(stem), figure_formats(formats))

    def wait(self) -> list[str]:
        return list(self._written)

    def close(self, kill: bool = False) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


WORKER_NAME = "tabsim-figures"  # the pool's processes are named ``tabsim-figures-Process-N``


def _main_left_alone(get_preparation_data):
    """``multiprocessing.spawn.get_preparation_data`` that, for this pool's processes only, leaves out the
    caller's main module. Otherwise each worker runs the script that started the command again (a user's
    script without an ``if __name__ == "__main__":`` guard ran its work a second time in the worker, which
    then died); the jobs name their functions by module, so a worker needs nothing of ``__main__``."""
    @functools.wraps(get_preparation_data)
    def prepare(name):
        data = get_preparation_data(name)
        if isinstance(name, str) and name.startswith(WORKER_NAME):
            data.pop("init_main_from_path", None)
            data.pop("init_main_from_name", None)
        return data

    prepare.tabsim_leaves_main = True
    return prepare


if not getattr(multiprocessing.spawn.get_preparation_data, "tabsim_leaves_main", False):
    multiprocessing.spawn.get_preparation_data = _main_left_alone(multiprocessing.spawn.get_preparation_data)


if hasattr(multiprocessing.context, "ForkServerContext"):  # POSIX
    class _Process(multiprocessing.context.ForkServerProcess):
        """A fork server's process named for :func:`_main_left_alone`."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.name = f"{WORKER_NAME}-{self.name}"

    class _Context(multiprocessing.context.ForkServerContext):
        Process = _Process


def _context():
    """The fork server's context with :class:`_Process` (ValueError where there is no fork server)."""
    multiprocessing.get_context("forkserver")  # ValueError where there is none
    return _Context()


_QUIET = {signal.SIGINT, signal.SIGTERM}  # blocked while a helper process starts (it inherits the mask)


@contextlib.contextmanager
def _quiet_start():
    """Ctrl-C and SIGTERM held back in this thread while the block starts a process: the fork server (started
    by :func:`prestart` or by the pool's first worker) then starts with them blocked until it ignores Ctrl-C
    (:mod:`tabsim.plotting.figure_server`), so a Ctrl-C during its start prints no traceback from it. A signal
    that arrives meanwhile is delivered when the block ends. The resource tracker is started first: it
    blocks the same signals while it starts, then unblocks them, which would open them again here."""
    from multiprocessing import resource_tracker  # lazy: POSIX only

    resource_tracker.ensure_running()
    before = signal.pthread_sigmask(signal.SIG_BLOCK, _QUIET)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _exit_with_parent() -> None:
    """In a worker: end when the command ends, even killed (its pipes stay open in the other workers); and
    leave Ctrl-C to the command (it ends the pool), as the fork server does."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch():
        multiprocessing.parent_process().join()
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="tabsim-parent-watch").start()


class FigurePool:
    """Figures drawn by a process pool on the fork server (see the module docstring); use :func:`open_figures`.

    Jobs are handed to the pool by a thread of this process (the command never waits for a worker to
    start); up to ``parallel`` figures are drawn at once; :meth:`wait` returns the paths in submission
    order. ``note``: where the one line goes when this process draws instead (default stderr).
    """

    def __init__(self, extra_imports: tuple[str, ...] = (), parallel: int | None = None, note=None):
        ctx = _context()
        ctx.set_forkserver_preload(_preload(extra_imports))
        self._executor = cf.ProcessPoolExecutor(parallel or cpu_count(), mp_context=ctx,
                                                initializer=_exit_with_parent)
        self._note = note or (lambda line: print(f"note: {line}", file=sys.stderr, flush=True))
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._args: list[tuple] = []
        self._futures: dict[int, cf.Future] = {}
        self._unsent: dict[int, BaseException] = {}
        self.processes: set = set()  # the workers (multiprocessing.Process), as they start
        self._closed = False
        self._sender = threading.Thread(target=self._forward, daemon=True, name="tabsim-figures")
        self._sender.start()
        self._jobs.put((-1, None))  # a first worker now: the server loads the plotting stack during training

    @property
    def pids(self) -> set[int]:
        return {p.pid for p in self.processes}

    def _forward(self) -> None:
        while (job := self._jobs.get()) is not None:
            i, args = job
            before = set(multiprocessing.active_children())
            try:
                with _quiet_start():  # it may start the fork server, where no prestart did
                    self._futures[i] = self._executor.submit(*((os.getpid,) if args is None else (draw, *args)))
            except Exception as err:  # noqa: BLE001 - a broken pool, a removed working folder: drawn here
                self._unsent[i] = err
            self.processes |= set(multiprocessing.active_children()) - before

    def submit(self, target: str, *args, stem: str | Path, formats=None, **kwargs) -> None:
        """Queue one figure: ``target(*args, **kwargs)`` drawn and saved as ``stem.<format>``."""
        job = (target, args, kwargs, str(stem), figure_formats(formats))
        self._jobs.put((len(self._args), job))
        self._args.append(job)

    def _settle(self) -> str | None:
        """Wait until every job is answered; or why this process should draw what is left."""
        last, n_last = time.monotonic(), -1
        while True:
            self._sender.join(_POLL)
            futures = [f for i, f in self._futures.items() if i >= 0]
            if not self._sender.is_alive():
                cf.wait(futures, timeout=_POLL)  # returns as soon as every figure is written
                if all(f.done() for f in futures):
                    return None
            if any(stopped(p) for p in self.pids):
                return "a figure process is stopped"
            n_done = sum(f.done() for f in futures)
            if n_done != n_last:
                last, n_last = time.monotonic(), n_done
            elif time.monotonic() - last > STALL_SECONDS:
                return f"no figure was written in {STALL_SECONDS:.0f} s"

    def _outcome(self, i: int, stem: str, stuck: str | None) -> tuple[list[str] | None, str]:
        """The written paths of job ``i``, or None and why this process draws it."""
        fut = self._futures.get(i)
        if fut is None:
            err = self._unsent.get(i)
            return None, f"no figure process could start ({type(err).__name__}: {str(err).strip().splitlines()[0]})"
        if not fut.done():
            return None, stuck or "a figure process did not answer"
        err = fut.exception()
        if err is None:
            return fut.result(), ""
        if isinstance(err, cf.BrokenExecutor):
            return None, "a figure process ended before its figure was written"
        if isinstance(err, (FiguresUnavailable, OSError)):  # a full disk, a read-only folder: the command's own
            raise err from None
        raise FigureError(f"figure {stem} failed in the figure process:{err.__cause__ or ''}\n"
                          f"{type(err).__name__}: {err}")

    def wait(self) -> list[str]:
        """Wait for every submitted figure; the written paths in submission order."""
        self._jobs.put(None)
        kill = True  # unless every job was answered: a Ctrl-C while waiting ends the pool at once
        try:
            stuck, written, said = self._settle(), [], False
            kill = bool(stuck)  # answered (a figure's error included): the workers end as they do after success
            for i, job in enumerate(self._args):
                paths, why = self._outcome(i, job[3], stuck)
                if paths is None:
                    if not said:
                        self._note(f"{why}; drawing the figures in this process")
                        said = True
                    paths = draw(*job)
                written += paths
        finally:
            self.close(kill=kill)
        return written

    def close(self, kill: bool = False) -> None:
        """End the pool (``kill``: at once, even while drawing or stopped); a pool already ended stays so.

        Workers that answered are let exit rather than killed: a killed worker of the fork server can leave
        multiprocessing's resource tracker warning about semaphores on stderr when the command exits."""
        if self._closed:
            return
        self._closed = True
        self._jobs.put(None)
        if not kill:
            self._executor.shutdown(wait=True)
            return
        for proc in list(self.processes):
            try:
                proc.kill()  # a stopped process too
            except (OSError, ValueError):
                pass
        for proc in list(self.processes):  # gone before the command goes on (none outlives it)
            try:
                proc.join(_KILL_WAIT)
            except (OSError, ValueError, AssertionError):
                pass
        if not self._sender.is_alive():  # else it waits on the fork server, holding the pool's lock
            self._executor.shutdown(wait=False, cancel_futures=True)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        self.close(kill=exc_type is not None)  # an error or Ctrl-C in the command: its figures are not wanted


def _preload(extra_imports: tuple[str, ...]) -> list[str]:
    """What the fork server imports before its first job: the plotting stack, then tabsim's own figure modules
    among ``extra_imports`` (they start no thread; another module is imported where it draws)."""
    return [SERVER, *(m for m in extra_imports if m.split(".")[0] == "tabsim")]


def _in_process() -> bool:
    """Figures are drawn in this process (``TABSIM_FIGURE_PROCESS=0``)."""
    return defaults.figure_process_setting().lower() in ("0", "false", "no", "off")


def prestart(extra_imports: tuple[str, ...] = ()) -> None:
    """Start the fork server now, so that it loads the plotting stack (about a second of CPU) on another
    core while the command loads its own modules, rather than beside the training; a later
    :func:`open_figures` with the same ``extra_imports`` forks its workers from it. A command calls this
    first thing when it will draw. Nothing is started where figures are drawn in this process, and a
    server that cannot start is left to :func:`open_figures` (which then draws here)."""
    if _in_process():
        return
    try:
        _context().set_forkserver_preload(_preload(extra_imports))
        from multiprocessing import forkserver  # lazy: POSIX only (_context refuses elsewhere first)

        with _quiet_start():
            forkserver.ensure_running()
    except (OSError, ValueError):
        pass


def stop_helpers() -> None:
    """End :mod:`multiprocessing`'s helper processes that this process started, the fork server and the
    resource tracker, and wait until they have exited: the console script calls this as the command ends,
    after its exit handlers (which release the pool's semaphores), so that no process outlives the command.
    Each is stopped the standard library's own way (3.8+: its pipe closed, the process waited for); one
    that was never started, or is gone, is left alone; a later pool starts them again."""
    # lazy: POSIX only, and loaded only where a pool ran
    from multiprocessing import forkserver, resource_tracker

    for helper, pid in ((getattr(forkserver, "_forkserver", None), "_forkserver_pid"),
                        (getattr(resource_tracker, "_resource_tracker", None), "_pid")):
        if getattr(helper, pid, None) is None or not callable(getattr(helper, "_stop", None)):
            continue
        try:
            helper._stop()
        except (OSError, RuntimeError):  # already gone (ChildProcessError is an OSError)
            pass


def open_figures(extra_imports: tuple[str, ...] = (), parallel: int | None = None) -> FigurePool | LocalFigures:
    """A :class:`FigurePool` drawing up to ``parallel`` figures at once (default: the cores this process may
    use), or :class:`LocalFigures` when ``TABSIM_FIGURE_PROCESS=0`` or no pool can be started.
    ``extra_imports``: tabsim modules of the figure functions, loaded by the fork server before any job
    (already loading where the command called :func:`prestart` with them)."""
    if _in_process():
        return LocalFigures()
    try:
        return FigurePool(extra_imports, parallel)
    except (OSError, ValueError):
        return LocalFigures()


def warm_figure() -> None:
    """Load the plotting stack and draw one small figure in memory (fonts, backend)."""
    # lazy: matplotlib loads where figures are drawn
    import matplotlib
    import matplotlib.pyplot as plt

    from tabsim.plotting.figures import SAVE_DPI  # lazy: as above; the figure stack every job uses

    with matplotlib.rc_context({"figure.dpi": SAVE_DPI}):  # as draw() lays figures out
        fig, ax = plt.subplots(figsize=(2, 2))
    ax.errorbar([0, 1], [0, 1], yerr=[0.1, 0.1], marker="o", label="x")
    ax.legend()
    ax.set(xscale="log", title="warm-up")
    for ext in figure_formats():
        fig.savefig(io.BytesIO(), format=ext, dpi=SAVE_DPI, bbox_inches="tight")
    plt.close(fig)


def _draw_once(modules: tuple[str, ...], draw: bool = True, also: tuple = ()) -> None:
    for name in modules:
        importlib.import_module(name)
    for fn in also:
        fn()
    if draw:
        warm_figure()


def warm_up(*modules: str, draw: bool = True, also: tuple = ()) -> threading.Thread:
    """Import ``modules``, call each of ``also`` (answers the results will ask for, such as provenance's
    versions and git state, which keep them) and (``draw``) load the plotting stack and draw one small
    figure, in a background thread.

    Started before the engine compiles and trains (XLA releases the GIL meanwhile), so that the
    imports and the first draw (fonts, backend) are done when the results need them. The caller
    joins the returned thread before it touches matplotlib itself.
    """
    thread = threading.Thread(target=_draw_once, args=(modules, draw, tuple(also)), name="tabsim-warm-up",
                              daemon=True)
    thread.start()
    return thread
