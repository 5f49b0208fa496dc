"""Stream a run's per-step metrics, its config and its partition to an experiment tracker.

Two trackers, each written through its own client library (the ``track`` extra,
``pip install "tabsim[track]"``):

* ``mlflow`` (:class:`MlflowTracker`): one parent run holding the config (as parameters and as
  ``config.json``), and one child run per condition, tagged with its factor levels, holding the metrics
  ``METRIC/ARM`` and the partition's terms ``partition/TERM`` at every evaluated step. The store is
  ``$MLFLOW_TRACKING_URI``, else a local file store ``./mlruns`` (``mlflow ui`` reads it). Everything,
  the metrics' series included, goes through MLflow's public client (``MlflowClient``: ``log_batch``,
  1000 points a call); tabsim never writes into a store's files itself.
* ``tensorboard`` (:class:`TensorBoardTracker`, written with ``tensorboardX``): one folder per run under
  ``./runs``, the config as text and one sub-folder per condition with the same scalars
  (``tensorboard --logdir runs`` reads it).

The metrics are means over seeds. Nothing is written from inside the compiled program: the tracker is fed
from the host after the programs return (a sweep's groups too), so a run without a tracker is
unchanged. A tracking server is waited for at most ``timeout`` seconds per request (``--track-timeout``,
30 s; :func:`tabsim.runtime.mlflow_io.bounded`), so a dead or silent one fails the tracker in one line
after the results are written. MLflow is imported and written in a writer process
(:mod:`tabsim.runtime.writer_process`, ``MlflowTracker(process=False)``: on :class:`Trackers`'s thread
instead), started when the tracker opens
(at the start of the run) and reused by the runs after it in the same process: the run's process never
imports MLflow (about 0.8 s of CPU that would hold its GIL beside the training) and only hands the
condition tables over; a writer process that dies or stops is reported in one line at the end of the run.
What is left is the writing itself, after the program returns (for the ``paper`` prior sweep, 5
conditions, 0.2-0.3 s), and the writer's start and import (about 1.8 s of CPU, once per process) competing
for the cores with the training: ``experiments/bench_track.py`` measures both (docs/performance.md).
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import importlib.util
import json
import re
import socket
import time
import types
from pathlib import Path

import numpy as np
import pandas as pd

from tabsim.base import defaults
from tabsim.runtime import writer_process
from tabsim.runtime.mlflow_io import TIMEOUT_SECONDS, bounded, file_store, flat, unreachable

TRACKERS = {"mlflow": "mlflow", "tensorboard": "tensorboardX"}  # name -> the module it writes with
EXTRA = 'pip install "tabsim[track]"'
NOT_METRICS = ("seed", "arm", "step")
# a writer process that finishes no call for this many timeouts (at least STALL_SECONDS: its import of MLflow
# on a busy machine) is ended: a name that never resolves, a server that trickles, what a request's timeout
# does not bound
STALL_FACTOR, STALL_SECONDS = 5, 60.0


class TrackerError(ValueError):
    """An unknown tracker, or one whose client library is not installed (one line naming the extra)."""


def check(name: str) -> None:
    """Refuse an unknown tracker name, or one whose library is missing, with a one-line message."""
    if name not in TRACKERS:
        raise TrackerError(f"tracker {name!r}: unknown; allowed: {', '.join(TRACKERS)}")
    try:
        found = importlib.util.find_spec(TRACKERS[name]) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise TrackerError(f"tracker {name}: {TRACKERS[name]} is not installed; it comes with the track extra: "
                           f"{EXTRA}")


def preload(names) -> None:
    """Start importing the client libraries of the trackers ``names`` now, where they will write (MLflow: in
    the writer process), so that the import goes on beside the command's own start-up; tensorboardX is
    imported here, at once: one that is installed but broken is refused before the run (:class:`TrackerError`)."""
    if "mlflow" in names and writer_process.available():
        writer_process.prestart((__name__, "mlflow.tracking", "mlflow.entities"))
    if "tensorboard" in names:
        tensorboardx()


def condition_table(frame: pd.DataFrame, factors: list[str], terms: dict | None = None) -> list[tuple[dict, pd.DataFrame]]:
    """Per condition: its factor levels, and a frame indexed by step with the mean over seeds of every metric
    per arm (columns ``METRIC/ARM``) and of every partition term whose arms ran (``partition/TERM``; ``terms``
    maps a term to its (minuend, subtrahend) arms, as :data:`tabsim.runtime.run.TERM_ARMS`)."""
    factors = [f for f in factors if f in frame]
    metrics = [c for c in frame.columns if c not in NOT_METRICS and c not in factors
               and pd.api.types.is_numeric_dtype(frame[c])]
    means = frame.groupby(factors + ["step", "arm"], observed=True, sort=False)[metrics].mean()
    wide = means.unstack("arm")  # rows: condition x step; columns: (metric, arm)
    arms = list(wide.columns.get_level_values(1).unique())
    cols = {f"{m}/{a}": wide[(m, a)].to_numpy() for m, a in wide.columns}
    if "pass1" in metrics:
        for term, (a, b) in (terms or {}).items():
            if a in arms and b in arms:
                cols[f"partition/{term}"] = wide[("pass1", a)].to_numpy() - wide[("pass1", b)].to_numpy()
    table = pd.DataFrame(cols, index=wide.index)
    if not factors:
        return [({}, table)]
    return [(dict(zip(factors, key if isinstance(key, tuple) else (key,))), sub.droplevel(factors))
            for key, sub in table.groupby(level=factors, observed=True, sort=False)]


def label(values: dict) -> str:
    """``prior_strength=0.35,algo.estimator=grpo`` (``run`` for a run without factors)."""
    return ",".join(f"{k}={v}" for k, v in values.items()) or "run"


class MlflowTracker:
    """A tabsim run as an MLflow parent run with one child run per condition (module docstring).

    Every point goes through the client's ``log_batch``, whatever the store. ``process``: write
    from the writer process (:mod:`tabsim.runtime.writer_process`; None: where one can start), so that this
    process never imports MLflow; False: in this process (on the thread :class:`Trackers` writes from)."""

    name = "mlflow"

    def __init__(self, uri: str | None = None, *, experiment: str = "tabsim", run_name: str | None = None,
                 process: bool | None = None, timeout: float = TIMEOUT_SECONDS):
        check("mlflow")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError(f"timeout: {timeout!r} is not a number of seconds > 0")
        self.uri = uri or defaults.mlflow_tracking_uri() or Path("mlruns").resolve().as_uri()
        self.experiment, self.run_name, self.client = experiment, run_name, None
        self.timeout, self.failed = timeout, False
        self.process = writer_process.available() if process is None else process
        self.remote: writer_process.Remote | None = None

    def _open_remote(self) -> writer_process.Remote:
        if self.remote is None:
            kwargs = {"uri": self.uri, "experiment": self.experiment, "run_name": self.run_name,
                      "process": False, "timeout": self.timeout}
            self.remote = writer_process.Remote(f"{__name__}:MlflowTracker", kwargs, environ=("MLFLOW_",),
                                                stall_seconds=max(STALL_SECONDS, STALL_FACTOR * self.timeout))
            self.remote.call("start")
        return self.remote

    @property
    def pid(self) -> int | None:
        """The id of the process that writes (None until it is started, and when it is this one)."""
        return self.remote.pid if self.remote is not None else None

    @contextlib.contextmanager
    def _client_calls(self):
        """The client's calls with MLflow's settings (:func:`file_store`, :func:`bounded`): a server not
        answered or refusing is one line (:func:`unreachable`); after any error the later calls are skipped
        (each would wait for the same server again)."""
        try:
            with file_store(self.uri), bounded(self.timeout):
                yield
        except Exception as err:
            self.failed = True
            short = unreachable(err, self.uri, self.timeout)
            if short is not None:
                raise short from None
            raise

    def start(self) -> None:
        """Import MLflow and open the parent run, in the writer process (else on :class:`Trackers`'s writer
        thread), so that MLflow's import of about a second goes on beside the compilation and the training."""
        if self.process:
            self._open_remote()
            return
        if self.client is not None or self.failed:
            return
        from mlflow.tracking import MlflowClient  # lazy: the track extra

        experiment, run_name = self.experiment, self.run_name
        with self._client_calls():
            client = MlflowClient(tracking_uri=self.uri)
            exp = client.get_experiment_by_name(experiment)
            self.experiment_id = exp.experiment_id if exp is not None else client.create_experiment(experiment)
            self.run_id = client.create_run(self.experiment_id, run_name=run_name or "tabsim").info.run_id
            self.client = client

    def log_config(self, config: dict) -> None:
        if self.process:
            return self._open_remote().call("log_config", config)
        self.start()
        if not self.failed:
            with self._client_calls():
                self._log_config(config)

    def log_conditions(self, table: list[tuple[dict, pd.DataFrame]]) -> None:
        if self.process:
            return self._open_remote().call("log_conditions", table)
        self.start()
        if not self.failed:
            with self._client_calls():
                self._log_conditions(table)

    def close(self) -> None:
        """Close the parent run (in the writer process: wait for everything written, and raise its first
        error, or the writer process's failure, as one line)."""
        if self.process:
            try:
                return self._open_remote().close()
            except writer_process.WriterError as err:
                raise TrackerError(f"tracker mlflow: {err}") from None
        self.start()
        if not self.failed:
            with self._client_calls():
                self.client.set_terminated(self.run_id)

    def _log_config(self, config: dict) -> None:
        from mlflow.entities import Param  # lazy: mlflow is an optional extra

        params = [Param(k, v[:6000]) for k, v in flat(config).items()]
        for i in range(0, len(params), 100):  # MLflow's limit per batch
            self.client.log_batch(self.run_id, params=params[i:i + 100])
        self.client.log_dict(self.run_id, config, "config.json")

    def _log_conditions(self, table: list[tuple[dict, pd.DataFrame]]) -> None:
        from mlflow.entities import Param  # lazy: mlflow is an optional extra

        now = int(time.time() * 1000)
        for values, sub in table:
            tags = {"mlflow.parentRunId": self.run_id, **{k: str(v) for k, v in values.items()}}
            child = self.client.create_run(self.experiment_id, run_name=label(values), tags=tags).info.run_id
            if values:
                self.client.log_batch(child, params=[Param(k, str(v)) for k, v in values.items()])
            self._log_batches(child, sub, now)
            self.client.set_terminated(child)

    def _log_batches(self, run_id: str, sub: pd.DataFrame, now: int) -> None:
        """Every finite value of ``sub`` through the client, 1000 metrics a call (MLflow's limit per batch)."""
        from mlflow.entities import Metric  # lazy: mlflow is an optional extra

        steps = sub.index.to_numpy()
        metrics = [Metric(key, float(v), now, int(s)) for key in sub.columns
                   for s, v in zip(steps, sub[key].to_numpy()) if np.isfinite(v)]
        for i in range(0, len(metrics), 1000):
            self.client.log_batch(run_id, metrics=metrics[i:i + 1000])


