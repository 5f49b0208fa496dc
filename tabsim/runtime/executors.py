"""Executors: where the chunks of a run are computed, and what decides the bits of a result.

:class:`LocalExecutor` runs chunks in this process, one thread per core (the default);
:class:`tabsim.runtime.dask.DaskExecutor` runs them on a Dask cluster with the same results. Any object
with ``map(fn, chunks)`` (:class:`Executor`) will do. :func:`numerics` is what a worker must share with
the client (XLA flags, JAX numeric settings, versions, a digest of tabsim's sources) to compute the same
bits.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import queue
import re
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Protocol

import tabsim
from tabsim.base.host import cpu_count
from tabsim.base import defaults
from tabsim.runtime.cache import apply_default, default_compilation_cache as _default_cache

# JAX settings that change the numbers a program computes; the client's values travel with each task.
NUMERIC_CONFIG = ("jax_enable_x64", "jax_default_matmul_precision", "jax_default_prng_impl",
                  "jax_threefry_partitionable", "jax_numpy_dtype_promotion")


SCHEMES = ("tcp", "ws", "wss", "inproc")
# Dask schemes the executor does not connect with: each needs set-up a scheduler address does not carry
UNSUPPORTED_SCHEMES = {"tls": "TLS certificates (Dask's security settings)", "ucx": "UCX and ucx-py"}


_ADDRESS = re.compile(r"^(?P<scheme>[a-z]+)://(?P<host>\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.\-]+):(?P<port>[0-9]{1,5})/?$")


# Set when a run that computes chunks in threads is interrupted: chunks running in segments
# (tabsim.runtime.segments) checkpoint their state and stop at their next segment.
INTERRUPTED = threading.Event()
INTERRUPT_WAIT = 3.0  # seconds the interrupted caller waits for those checkpoints
# How often the waiting thread wakes. The kernel hands a Ctrl-C to any thread of the process; Python runs its
# handler in this thread, but only once this thread runs again. Waiting without a timeout, a SIGINT taken by
# a chunk's thread was seen only when the chunk had finished, too late to checkpoint it or to keep it.
WAKE_SECONDS = 0.1
UNSAVED: set = set()  # threads whose chunk in segments is not yet checkpointed or handed on (the only ones waited for)


class ExecutorError(RuntimeError):
    """An executor cannot be started or cannot run a chunk as the client would (the message says why)."""


def default_compilation_cache() -> Path | None:
    """The compilation cache shared by workers: the folder the client uses (``jax_compilation_cache_dir``,
    set by :mod:`tabsim.runtime.cache`), else the default of :func:`tabsim.runtime.cache.default_compilation_cache`
    (``None`` when switched off)."""
    # lazy: the CLI's option parsing imports this module; `--help` loads no JAX
    import jax

    apply_default()  # the default cache of this process, as ``ts.run`` would apply it
    if jax.config.jax_compilation_cache_dir:
        return Path(jax.config.jax_compilation_cache_dir)
    return _default_cache()


def check_address(address: str, option: str = "--scheduler") -> str:
    """``address`` if it reads ``SCHEME://HOST:PORT`` (a Dask scheduler), else a :class:`ValueError` naming it."""
    m = _ADDRESS.match(address.strip()) if isinstance(address, str) else None
    if m is not None and m["scheme"] in UNSUPPORTED_SCHEMES:
        raise ValueError(f"{option} {address!r}: the {m['scheme']}:// scheme is not supported (it needs "
                         f"{UNSUPPORTED_SCHEMES[m['scheme']]}); supported: {', '.join(SCHEMES)}, e.g. "
                         "tcp://10.0.0.5:8786")
    if m is None or m["scheme"] not in SCHEMES or not 1 <= int(m["port"]) <= 65535:
        raise ValueError(f"{option} {address!r}: not a scheduler address; expected SCHEME://HOST:PORT with SCHEME "
                         f"one of {', '.join(SCHEMES)} and PORT in 1..65535, e.g. tcp://10.0.0.5:8786")
    return address.strip()


def numerics() -> dict:
    """The client's settings that decide the bits of a result: ``XLA_FLAGS``, JAX float settings, versions."""
    # lazy: the CLI's option parsing imports this module; `--help` loads no JAX
    import jax
    import jaxlib

    conf = {}
    for name in NUMERIC_CONFIG:
        try:
            conf[name] = getattr(jax.config, name)
        except AttributeError:
            continue
        if hasattr(conf[name], "value"):  # enum-valued settings
            conf[name] = conf[name].value
    return {"XLA_FLAGS": defaults.xla_flags(), "config": conf,
            "versions": {"jax": jax.__version__, "jaxlib": jaxlib.__version__, "tabsim": tabsim.__version__,
                         "tabsim source": source_digest()}}


