"""Figures drawn in a helper process, off the critical path of a command.

Loading matplotlib and laying out a text-heavy figure costs about 0.5 s per figure on a laptop
core. :class:`FigureProcess` starts ``python -m tabsim.plotting.helper`` when a command begins; the
helper starts a :mod:`multiprocessing` fork server that loads the plotting stack while the engine
trains, then draws each figure it is sent in a process of that server (several at once, one per
core; the helper itself never forks), while the command goes on with its statistics and tables.
:meth:`FigureProcess.wait` returns the written paths (or raises :class:`FigureError` with the helper's traceback), so a command publishes its output only
after every figure is on disk.

A job names a module-level function (``"module:function"``) that takes plain picklable data (frames,
numbers, dataclasses) and returns a matplotlib figure; the helper saves it with
:func:`tabsim.plotting.figures.save_figure` in the formats given. Where no helper can be started
(``TABSIM_FIGURE_PROCESS=0``, or the interpreter cannot be run) :func:`start` returns a
:class:`LocalFigures`, which draws in this process with the same interface.

The messages are length-prefixed pickles over the helper's standard input and output: both ends are
this package, on a private pipe. The helper ends at the end of its input, so it never outlives the
command (a killed command closes the pipe).
"""
from __future__ import annotations

import importlib
import io
import os
import pickle
import queue
import selectors
import struct
import subprocess
import sys
import threading
import traceback
from pathlib import Path

import tabsim
from tabsim._host import cpu_count
from tabsim.plotting.formats import figure_formats

_HEADER = struct.Struct("<Q")
# The helper's environment, which its fork server inherits: no native thread pools, so that the server
# is one thread when it forks a process per figure. OpenBLAS (numpy) and OpenMP start a pool at import,
# and pyarrow's jemalloc (loaded with pandas) a background thread; drawing a figure needs none of them.
SINGLE_THREADED = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                   "JE_ARROW_MALLOC_CONF": "background_thread:false"}


class FigureError(RuntimeError):
    """A figure could not be drawn or written; the message carries the helper's traceback."""




def _send(stream, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)))
    stream.write(data)
    stream.flush()


def _recv(stream):
    """The next message, or ``EOFError`` when the other end has closed the pipe."""
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise EOFError
    n = _HEADER.unpack(head)[0]
    data = stream.read(n)
    if len(data) < n:
        raise EOFError
    return pickle.loads(data)


def _draw(target: str, args: tuple, kwargs: dict, stem: str, formats: tuple[str, ...]) -> list[str]:
    # lazy: matplotlib loads in the helper process only, never in the command's
    from tabsim.plotting.figures import save_figure

    module, _, name = target.partition(":")
    fig = getattr(importlib.import_module(module), name)(*args, **kwargs)
    return [str(p) for p in save_figure(fig, stem, formats)]


