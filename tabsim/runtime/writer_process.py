"""Objects whose methods run in a child Python process, so that a slow client library never shares this
process's interpreter.

MLflow's client costs about a second of CPU to import, and writing a run through it holds the GIL for a
few hundred milliseconds: on a thread of the run's process both compete with the host work that feeds the
compiled program. :class:`Remote` builds an object (``"module:name"`` and keyword arguments) in a writer
process and forwards its method calls there, in order; a call returns at once (a thread of this process
sends it), and :meth:`Remote.close` waits until the object has done everything and is closed.

The writer process is started with ``python -c`` and this process's ``sys.path``, not with
:mod:`multiprocessing`, whose spawn and fork server start by importing the caller's main script again (a
script without a ``__main__`` guard would run its work twice). Nor as a ``concurrent.futures``
``ProcessPoolExecutor(max_workers=1)``: on Python 3.11 its worker outlived a parent killed with SIGKILL, and
one that hung or was stopped kept the parent from exiting after ``shutdown(wait=False, cancel_futures=True)``
(no public call ends a worker before Python 3.14's ``terminate_workers``); this writer exits at the end of
its pipe and is killed when it stalls. One writer process serves every :class:`Remote` of this process: the
first one starts it, the next ones reuse it (a notebook pays the client library's import once); it ends
when this process exits (which waits for it) or dies.

A writer process that dies, is stopped (``SIGSTOP``) or answers nothing for ``stall_seconds`` never hangs
the caller: :meth:`Remote.close` ends it and raises :class:`WriterError`, one line saying what happened
(with the last line the process printed); the next :class:`Remote` starts a fresh one. An error raised by
the object is also one line, ``METHOD failed: TYPE: first line of its message``, raised by
:meth:`Remote.close`; the object's later calls are skipped.
"""
from __future__ import annotations

import atexit
import importlib
import itertools
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection

from tabsim.base import defaults
from tabsim.base.host import stopped

STALL_SECONDS = 600.0  # a safety net only: a writer that answers nothing for this long is ended
_POLL = 0.2  # how often a waiting close looks for a dead or stopped writer
NICE = 10  # the writer process's scheduling priority, below the command's (os.nice)
_ids = itertools.count()


class WriterError(RuntimeError):
    """The writer process, or the object in it, failed (one line)."""


def available() -> bool:
    """Whether a writer process can be started here (POSIX pipes passed to a child)."""
    return os.name == "posix"