@functools.lru_cache(maxsize=1)
def source_digest() -> str:
    """SHA-256 (16 hex digits) of tabsim's Python sources as installed in this process: a worker whose
    tabsim differs from the client's by any line is refused, whatever its version number says."""
    root = Path(tabsim.__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


class Executor(Protocol):
    """Runs chunks of work; a distributed engine implements the same ``map``."""

    def map(self, fn: Callable, chunks: Iterable) -> Iterable: ...


def local_threads() -> int:
    """The default number of chunks in flight: ``$TABSIM_THREADS`` if set (an integer >= 1), else the
    cores this process may run on."""
    value = defaults.threads()
    if value:
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"TABSIM_THREADS: must be an integer >= 1, got {value!r}")
        return int(value)
    return cpu_count()


class LocalExecutor:
    """Runs chunks in this process, ``threads`` at a time, and yields their outputs in chunk order.

    A compiled program runs one chunk on about one core (XLA's CPU code is mostly single-threaded
    loops), and it releases the GIL while it computes, so chunks in threads use the other cores; the
    outputs are the same bits as one chunk after another. ``threads=None``: the cores this process may
    use (:func:`local_threads`); ``threads=1``: one chunk after another. :func:`local_executor` also
    keeps the chunks in flight within the memory available.

    ``devices`` (several ``jax.Device`` of one platform: the GPUs of a machine,
    :func:`tabsim.runtime.device.pool`): thread ``k`` computes on device ``k mod len(devices)`` (JAX's
    default device in that thread only) and takes chunks ``k``, ``k + threads``, ... in turn, so which
    device computes which chunk is fixed by the chunks' positions; each device compiles the program once
    (:func:`tabsim.runtime.executables.run`) and the outputs are the same bits as on one device.
    ``None`` or one device: every chunk on JAX's default device, as before.
    """

    threads: int = 1  # a subclass that does not call __init__ runs one chunk after another
    devices: tuple | None = None

    def __init__(self, threads: int | None = None, devices=None):
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ValueError(f"threads: must be an integer >= 1 or None, got {threads!r}")
        self.threads = threads or local_threads()
        self.devices = tuple(devices) if devices is not None and len(devices) > 1 else None

    def used(self, n_chunks: int) -> tuple:
        """The devices that compute ``n_chunks`` chunks (empty without several devices)."""
        if not self.devices:
            return ()
        workers = 1 if self.threads == 1 or n_chunks < 2 else min(self.threads, n_chunks)
        return self.devices[:min(workers, len(self.devices))]

    def map(self, fn, chunks):
        chunks = list(chunks)
        if getattr(fn, "interruptible", False) and 1 <= len(chunks) and (self.threads == 1 or len(chunks) < 2):
            # a long chunk computes in a helper thread: Ctrl-C reaches this thread at once, even while one
            # call into XLA (a first evaluation of a large table) takes a minute
            yield from _threaded_map(fn, chunks, 1, self.devices)
            return
        if self.threads == 1 or len(chunks) < 2:
            for c in chunks:
                with placed(self.devices[0] if self.devices else None):
                    out = fn(c)
                yield out
            return
        yield from _threaded_map(fn, chunks, min(self.threads, len(chunks)), self.devices)


@contextlib.contextmanager
def using(device):
    """Run the block with ``device`` (the plan's, :attr:`tabsim.runtime.planning.RunPlan.device`) as JAX's
    default device (``None``, or the device JAX would use anyway: nothing changes).

    The setting is process-wide for the block (the chunks of a run compute in threads, which a
    thread-local context would not reach) and restored afterwards. The compute stage places its chunks
    here; which device it is was decided by the plan (:func:`tabsim.runtime.device.pick`)."""
    import jax  # lazy: the CLI's option parsing imports this module

    if device is None or device == (jax.config.jax_default_device or jax.devices()[0]):
        yield device
        return

    before = jax.config.jax_default_device
    jax.config.update("jax_default_device", device)
    try:
        yield device
    finally:
        jax.config.update("jax_default_device", before)


def placed(device):
    """JAX's default device is ``device`` in this thread for the block (``None``: unchanged)."""
    if device is None:
        return contextlib.nullcontext()
    import jax  # lazy: the CLI's option parsing imports this module

    return jax.default_device(device)