class LocalFigures:
    """Draws each submitted figure at once, in this process (the fallback of :func:`start`)."""

    def __init__(self):
        self._written: list[str] = []

    def submit(self, target: str, *args, stem: str | Path, formats=None, **kwargs) -> None:
        self._written += _draw(target, args, kwargs, str(stem), figure_formats(formats))

    def wait(self) -> list[str]:
        return list(self._written)

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class FigureProcess:
    """A helper process drawing figures (see the module docstring); use :func:`start`.

    Jobs are sent as they are submitted, by a thread of this process (the command never waits on the
    pipe); the helper draws up to ``parallel`` of them at once, each in a process of its fork server
    (matplotlib already loaded), and replies as each is written;
    :meth:`wait` returns the paths in submission order.
    """

    def __init__(self, extra_imports: tuple[str, ...] = (), parallel: int | None = None):
        root = str(Path(tabsim.__file__).resolve().parent.parent)  # importable from a source checkout too
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])]),
                   **SINGLE_THREADED)

        parallel = parallel or cpu_count()
        self._proc = subprocess.Popen([sys.executable, "-m", "tabsim.plotting.helper", str(parallel), *extra_imports],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                      start_new_session=hasattr(os, "killpg"))  # close(kill=True) ends its children too
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._stems: list[str] = []
        self._sender = threading.Thread(target=self._send_jobs, daemon=True, name="tabsim-figures")
        self._sender.start()

    @property
    def pid(self) -> int:
        return self._proc.pid

    def _send_jobs(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                _send(self._proc.stdin, job)
            except OSError:  # the helper ended; wait() reports it
                return
        try:
            self._proc.stdin.close()  # no more jobs: the helper ends after the last reply
        except OSError:
            pass

    def submit(self, target: str, *args, stem: str | Path, formats=None, **kwargs) -> None:
        """Queue one figure: ``target(*args, **kwargs)`` drawn and saved as ``stem.<format>``."""
        self._jobs.put((len(self._stems), (target, args, kwargs, str(stem), figure_formats(formats))))
        self._stems.append(str(stem))

    def wait(self) -> list[str]:
        """Wait for every submitted figure; the written paths in submission order."""
        replies: dict[int, tuple[str, object]] = {}
        try:
            self._jobs.put(None)
            while len(replies) < len(self._stems):
                try:
                    i, reply = _recv(self._proc.stdout)
                except (EOFError, OSError):
                    break
                replies[i] = reply
            written: list[str] = []
            for i, stem in enumerate(self._stems):
                status, value = replies.get(i, ("ended", "nothing came back from the figure helper (it, or "
                                                         "the child drawing this figure, ended early; helper "
                                                         f"exit status {self._proc.poll()})"))
                if status == "ended":
                    raise FigureError(f"figure {stem}: {value}")
                if status == "oserror":
                    raise OSError(*value)
                if status != "ok":
                    raise FigureError(f"figure {stem} failed in the figure helper process:\n{value}")
                written += value
        finally:
            self.close()
        return written

    def close(self, kill: bool = False) -> None:
        """End the helper (``kill``: at once, even while drawing)."""
        proc = self._proc
        if proc.poll() is None:
            if kill:
                try:
                    os.killpg(proc.pid, 9)
                except (AttributeError, OSError):
                    proc.kill()
            self._jobs.put(None)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        proc.stdout.close()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        self.close(kill=exc_type is not None)  # an error or Ctrl-C in the command: its figures are not wanted


def start(extra_imports: tuple[str, ...] = (), parallel: int | None = None) -> FigureProcess | LocalFigures:
    """A :class:`FigureProcess` drawing up to ``parallel`` figures at once (default: the cores this
    process may use), or :class:`LocalFigures` when ``TABSIM_FIGURE_PROCESS=0`` or no helper can be
    started. ``extra_imports``: modules the helper loads before its first job (the modules of the
    figure functions)."""
    if os.environ.get("TABSIM_FIGURE_PROCESS", "1").strip().lower() in ("0", "false", "no", "off"):
        return LocalFigures()
    try:
        return FigureProcess(extra_imports, parallel)
    except OSError:
        return LocalFigures()


def _read_exact(fd: int, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        b = os.read(fd, n - got)
        if not b:
            raise EOFError
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def _recv_fd(fd: int):
    """The next message on raw descriptor ``fd`` (unbuffered, so ``select`` sees what is left)."""
    n = _HEADER.unpack(_read_exact(fd, _HEADER.size))[0]
    return pickle.loads(_read_exact(fd, n))


def _reply(target, args, kwargs, stem, formats):
    try:
        return ("ok", _draw(target, args, kwargs, stem, formats))
    except OSError as err:  # a full disk, a read-only folder: the command reports it as its own
        return ("oserror", (err.errno, err.strerror or str(err), err.filename))
    except Exception:  # noqa: BLE001 - reported to the command, which raises it
        return ("error", traceback.format_exc())


def _child(i: int, job: tuple, conn) -> None:
    """In a process of the figure server: draw one figure and reply ``(job index, reply)`` on ``conn``."""
    conn.send((i, _reply(*job)))
    conn.close()


def _serve(parallel: int, extra_imports: list[str]) -> None:
    """Read jobs from standard input; draw each in a process of its own (up to ``parallel`` at once) and
    reply ``(job index, reply)`` on standard output as each finishes.

    The processes come from :mod:`multiprocessing`'s fork server, started here at once with the
    plotting stack preloaded (while the command trains), so each figure starts with matplotlib loaded.
    The helper itself never forks. The server starts without native thread pools
    (:data:`SINGLE_THREADED`) and preloads only matplotlib and tabsim's figure modules; any other module
    of a job is imported in the job's process. Where no fork server exists, or ``parallel`` is 1, the
    helper draws each figure itself, in order."""
    reply_fd = os.dup(1)  # the replies' pipe; whatever else writes to fd 1 (a library, a child) goes to stderr
    os.dup2(2, 1)
    out = os.fdopen(reply_fd, "wb")
    sys.stdout = sys.stderr
    os.environ["MPLBACKEND"] = "Agg"  # this process and the fork server
    # lazy: multiprocessing's server only in the helper process, never in the command's
    import multiprocessing

    server = parallel > 1 and "forkserver" in multiprocessing.get_all_start_methods()
    if server:
        ctx = multiprocessing.get_context("forkserver")
        # tabsim's own figure modules start no thread; another module is imported where it draws
        ctx.set_forkserver_preload(["matplotlib.pyplot", "tabsim.plotting.figures",
                                    *(m for m in extra_imports if m.split(".")[0] == "tabsim")])
        from multiprocessing import forkserver  # lazy: as above

        forkserver.ensure_running()  # loads the plotting stack now, beside the command's training
    else:
        _draw_once(tuple(extra_imports))
    sel = selectors.DefaultSelector()
    sel.register(0, selectors.EVENT_READ, None)
    queued: list = []
    running = 0
    reading = True
    while reading or queued or running:
        while queued and (running < parallel or not server):
            i, job = queued.pop(0)
            if not server:
                _send(out, (i, _reply(*job)))
                continue
            r, w = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_child, args=(i, job, w), daemon=True)
            proc.start()
            w.close()
            sel.register(r, selectors.EVENT_READ, proc)
            running += 1
        if not (reading or running):
            break
        for key, _ in sel.select():
            if key.data is None:  # a job, or the end of the jobs
                try:
                    queued.append(_recv_fd(0))
                except EOFError:
                    sel.unregister(0)
                    reading = False
                continue
            try:
                i, reply = key.fileobj.recv()
            except (EOFError, OSError):  # the process died without replying
                i, reply = None, None
            sel.unregister(key.fileobj)
            key.fileobj.close()
            key.data.join()
            running -= 1
            if i is not None:
                _send(out, (i, reply))
            # a process that died without a reply leaves its job unanswered: the command reports it


def _draw_once(modules: tuple[str, ...], draw: bool = True) -> None:
    for name in modules:
        importlib.import_module(name)
    if not draw:
        return
    # lazy: matplotlib loads in the helper process only, never in the command's
    import matplotlib.pyplot as plt

    from tabsim.plotting import figures  # noqa: F401  lazy: as above (loads the figure stack the jobs use)

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.errorbar([0, 1], [0, 1], yerr=[0.1, 0.1], marker="o", label="x")
    ax.legend()
    ax.set(xscale="log", title="warm-up")
    for ext in figure_formats():
        fig.savefig(io.BytesIO(), format=ext, dpi=130, bbox_inches="tight")
    plt.close(fig)


def warm_up(*modules: str, draw: bool = True):
    """Import ``modules`` and (``draw``) the plotting stack and draw one small figure, in a background thread.

    Started before the engine compiles and trains (XLA releases the GIL meanwhile), so that the
    imports and the first draw (fonts, backend) are done when the results need them. The caller
    joins the returned thread before it touches matplotlib itself.
    """
    thread = threading.Thread(target=_draw_once, args=(modules, draw), name="tabsim-warm-up", daemon=True)
    thread.start()
    return thread


if __name__ == "__main__":
    # os._exit: no interpreter teardown (0.3-0.5 s with matplotlib and pandas loaded), which the
    # command would wait for; every reply is flushed and every figure written by then
    try:
        _serve(int(sys.argv[1]), sys.argv[2:])
    except (KeyboardInterrupt, BrokenPipeError):  # the command was interrupted: it reports that itself
        os._exit(1)
    sys.stderr.flush()
    os._exit(0)