class TensorBoardTracker:
    """A tabsim run as a TensorBoard log folder with one sub-folder per condition (module docstring).

    The event files are written with tensorboardX's record writer and protocol buffers, on the caller's
    thread (:class:`Trackers`'s): not through its ``SummaryWriter``, whose writing thread and exit hook
    would print a traceback of their own for a disk that fills, beside the one-line error. After an error
    the files are closed and the later calls skipped."""

    name = "tensorboard"

    def __init__(self, logdir: str | Path | None = None, *, run_name: str | None = None):
        check("tensorboard")
        self._pb = tensorboardx()
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.dir = Path(logdir or "runs") / _safe(f"{run_name or 'tabsim'}-{stamp}")
        self.root, self.failed = None, False

    def _open(self, folder: Path):
        """A record writer on a new event file in ``folder``, its first event the format's version."""
        folder.mkdir(parents=True, exist_ok=True)
        writer = self._pb.RecordWriter(str(folder / f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}"))
        writer.write(self._pb.Event(wall_time=time.time(), file_version="brain.Event:2").SerializeToString())
        return writer

    @contextlib.contextmanager
    def _writing(self, *files):
        """On an error in the block: close the root's and ``files``' event files (the error is raised as it
        is) and mark the tracker failed, so that its later calls are skipped."""
        try:
            yield
        except Exception:
            self.failed = True
            for writer in (self.root, *files):
                with contextlib.suppress(Exception):  # its error is the one raised; the file is closed anyway
                    writer.close()
            raise

    def start(self) -> None:
        """The run's folder and its event file (on :class:`Trackers`'s thread: a folder that cannot be made is
        the tracker's one-line error, after the results)."""
        if self.root is None and not self.failed:
            with self._writing():
                self.root = self._open(self.dir)

    def log_config(self, config: dict) -> None:
        self.start()
        if self.failed:
            return
        body = "```json\n" + json.dumps(config, indent=2, sort_keys=True) + "\n```"
        with self._writing():
            self.root.write(self._pb.Event(wall_time=time.time(), step=0, summary=self._pb.text("config", body))
                            .SerializeToString())
            self.root.flush()

    def log_conditions(self, table: list[tuple[dict, pd.DataFrame]]) -> None:
        self.start()
        Event, Summary = self._pb.Event, self._pb.Summary
        for values, sub in table:
            if self.failed:
                return
            with self._writing():
                writer = self._open(self.dir / _safe(label(values)))
            with self._writing(writer):
                keys, now = list(sub.columns), time.time()
                # one event per step holding every scalar (an event per scalar costs 30 times more)
                for step, row in zip(sub.index.to_numpy(), sub.to_numpy(np.float64)):
                    vals = [Summary.Value(tag=k, simple_value=float(v)) for k, v in zip(keys, row) if np.isfinite(v)]
                    writer.write(Event(wall_time=now, step=int(step), summary=Summary(value=vals)).SerializeToString())
                writer.close()

    def close(self) -> None:
        if self.root is not None and not self.failed:
            with self._writing():
                self.root.close()


def tensorboardx():
    """tensorboardX's ``Event``, ``RecordWriter``, ``Summary`` and ``text`` (a text summary); one that is
    installed but cannot be imported is one line (:class:`TrackerError`)."""
    try:
        from tensorboardX import record_writer  # lazy: the track extra
        from tensorboardX.proto.event_pb2 import Event
        from tensorboardX.proto.summary_pb2 import Summary
        from tensorboardX.summary import text
    except Exception as err:  # noqa: BLE001 - a broken install (a partial upgrade, a stray file) of any kind
        why = f"{type(err).__name__}: {(str(err).strip().splitlines() or ['no detail'])[0]}"
        raise TrackerError(f"tracker tensorboard: tensorboardX is installed but cannot be imported ({why}): "
                           'pip install --force-reinstall "tabsim[track]"') from None
    return types.SimpleNamespace(Event=Event, RecordWriter=record_writer.RecordWriter, Summary=Summary, text=text)


def _safe(name: str) -> str:
    """A folder name: characters other than letters, digits, ``._=,-`` become ``_``."""
    return re.sub(r"[^\w.=,-]", "_", name)


class Trackers:
    """Several trackers fed the same calls, on one writer thread of their own: a call returns at once, and
    the writing goes on beside what the caller does next (the next group, the results, the figures);
    :meth:`close` waits for it and raises the first error as one line (:class:`TrackerError`)."""

    def __init__(self, trackers: list, terms: dict | None = None):
        self.trackers, self.terms = trackers, terms
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="tabsim-tracker")
        self._pending: list = [self._pool.submit(_guarded, t, "start") for t in trackers if hasattr(t, "start")]

    def log_config(self, config: dict) -> None:
        for t in self.trackers:
            self._pending.append(self._pool.submit(_guarded, t, "log_config", config))

    def log_frame(self, frame: pd.DataFrame, factors: list[str]) -> None:
        """Every condition of ``frame``: its metrics per arm and its partition, at every evaluated step."""
        self._pending.append(self._pool.submit(self._log_frame, frame, list(factors)))

    def _log_frame(self, frame: pd.DataFrame, factors: list[str]) -> None:
        table = condition_table(frame, factors, self.terms)
        errors = [e for t in self.trackers if (e := _caught(_guarded, t, "log_conditions", table)) is not None]
        if errors:
            raise errors[0]

    def close(self) -> None:
        """Wait for the writing, close every tracker (each, even after another's failure), and raise the
        first error met."""
        errors = [e for f in self._pending if (e := f.exception()) is not None]
        self._pool.shutdown(wait=True)
        errors += [e for t in self.trackers if (e := _caught(_guarded, t, "close")) is not None]
        if errors:
            raise errors[0]