def _threaded_map(fn, chunks: list, n_threads: int, devices: tuple | None = None):
    """``fn`` over ``chunks`` in ``n_threads`` daemon threads (a command interrupted by Ctrl-C does not
    wait for them), yielded in order; the first error is raised here and the rest of the chunks are
    not started. With ``devices``, thread ``k`` computes chunks ``k, k + n_threads, ...`` on device
    ``devices[k % len(devices)]``; without, each thread takes the next chunk not yet taken.

    Not :class:`concurrent.futures.ThreadPoolExecutor`: its workers are not daemon threads (Python 3.9 on)
    and its exit handler joins them, whatever ``shutdown(wait=False, cancel_futures=True)`` was told. On
    Python 3.11, a process interrupted while a pool thread ran a 10 s task exited 9.0 s after the SIGINT,
    against 0.01 s with a daemon thread (tests/runtime/test_local_interrupt.py checks the exit)."""
    queues = [queue.SimpleQueue() for _ in range(n_threads if devices else 1)]
    for i, c in enumerate(chunks):
        queues[i % len(queues)].put((i, c))
    done: queue.SimpleQueue = queue.SimpleQueue()
    stop = threading.Event()

    def work(k: int):
        todo = queues[k % len(queues)]
        with placed(devices[k % len(devices)] if devices else None):
            while not stop.is_set():
                try:
                    i, c = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    done.put((i, True, fn(c)))
                except BaseException as err:  # noqa: BLE001  (re-raised in the caller's thread)
                    done.put((i, False, err))
                    return
                finally:
                    UNSAVED.discard(threading.get_ident())  # its output is handed on (tabsim.runtime.segments)

    INTERRUPTED.clear()
    threads = [threading.Thread(target=work, args=(k,), name=f"tabsim-chunk-{k}", daemon=True)
               for k in range(n_threads)]
    for t in threads:
        t.start()
    ready: dict = {}
    try:
        for want in range(len(chunks)):
            while want not in ready:
                try:
                    i, ok, value = done.get(timeout=WAKE_SECONDS)
                except queue.Empty:
                    continue
                if not ok:
                    raise value
                ready[i] = value
            yield ready.pop(want)
    except KeyboardInterrupt as err:
        # Ctrl-C reaches this thread only (here, or thrown in at the yield by a caller that was saving a
        # chunk): chunks in segments checkpoint before the process exits, and the chunks that have finished
        # but were not yet handed on go with the exception (``err.finished``: (position, output) pairs)
        INTERRUPTED.set()
        end = time.monotonic() + INTERRUPT_WAIT
        try:
            for t in threads:
                while t.is_alive() and t.ident in UNSAVED and time.monotonic() < end:
                    t.join(0.02)
        except KeyboardInterrupt:  # a second Ctrl-C: stop waiting
            pass
        while True:
            try:
                i, ok, value = done.get_nowait()
            except queue.Empty:
                break
            if ok:
                ready[i] = value
        err.finished = sorted(ready.items())
        raise
    finally:
        stop.set()


def positions(executor, fn, items: list) -> tuple[Iterable, object]:
    """``(position, output)`` pairs of ``items`` as ``executor`` computes them (None: in this thread), and the
    executor's own iterator (None in this thread), into which an interrupt of the caller is thrown."""
    if executor is None:
        return enumerate(fn(c) for c in items), None
    if hasattr(executor, "imap_unordered"):
        it = executor.imap_unordered(fn, items)
        return it, it
    it = executor.map(fn, items)
    return enumerate(it), it


def finished_on_interrupt(err: KeyboardInterrupt, inner) -> list:
    """The ``(position, output)`` pairs that had finished but were not yet handed on when the caller of
    :func:`positions` was interrupted (``err``). A Ctrl-C raised in the executor's own wait carries them
    (:func:`_threaded_map`); one that landed in the caller (while it saved a chunk) is first thrown into the
    executor's iterator, whose own handling then runs too (its chunks in segments checkpoint, a cluster's
    queued chunks are cancelled)."""
    finished = getattr(err, "finished", None)
    if finished is None and hasattr(inner, "throw"):
        try:
            inner.throw(err)
        except KeyboardInterrupt as again:
            finished = getattr(again, "finished", None)
        except Exception:  # noqa: BLE001 - the interrupt is what is reported
            pass
    return list(finished or ())
