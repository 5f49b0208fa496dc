"""Figures drawn in a helper process, off the critical path of a command.

Loading matplotlib and laying out a text-heavy figure costs about 0.5 s per figure on a laptop
core. :class:`FigureProcess` starts ``python -m tabsim._figure_process`` when a command begins; the
helper loads the plotting stack while the engine trains, then draws each figure it is sent while the
command goes on with its statistics and tables. :meth:`FigureProcess.wait` returns the written paths
(or raises :class:`FigureError` with the helper's traceback), so a command publishes its output only
after every figure is on disk.

A job names a module-level function (``"module:function"``) that takes plain picklable data (frames,
numbers, dataclasses) and returns a matplotlib figure; the helper saves it with
:func:`tabsim.plotting.save_figure` in the formats given. Where no helper can be started
(``TABSIM_FIGURE_PROCESS=0``, or the interpreter cannot be run) :func:`start` returns a
:class:`LocalFigures`, which draws in this process with the same interface.

The messages are length-prefixed pickles over the helper's standard input and output: both ends are
this package, on a private pipe. The helper ends at the end of its input, so it never outlives the
command (a killed command closes the pipe).
"""
from __future__ import annotations

import importlib
import os
import pickle
import struct
import subprocess
import sys
from pathlib import Path

_HEADER = struct.Struct("<Q")
FIGURE_FORMATS = ("png", "pdf", "svg")


class FigureError(RuntimeError):
    """A figure could not be drawn or written; the message carries the helper's traceback."""


def figure_formats(formats=None) -> tuple[str, ...]:
    """``formats`` checked, or the default: ``$TABSIM_FIGURE_FORMATS`` (comma-separated, set by the
    commands' ``--pdf``), else PNG only."""
    if formats is None:
        formats = [f for f in os.environ.get("TABSIM_FIGURE_FORMATS", "png").split(",") if f.strip()] or ["png"]
    elif isinstance(formats, str):
        formats = [formats]
    out = tuple(dict.fromkeys(str(f).strip().lower().lstrip(".") for f in formats))
    bad = [f for f in out if f not in FIGURE_FORMATS]
    if bad or not out:
        raise ValueError(f"figure format {bad[0] if bad else ''!r}: allowed: {', '.join(FIGURE_FORMATS)}")
    return out


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
    from tabsim.plotting import save_figure

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
    """Helper processes drawing figures (see the module docstring); use :func:`start`.

    Each helper is fed by a thread of this process that sends it one job at a time and waits for its
    reply, so a helper takes the next figure when it is free (a long figure does not hold up the
    others); replies come back in submission order from :meth:`wait`.
    """

    def __init__(self, extra_imports: tuple[str, ...] = (), n_helpers: int = 1):
        import queue
        import threading

        import tabsim

        root = str(Path(tabsim.__file__).resolve().parent.parent)  # importable from a source checkout too
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])]))
        self._procs: list[subprocess.Popen] = []
        try:
            for _ in range(max(1, n_helpers)):
                self._procs.append(subprocess.Popen([sys.executable, "-m", "tabsim._figure_process", *extra_imports],
                                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env))
        except OSError:
            self.close()
            raise
        self._jobs: queue.Queue = queue.Queue()
        self._stems: list[str] = []
        self._replies: dict[int, tuple[str, object]] = {}
        self._feeders = [threading.Thread(target=self._feed, args=(p,), daemon=True, name="tabsim-figures")
                         for p in self._procs]
        for th in self._feeders:
            th.start()

    def _feed(self, proc: subprocess.Popen) -> None:
        while (item := self._jobs.get()) is not None:
            i, job = item
            try:
                _send(proc.stdin, job)
                self._replies[i] = _recv(proc.stdout)
            except (EOFError, OSError):
                self._replies[i] = ("ended", f"the figure helper process ended early (exit status {proc.poll()})")
                return

    def submit(self, target: str, *args, stem: str | Path, formats=None, **kwargs) -> None:
        """Queue one figure: ``target(*args, **kwargs)`` drawn and saved as ``stem.<format>``."""
        self._jobs.put((len(self._stems), (target, args, kwargs, str(stem), figure_formats(formats))))
        self._stems.append(str(stem))

    def wait(self) -> list[str]:
        """Wait for every submitted figure; the written paths in submission order."""
        written: list[str] = []
        try:
            for _ in self._feeders:
                self._jobs.put(None)
            for th in self._feeders:
                th.join()
            for i, stem in enumerate(self._stems):
                status, value = self._replies.get(i, ("ended", "the figure helper processes ended early"))
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
        """End the helpers (``kill``: at once, even while drawing)."""
        for proc in self._procs:
            if proc.poll() is None:
                if kill:
                    proc.kill()
                try:
                    proc.stdin.close()
                except OSError:
                    pass
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


def start(extra_imports: tuple[str, ...] = (), n_helpers: int = 1) -> FigureProcess | LocalFigures:
    """A :class:`FigureProcess` of ``n_helpers`` helpers, or :class:`LocalFigures` when
    ``TABSIM_FIGURE_PROCESS=0`` or no helper can be started. ``extra_imports``: modules each helper
    loads before its first job (the modules of the figure functions)."""
    if os.environ.get("TABSIM_FIGURE_PROCESS", "1").strip().lower() in ("0", "false", "no", "off"):
        return LocalFigures()
    try:
        return FigureProcess(extra_imports, n_helpers)
    except OSError:
        return LocalFigures()


def _serve(extra_imports: list[str]) -> None:
    import traceback

    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # anything a library prints goes to the log, not into the replies
    import matplotlib

    matplotlib.use("Agg")
    for name in extra_imports:
        importlib.import_module(name)
    from tabsim._cli_common import _draw_once

    _draw_once(())  # fonts and the renderer are ready before the first job arrives
    while True:  # one job at a time: the command's feeding thread waits for each reply
        try:
            target, args, kwargs, stem, formats = _recv(inp)
        except EOFError:
            return
        try:
            reply = ("ok", _draw(target, args, kwargs, stem, formats))
        except OSError as err:  # a full disk, a read-only folder: the command reports it as its own
            reply = ("oserror", (err.errno, err.strerror or str(err), err.filename))
        except Exception:  # noqa: BLE001 - reported to the command, which raises it
            reply = ("error", traceback.format_exc())
        _send(out, reply)


if __name__ == "__main__":
    # os._exit: no interpreter teardown (0.3-0.5 s with matplotlib and pandas loaded), which the
    # command would wait for; every reply is flushed and every figure written by then
    try:
        _serve(sys.argv[1:])
    except (KeyboardInterrupt, BrokenPipeError):  # the command was interrupted: it reports that itself
        os._exit(1)
    sys.stderr.flush()
    os._exit(0)