def _guarded(tracker, method: str, *args) -> None:
    """``tracker.method(*args)``, an error raised as one line naming the tracker (:class:`TrackerError`)."""
    try:
        getattr(tracker, method)(*args)
    except TrackerError:
        raise
    except Exception as err:  # noqa: BLE001 - any client error becomes one line naming its tracker
        first = (str(err).strip().splitlines() or [""])[0]
        name = getattr(tracker, "name", type(tracker).__name__)
        raise TrackerError(f"tracker {name}: {method} failed: {type(err).__name__}: {first}") from err


def _caught(fn, *args) -> Exception | None:
    try:
        fn(*args)
    except Exception as err:  # noqa: BLE001 - handed back to be raised after the other trackers ran
        return err
    return None


def make(name: str, directory: str | Path | None = None, *, run_name: str | None = None,
         timeout: float = TIMEOUT_SECONDS):
    """The tracker ``name`` writing under ``directory`` (``mlruns``/``runs`` inside it), else its default;
    ``timeout``: seconds a tracking server is waited for, per request (:class:`MlflowTracker`)."""
    check(name)
    if name == "mlflow":
        uri = (Path(directory) / "mlruns").resolve().as_uri() if directory is not None else None
        return MlflowTracker(uri, run_name=run_name, timeout=timeout)
    return TensorBoardTracker(Path(directory) / "runs" if directory is not None else None, run_name=run_name)