class _Writer:
    """The child process, the thread that sends to it and the thread that reads its answers."""

    def __init__(self):
        to_child, from_parent = os.pipe()[::-1]
        from_child, to_parent = os.pipe()
        code = (f"import os, sys; sys.path[:] = {sys.path!r}; from tabsim.runtime.writer_process import serve; "
                f"serve({from_parent}, {to_parent}); sys.stdout.flush(); sys.stderr.flush(); os._exit(0)")
        self.log = tempfile.TemporaryFile()  # what the writer prints: its last line goes into an error
        try:
            self.popen = subprocess.Popen([sys.executable, "-c", code], pass_fds=(from_parent, to_parent),
                                          stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        finally:
            os.close(from_parent)
            os.close(to_parent)
        self.pid = self.popen.pid
        self._out, self._in = Connection(to_child, readable=False), Connection(from_child, writable=False)
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self.answers: dict[int, str | None] = {}
        self.heard, self.ended = time.monotonic(), False
        self.used = False  # an object was built here (else, at exit, a writer still importing is ended at once)
        self.cond = threading.Condition()
        threading.Thread(target=self._send, daemon=True, name="tabsim-writer-send").start()
        threading.Thread(target=self._read, daemon=True, name="tabsim-writer-read").start()

    def __del__(self):
        log = getattr(self, "log", None)
        if log is not None:
            log.close()  # a writer replaced after it died: its log goes with it

    def send(self, message: tuple) -> None:
        self._queue.put(message)

    def _send(self) -> None:
        while (message := self._queue.get()) is not None:
            try:
                self._out.send(message)
            except OSError:  # the writer ended: its close reports it
                return

    def _read(self) -> None:
        while True:
            try:
                kind, key, *rest = self._in.recv()
            except (EOFError, OSError):
                with self.cond:
                    self.ended = True
                    self.cond.notify_all()
                return
            with self.cond:
                self.heard = time.monotonic()
                if kind == "closed":
                    self.answers[key] = rest[0]
                self.cond.notify_all()

    def alive(self) -> bool:
        return not self.ended and self.popen.poll() is None

    def wait_closed(self, key: int, stall_seconds: float) -> str | None:
        """The error line of object ``key`` (None: none) once it is closed; raises :class:`WriterError` for a
        writer that died, is stopped, or answered nothing for ``stall_seconds``."""
        with self.cond:
            self.heard = time.monotonic()
            while key not in self.answers:
                why = self._fault(stall_seconds)
                if why is not None:
                    self.kill()
                    raise WriterError(why)
                self.cond.wait(_POLL)
            return self.answers.pop(key)

    def _fault(self, stall_seconds: float) -> str | None:
        if self.ended or self.popen.poll() is not None:
            code = self.popen.wait()
            how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
            return f"the writer process (pid {self.pid}) {how} before it finished{self._last_line()}"
        if stopped(self.pid):
            return f"the writer process (pid {self.pid}) is stopped; ended it"
        if time.monotonic() - self.heard > stall_seconds:
            return f"the writer process (pid {self.pid}) answered nothing for {stall_seconds:.0f} s; ended it"
        return None

    def _last_line(self) -> str:
        self.log.seek(0)
        lines = [x for x in self.log.read().decode(errors="replace").splitlines() if x.strip()]
        return f" (its last line: {lines[-1].strip()})" if lines else ""

    def end(self, timeout: float = 5.0) -> None:
        """Close the pipe and wait for the writer to exit (so its CPU time is counted as this process's
        children's); one that does not is killed, and one that never built an object is killed at once."""
        if not self.used:
            self.kill()
            return
        self._queue.put(None)
        try:
            self._out.close()
            self.popen.wait(timeout)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()

    def kill(self) -> None:
        self.ended = True
        self._queue.put(None)
        try:
            self.popen.kill()  # a stopped process too
        except OSError:
            pass
        self.popen.wait()


_shared: _Writer | None = None
_lock = threading.Lock()


def writer() -> _Writer:
    """This process's writer process: the running one, else a new one (ended when this process exits)."""
    global _shared
    with _lock:
        if _shared is None or not _shared.alive():
            if _shared is None:
                atexit.register(_end)
            _shared = _Writer()
        return _shared


def prestart(modules: tuple[str, ...]) -> None:
    """Start this process's writer process now and have it import ``modules``, so that a client library's
    import (MLflow's: about a second of CPU) goes on beside this process's own start-up rather than after
    it. A module that fails to import is left to the object that needs it to report."""
    writer().send(("preload", -1, tuple(modules)))


def _end() -> None:
    if _shared is not None:
        if _shared.alive():
            _shared.end()
        _shared.log.close()  # nothing reads it once this process exits


class Remote:
    """An object built and called in the writer process (module docstring).

    ``target``: ``"module:name"`` of a callable that returns the object, called with ``kwargs`` (picklable);
    ``environ``: prefixes of environment variables the writer takes from this process when the object is
    built (the writer keeps the environment it started with otherwise)."""

    def __init__(self, target: str, kwargs: dict, *, environ: tuple[str, ...] = (),
                 stall_seconds: float = STALL_SECONDS):
        self.key, self.stall_seconds = next(_ids), stall_seconds
        self._writer = writer()
        self._writer.used = True
        env = defaults.with_prefix(environ)
        self._writer.send(("open", self.key, target, kwargs, environ, env))

    @property
    def pid(self) -> int:
        """The writer process's id."""
        return self._writer.pid

    def call(self, method: str, *args) -> None:
        """``object.method(*args)`` in the writer, after the calls before it; returns at once."""
        self._writer.send(("call", self.key, method, args))

    def close(self) -> None:
        """Wait for every call and the object's ``close()``; raise the first error as one line
        (:class:`WriterError`)."""
        self._writer.send(("close", self.key))
        line = self._writer.wait_closed(self.key, self.stall_seconds)
        if line is not None:
            raise WriterError(line)


def _one_line(method: str, err: BaseException) -> str:
    first = (str(err).strip().splitlines() or [""])[0]
    return f"{method} failed: {type(err).__name__}: {first}"


def serve(read_fd: int, write_fd: int) -> None:
    """The writer process: build, call and close objects as the messages on ``read_fd`` say, answering on
    ``write_fd``; returns when the parent closes its end."""
    try:
        # background work: the command's own threads go first on a busy core (tabsim sweep --track mlflow on
        # 2 cores, paired with the same run untracked: 1.066x at normal priority, 1.036x at this one)
        os.nice(NICE)
    except OSError:
        pass
    inbox, outbox = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    objects: dict = {}
    errors: dict[int, str] = {}
    while True:
        try:
            kind, key, *rest = inbox.recv()
        except (EOFError, OSError):
            return
        if kind == "preload":
            for name in rest[0]:
                try:
                    importlib.import_module(name)
                except Exception:  # noqa: BLE001 - the object that needs the module reports it
                    pass
        elif kind == "close":
            if key not in errors and key in objects:
                _apply(objects, errors, key, "close", ())
            objects.pop(key, None)
            outbox.send(("closed", key, errors.pop(key, None)))
        elif key not in errors:
            _apply(objects, errors, key, *rest) if kind == "call" else _build(objects, errors, key, *rest)
            outbox.send(("done", key))


def _build(objects: dict, errors: dict, key: int, target: str, kwargs: dict, environ: tuple, env: dict) -> None:
    defaults.set_in_this_process(env, replacing=environ)  # this writer's own environment
    try:
        module, _, name = target.partition(":")
        objects[key] = getattr(importlib.import_module(module), name)(**kwargs)
    except Exception as err:  # noqa: BLE001 - reported to the parent as one line
        errors[key] = _one_line("open", err)


def _apply(objects: dict, errors: dict, key: int, method: str, args: tuple) -> None:
    try:
        getattr(objects[key], method)(*args)
    except Exception as err:  # noqa: BLE001 - reported to the parent as one line
        errors[key] = _one_line(method, err)
