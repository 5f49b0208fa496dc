"""What runs on a Dask worker: its set-up to compute the bits the client would (the client's ``XLA_FLAGS``,
JAX settings, versions and compilation cache), the task that runs one chunk, and the pinning of a local
cluster's workers to their cores. :class:`tabsim.runtime.dask.DaskExecutor` registers these on its workers."""
from __future__ import annotations

import os
import sys
from typing import Callable

import psutil
from distributed.diagnostics.plugin import WorkerPlugin

from tabsim.base import defaults
from tabsim.runtime.cache import enable_compilation_cache
from tabsim.runtime.executors import ExecutorError, numerics, source_digest

_WORKER_FLAGS: str | None = None  # the XLA_FLAGS this worker process started JAX with
_WORKER_CACHE: str | None = None


def _backend_started() -> bool:
    """Whether JAX may already have read ``XLA_FLAGS`` in this process: once JAX is imported this is
    assumed (JAX has no public way to ask), and :func:`_check` compares the flags it started with."""
    return "jax" in sys.modules or "jaxlib" in sys.modules


def prepare_worker(client_numerics: dict, cache: str | None = None) -> None:
    """Set this process up to compute what the client computes (idempotent).

    Before JAX's backend starts, ``XLA_FLAGS`` is set to the client's; afterwards the flags it started
    with are what they are and :func:`_check` refuses to run when they differ. ``cache`` enables JAX's
    on-disk compilation cache in that folder.
    """
    global _WORKER_FLAGS, _WORKER_CACHE
    if _WORKER_FLAGS is None:
        if not _backend_started():
            # a Dask worker process setting up itself before its JAX loads (run_task and the worker plugin
            # call this only on workers): the client's process environment is never changed
            defaults.set_in_this_process({"XLA_FLAGS": client_numerics["XLA_FLAGS"]})
        _WORKER_FLAGS = defaults.xla_flags()
    source_digest()  # of the sources as they are when this worker starts

    if cache and _WORKER_CACHE != cache:
        enable_compilation_cache(cache)
        _WORKER_CACHE = cache


def _check(client_numerics: dict) -> None:
    # lazy: a worker sets XLA_FLAGS (prepare_worker) before JAX loads
    import jax

    mine = numerics()
    host = os.uname().nodename
    if _WORKER_FLAGS != client_numerics["XLA_FLAGS"]:
        raise ExecutorError(f"worker on {host} (pid {os.getpid()}) started JAX with XLA_FLAGS={_WORKER_FLAGS!r}, "
                            f"the client uses {client_numerics['XLA_FLAGS']!r}: its results would differ. Start the "
                            "workers with the client's XLA_FLAGS (or without importing JAX before the first task)")
    bad = {k: (v, client_numerics["versions"][k]) for k, v in mine["versions"].items()
           if client_numerics["versions"].get(k) != v}
    if bad:
        what = ", ".join(f"{k} {w} (client {c})" for k, (w, c) in bad.items())
        raise ExecutorError(f"worker on {host} (pid {os.getpid()}) runs {what}: install the client's versions on "
                            "every worker so that results are the same")
    for name, value in client_numerics["config"].items():
        if mine["config"].get(name) != value:
            jax.config.update(name, value)


def run_task(fn: Callable, item, client_numerics: dict, cache: str | None = None):
    """What a worker runs for one chunk: ``fn(item)`` with the client's numeric settings."""
    prepare_worker(client_numerics, cache)
    _check(client_numerics)
    return fn(item)


class TabsimWorkerPlugin(WorkerPlugin):
    """Sets every worker (also one started later, e.g. a restarted one) up like the client, before
    its first task: the client's ``XLA_FLAGS`` and the shared compilation cache; JAX is imported
    here, so the first chunk does not pay for it."""

    name = "tabsim"

    def __init__(self, client_numerics: dict, cache: str | None):
        self.numerics, self.cache = client_numerics, cache

    def setup(self, worker=None):
        prepare_worker(self.numerics, self.cache)


class TabsimCoresPlugin(WorkerPlugin):
    """Pins each worker of a local cluster (also a restarted one) to its cores, by worker name.
    Registered under its own name by the executor that started the cluster, before
    ``TabsimWorkerPlugin``, so that a client connecting later (``--scheduler``) leaves it be."""

    name = "tabsim-cores"

    def __init__(self, cpus: dict):
        self.cpus = cpus

    def setup(self, worker=None):
        cores = self.cpus.get(getattr(worker, "name", None))
        if cores:
            pin_process(cores)


def pin_process(cores) -> None:
    """Restrict every thread of this process (and the threads it starts later) to ``cores``.

    A worker of a local cluster runs before its JAX backend starts, so XLA sizes its intra-op thread
    pool to these cores: two workers on a 2-core machine each get one core instead of both fighting for
    two (results are the same bits: the thread count does not change XLA CPU's arithmetic).
    """
    for tid in [t.id for t in psutil.Process().threads()]:
        try:
            os.sched_setaffinity(tid, cores)
        except (AttributeError, OSError):  # a thread that ended meanwhile; not Linux
            pass


def core_groups(n_workers: int) -> dict[int, list[int]]:
    """The cores of this process split among ``n_workers`` local workers, by worker name (0..n-1):
    contiguous groups of ``cores // n_workers`` (the first ``cores % n_workers`` one more), or one
    core each, shared round-robin, when there are more workers than cores."""
    try:
        cores = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return {}
    if n_workers >= len(cores):
        return {i: [cores[i % len(cores)]] for i in range(n_workers)}
    size, extra = divmod(len(cores), n_workers)
    groups, start = {}, 0
    for i in range(n_workers):
        stop = start + size + (i < extra)
        groups[i] = cores[start:stop]
        start = stop
    return groups