def open_trackers(spec, directory: str | Path | None = None, *, run_name: str | None = None,
                  terms: dict | None = None, timeout: float = TIMEOUT_SECONDS) -> Trackers | None:
    """A :class:`Trackers` for ``spec`` (a name, a list of names or tracker objects), None for ``spec`` None or
    empty. ``directory``: where named trackers write (:func:`make`); ``terms``: the partition's terms
    (:func:`condition_table`); ``timeout``: :func:`make`'s. Close it when done (:meth:`Trackers.close`)."""
    if spec is None or spec == () or spec == []:
        return None
    items = [spec] if isinstance(spec, str) or not isinstance(spec, (list, tuple)) else list(spec)
    for item in items:
        if isinstance(item, str):
            check(item)
    return Trackers([make(x, directory, run_name=run_name, timeout=timeout) if isinstance(x, str) else x
                     for x in items], terms)


@contextlib.contextmanager
def session(spec, directory: str | Path | None = None, *, run_name: str | None = None, terms: dict | None = None):
    """:func:`open_trackers` as a context that closes them at the end; an open :class:`Trackers` is yielded as
    it is (its opener closes it)."""
    if isinstance(spec, Trackers):
        yield spec
        return
    opened = open_trackers(spec, directory, run_name=run_name, terms=terms)
    try:
        yield opened
    finally:
        if opened is not None:
            opened.close()
