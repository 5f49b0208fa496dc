"""The Dask executor: chunks of a run computed on a Dask cluster, with the results of a local run.

The default executor (:class:`tabsim.runtime.executors.LocalExecutor`) runs chunks in this process.
:class:`DaskExecutor` runs them on a Dask
cluster: a :class:`distributed.LocalCluster` of single-threaded worker processes that it starts on this
machine, or an existing cluster given by its scheduler address (or a :class:`distributed.Client`).

    import tabsim as ts
    from tabsim.runtime.dask import DaskExecutor

    with DaskExecutor(workers=2) as ex:          # closes the cluster it started on leaving the block
        res = ts.run({"preset": "paper", "sweep": {"prior_strength": [0.2, 0.5, 0.8]}}, executor=ex)

What the Dask path guarantees:

* **The same numbers.** Every task carries the client's numeric settings (its ``XLA_FLAGS``, the JAX
  float settings, the versions of jax, jaxlib and tabsim and a digest of tabsim's sources). A worker starts JAX with the client's
  ``XLA_FLAGS`` and applies the JAX settings before running a chunk; a worker that cannot (its JAX
  started with other flags, other versions) fails the task with a message saying so, so a
  distributed run gives the frame of a local run byte for byte or none at all.
* **Chunks stream back.** :meth:`DaskExecutor.imap_unordered` yields each chunk as it finishes
  (distributed's ``client.get_executor()``, waited on with ``concurrent.futures.wait``) and keeps only a
  window of chunks in flight, so the run store saves every finished chunk at once: a crash of the
  client loses at most the chunks in flight, and ``--resume`` continues from the rest.
* **Lost workers cost only their chunks.** A worker that dies is restarted by its nanny and the
  scheduler gives its chunks to a live worker; a chunk that raises is retried (``retries``).
* **One compilation per program and process, one cache for all.** Workers keep compiled programs
  for their life (:mod:`tabsim.runtime.run` caches them per process) and share JAX's on-disk compilation
  cache (default ``~/.cache/tabsim/jax``), so a worker that starts later loads what another compiled.

Command-line use: ``--executor dask --workers N`` or ``--executor dask --scheduler tcp://HOST:PORT``
(:mod:`tabsim.cli.options`).
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import importlib.util
import itertools
import logging
import os
import sys
import uuid
from pathlib import Path
from typing import Callable, Iterable, Iterator

try:
    import dask
    from distributed import Client, KilledWorker, LocalCluster
    from distributed.comm.core import CommClosedError
    from distributed.diagnostics.plugin import WorkerPlugin  # noqa: F401  (checked here: the workers' side uses it)
except ModuleNotFoundError as _missing:  # an extra since tabsim 0.1: say which
    raise ModuleNotFoundError(f"tabsim.runtime.dask needs Dask ({_missing.name} is not installed): "
                              'pip install "tabsim[dask]"', name=_missing.name) from None
except Exception as _broken:  # noqa: BLE001 - installed but broken (a partial upgrade, a stray file)
    _why = f"{type(_broken).__name__}: {str(_broken).splitlines()[0] if str(_broken) else 'no detail'}"
    raise ImportError(f"tabsim.runtime.dask needs Dask, which is installed but cannot be imported ({_why}): "
                      'pip install --force-reinstall "tabsim[dask]"') from None

from tabsim.base.host import cpu_count
from tabsim.base import defaults
# the workers' side, re-exported: what a worker runs and how a local cluster's workers are set up
from tabsim.runtime.dask_workers import (TabsimCoresPlugin, TabsimWorkerPlugin, core_groups, pin_process,  # noqa: F401
                                         prepare_worker, run_task)
from tabsim.runtime.executors import ExecutorError, check_address, default_compilation_cache, numerics
from tabsim.runtime.health import (CHECK_SECONDS, PROBE_SECONDS, SCHEDULER_SECONDS, LostWorkers, probe_scheduler,
                                  within)

# ------------------------------------------------------------------------------------------------
# The Dask executor


WORKER_WAIT_SECONDS = 30.0  # for the first worker of a scheduler that has none (read at call time)
SETUP_SECONDS = 120.0  # at least, for every worker to set up (import JAX, check the numerics)


class DaskExecutor:
    """Runs chunks on a Dask cluster; a context manager that closes what it started.

    Args:
      workers: start a :class:`distributed.LocalCluster` of this many single-threaded worker processes
        on this machine (default: one per CPU core, when neither ``scheduler`` nor ``client`` is given).
      scheduler: the address of a running cluster's scheduler (``tcp://HOST:PORT``); the cluster is left
        running on close, only this executor's client is closed.
      client: a :class:`distributed.Client` to use as is (left open on close).
      compile_cache: the JAX compilation cache folder every worker uses (default
        :func:`default_compilation_cache`); ``False`` for none.
      retries: times a chunk that raised is tried again (a chunk lost with its worker is rescheduled
        without counting as a retry).
      in_flight: chunks submitted ahead of the results (default 8 per worker thread, at least 16): the
        chunks a crash of the client can lose, and what keeps every worker busy between results.
      announce: print the dashboard link on stderr once, when there is a dashboard; False (``-q``) also keeps
        a local cluster's warnings (its nannies') off stderr, errors excepted.
      dashboard: serve the dashboard of a local cluster (needs ``bokeh``) on a free port.
      oversubscribe: start ``workers`` local workers even when they are more than the cores this process
        may use (by default they are capped at the cores, with a note on stderr).
      pin: give each worker of a local cluster its own share of this machine's cores (see
        :func:`core_groups`), so that N workers do not each start an N-core XLA thread pool and
        fight over the cores; ``False`` leaves them unpinned. Workers of an existing cluster are not
        pinned.
      timeout: the longest, in seconds, the scheduler is waited for: to connect (``Client(timeout=...)``),
        to answer each question during the run (its workers, their memory, the workers it lost) and to
        close. A scheduler that answers nothing for that long (stopped, its machine gone) ends the run with
        one :class:`ExecutorError`; the chunks already finished are kept for ``--resume``.

    The cluster starts on ``__enter__`` (or the first use). Iterate with :meth:`imap_unordered` (what
    :func:`tabsim.runtime.store.execute` uses) or :meth:`map` (results in order).
    """

    def __init__(self, workers: int | None = None, *, scheduler: str | None = None, client=None,
                 compile_cache: str | Path | bool | None = None, retries: int = 3, in_flight: int | None = None,
                 announce: bool = True, dashboard: bool = True, pin: bool = True, oversubscribe: bool = False,
                 timeout: float = SCHEDULER_SECONDS):
        given = [n for n, v in (("workers", workers), ("scheduler", scheduler), ("client", client)) if v is not None]
        if len(given) > 1:
            raise ValueError(f"DaskExecutor: give one of workers, scheduler and client, not {' and '.join(given)}")
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
            raise ValueError(f"workers: {workers!r} is not a whole number >= 1")
        if scheduler is not None:
            scheduler = check_address(scheduler, "scheduler")
        if not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries: {retries!r} is not a whole number >= 0")
        if in_flight is not None and (not isinstance(in_flight, int) or in_flight < 1):
            raise ValueError(f"in_flight: {in_flight!r} is not a whole number >= 1")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError(f"timeout: {timeout!r} is not a number of seconds > 0")
        if workers is not None and workers > cpu_count() and not oversubscribe:
            # one single-threaded worker per core is what the machine runs at once; more only cost memory
            # and start-up (1000 asked on 2 cores started 36 processes in 5 s before anything ran)
            print(f"--workers {workers}: capped at {cpu_count()}, the cores this process may use (pass "
                  f"--oversubscribe to start {workers})", file=sys.stderr, flush=True)  # with -q too: not what was asked
            workers = cpu_count()
        self.workers, self.scheduler, self.retries, self.in_flight = workers, scheduler, retries, in_flight
        self.announce, self.dashboard, self.pin, self.timeout = announce, dashboard, pin, float(timeout)
        self._unanswered = False  # the scheduler let a question go unanswered: nothing more is asked of it
        self._cpus: dict = {}
        if compile_cache is False:
            self.compile_cache = None
        else:
            cache = Path(compile_cache).expanduser() if compile_cache else default_compilation_cache()
            self.compile_cache = str(cache) if cache is not None else None
        self.client = client
        self.cluster = None
        self._owns_client = client is None
        self._started = client is not None
        self._announced = False
        self._serves_dashboard = False
        self._numerics = None
        if client is not None:
            self._setup_workers()

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> "DaskExecutor":
        """Start the local cluster or connect to the scheduler (idempotent)."""
        if self._started:
            return self
        if self.compile_cache:
            Path(self.compile_cache).mkdir(parents=True, exist_ok=True)
        if self.scheduler is not None:
            probe_scheduler(self.scheduler, None if self.timeout >= PROBE_SECONDS else self.timeout)
            try:
                self.client = within(self.timeout + 5, f"--scheduler {self.scheduler}",
                                      lambda: Client(self.scheduler, timeout=f"{self.timeout:g}s"))
            except (OSError, TimeoutError, MemoryError, ValueError) as err:
                raise ExecutorError(f"--scheduler {self.scheduler}: cannot connect to a Dask scheduler there "
                                    f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})") from None
            self._wait_for_a_worker()
        else:
            n = self.workers or cpu_count()
            self._cpus = core_groups(n) if self.pin else {}
            self._serves_dashboard = self.dashboard and _has_bokeh()
            # Tasks are handed to workers as soon as they are submitted (no queue on the scheduler), so a
            # worker has its next chunk at hand when one finishes: -2/3 of the Dask overhead per chunk.
            # Workers keep glibc's default trim threshold: Dask's 64 KiB returns every freed XLA buffer
            # to the OS and pays page faults to get it back (chunks ran 10-30% slower than in the client).
            pre = {k: v for k, v in (dask.config.get("distributed.nanny.pre-spawn-environ", None) or {}).items()
                   if k != "MALLOC_TRIM_THRESHOLD_"}
            # No statistical profiler in the workers: it samples the task thread's stack every 10 ms and,
            # on a worker pinned to one core, takes its time from the chunk. Given to each nanny (its
            # `config`), so that a worker it restarts has it too (a dask.config.set here does not last).
            with dask.config.set({"distributed.scheduler.worker-saturation": float("inf"),
                                  "distributed.nanny.pre-spawn-environ": pre}), _workers_start(n):
                self.cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                            dashboard_address=":0",  # the scheduler's HTTP server on a free port
                                            scheduler_kwargs={"dashboard": self._serves_dashboard},
                                            env=self._worker_env(),
                                            # warnings of the cluster (a nanny restarting or killing a
                                            # worker at close) only when the command may speak (not -q)
                                            silence_logs=logging.WARNING if self.announce else logging.ERROR,
                                            config={"distributed.worker.profile.enabled": False})
            self.client = Client(self.cluster)
        self._started = True
        try:
            self._setup_workers()
        except (OSError, CommClosedError, TimeoutError) as err:
            self.close()
            raise ExecutorError(f"dask: the workers could not be set up ({type(err).__name__}: "
                                f"{str(err).splitlines()[0] if str(err) else 'no detail'}); a worker that dies as "
                                "it starts cannot import tabsim or JAX, or has too little memory") from None
        return self

    def _wait_for_a_worker(self) -> None:
        """A scheduler that no worker has joined would hold every chunk for ever, in silence: wait at most
        :data:`WORKER_WAIT_SECONDS` for one, saying so, then give up with a message."""
        try:
            if self.ask(self.client.scheduler_info).get("workers"):
                return
        except Exception:  # noqa: BLE001  (the wait below tells)
            pass
        wait = WORKER_WAIT_SECONDS
        print(f"--scheduler {self.scheduler}: no worker has joined this scheduler; waiting up to {wait:g} s for one",
              file=sys.stderr, flush=True)
        try:
            self.client.wait_for_workers(1, timeout=wait)
        except (TimeoutError, OSError) as err:
            self.close()
            raise ExecutorError(f"--scheduler {self.scheduler}: no worker joined the scheduler within {wait:g} s "
                                f"({type(err).__name__}); start workers for it (dask worker {self.scheduler}) or "
                                "run on a local cluster (--executor dask --workers N)") from None

    def _worker_env(self) -> dict:
        env = {"XLA_FLAGS": defaults.xla_flags()}
        env["TABSIM_COMPILATION_CACHE"] = self.compile_cache or "0"  # "0": none (tabsim.runtime.cache)
        return env

    def _setup_workers(self) -> None:
        self._numerics = numerics()
        if self._cpus:
            self.client.register_plugin(TabsimCoresPlugin(self._cpus), name="tabsim-cores")
        # answered once every worker has set up (imported JAX): longer than a question, still bounded
        self.ask(self.client.register_plugin, TabsimWorkerPlugin(self._numerics, self.compile_cache), "tabsim",
                 seconds=max(self.timeout, SETUP_SECONDS))
        if self.announce and not self._announced:
            self._announced = True
            link = self.dashboard_link
            if link:
                print(f"dask dashboard: {link}", file=sys.stderr, flush=True)

    def close(self) -> None:
        """Close the client and the local cluster this executor started (an external cluster keeps running),
        each given at most ``timeout`` seconds (a scheduler that went away is not waited for longer)."""
        client, cluster = self.client, self.cluster
        self.cluster = None
        if client is not None and self._owns_client:
            self.client = None
            with contextlib.suppress(Exception):
                within(self.timeout + 5, "dask", lambda: client.close(timeout=self.timeout))
        if cluster is not None:
            with contextlib.suppress(Exception):
                within(self.timeout + 5, "dask", lambda: cluster.close(timeout=self.timeout))
        self._started = self.client is not None

    def ask(self, fn: Callable, *args, seconds: float | None = None):
        """``fn(*args)``, a call that waits for the scheduler, given at most ``timeout`` seconds (else
        ``seconds``): a scheduler that answers nothing for that long is an :class:`ExecutorError`, and is
        asked nothing more."""
        if self._unanswered:
            raise ExecutorError(self._silence())
        try:
            return within(seconds or self.timeout, "dask", lambda: fn(*args), message=self._silence(seconds))
        except ExecutorError:
            self._unanswered = True
            raise

    def _silence(self, seconds: float | None = None) -> str:
        where = f" at {self.scheduler}" if self.scheduler else ""
        return (f"dask: the scheduler{where} answered nothing within {seconds or self.timeout:g} s (stopped, "
                "overloaded, or its machine is gone); chunks already finished are kept: rerun the same command "
                "with --resume to continue (--dask-timeout SECONDS waits longer)")

    def __enter__(self) -> "DaskExecutor":
        return self.start()

    def __exit__(self, *exc) -> bool:
        self.close()
        return False

    # -- facts about the cluster --------------------------------------------------------------
    @property
    def dashboard_link(self) -> str | None:
        """The dashboard URL, or None when the scheduler serves none (it needs ``bokeh`` where it runs)."""
        self.start()
        if self.cluster is not None and not self._serves_dashboard:
            return None
        try:
            if "dashboard" not in self.ask(self.client.scheduler_info).get("services", {}):
                return None
            if self.cluster is None and not self.ask(self.client.run_on_scheduler, _has_bokeh):
                return None
        except Exception:
            return None
        return self.client.dashboard_link

    @property
    def address(self) -> str:
        """The scheduler address (what ``--scheduler`` takes)."""
        self.start()
        return self.client.scheduler.address

    def worker_pids(self) -> dict[str, int]:
        """``{worker address: process id}`` of the workers now connected."""
        self.start()
        return self.ask(self.client.run, os.getpid)

    @property
    def memory_limit(self) -> int | None:
        """The smallest memory limit of the workers now connected, in bytes (None: no limit)."""
        self.start()
        info = self.ask(lambda: self.client.scheduler_info(n_workers=-1))
        limits = [w.get("memory_limit") or 0 for w in info["workers"].values()]
        limits = [x for x in limits if x > 0]
        return min(limits) if limits else None

    @property
    def threads(self) -> int:
        """Chunks the cluster computes at a time: its workers' threads (1 when it cannot say); a run's plan
        records it (:class:`tabsim.runtime.planning.RunPlan`)."""
        try:
            return max(1, sum(self.ask(self.client.nthreads).values()))
        except ExecutorError:  # a scheduler that does not answer ends the run
            raise
        except Exception:
            return 1

    # -- running chunks -----------------------------------------------------------------------
    def imap_unordered(self, fn: Callable, items: Iterable) -> Iterator[tuple[int, object]]:
        """Yield ``(position, fn(item))`` as chunks finish anywhere on the cluster.

        Chunks go through distributed's :class:`concurrent.futures.Executor` (``client.get_executor``);
        at most ``in_flight`` are submitted ahead, and when the caller stops iterating (an error, an
        interrupt) the chunks still queued are cancelled.
        """
        self.start()
        window = self.in_flight or max(16, 8 * self.threads)
        tag = f"tabsim-{getattr(fn, '__name__', type(fn).__name__)}-{uuid.uuid4().hex[:8]}"
        pool = self.client.get_executor(retries=self.retries, pure=False)
        todo = iter(enumerate(items))
        pending: dict = {}  # future -> position

        def submit() -> None:
            for pos, item in itertools.islice(todo, 1):
                pending[pool.submit(run_task, fn, item, self._numerics, self.compile_cache, key=f"{tag}-{pos}")] = pos

        for _ in range(window):
            submit()
        lost = LostWorkers(self)
        try:
            while pending:
                done, _ = cf.wait(pending, timeout=CHECK_SECONDS, return_when=cf.FIRST_COMPLETED)
                if not done:
                    lost.check()
                for fut in done:
                    pos = pending.pop(fut)
                    if fut.cancelled():  # the scheduler went away (its error is no chunk)
                        raise ExecutorError(f"dask: chunk {pos} was cancelled: the scheduler or its cluster went away "
                                            "during the run; finished chunks are kept: rerun the same command with "
                                            "--resume to continue")
                    try:
                        out = fut.result()
                    except KilledWorker as err:
                        raise ExecutorError(f"a chunk was lost with every worker that ran it ({err}); a worker that "
                                            "runs out of memory is killed: use smaller chunks (train.chunk_conditions) "
                                            "or workers with more memory") from None
                    submit()
                    lost.progress()
                    yield pos, out
        finally:
            if pending and self.client is not None and not self._unanswered:
                with contextlib.suppress(Exception):
                    self.ask(pool.shutdown, False)  # cancels the chunks not yet finished

    def map(self, fn: Callable, items: Iterable) -> Iterator:
        """``fn(item)`` for every item, in order (chunks still run in parallel)."""
        items = list(items)
        got: dict = {}
        nxt = 0
        for pos, out in self.imap_unordered(fn, items):
            got[pos] = out
            while nxt in got:
                yield got.pop(nxt)
                nxt += 1

    def __repr__(self) -> str:
        where = self.scheduler or (f"{self.workers} local workers" if self.workers else "local cluster")
        return f"DaskExecutor({where}{'' if self._started else ', not started'})"


@contextlib.contextmanager
def _workers_start(n: int):
    """Around a local cluster's start: its workers dying as they start is one :class:`ExecutorError`."""
    try:
        yield
    except Exception as err:  # noqa: BLE001 - distributed raises RuntimeError, TimeoutError, OSError...
        why = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else 'no detail'}"
        raise ExecutorError(f"dask: the {n} local worker(s) died as they started ({why}); a worker that dies as it "
                            "starts cannot import tabsim or JAX, or has too little memory") from None


def _has_bokeh() -> bool:
    return importlib.util.find_spec("bokeh") is not None


__all__ = ["DaskExecutor", "TabsimWorkerPlugin", "TabsimCoresPlugin", "core_groups", "pin_process", "prepare_worker",
           "run_task"]
