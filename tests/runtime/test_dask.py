"""The Dask executor against a real cluster: a LocalCluster of two single-threaded worker processes
started by :class:`tabsim.runtime.dask.DaskExecutor` once for the module.

Every run through the cluster must give the local executor's ``results.parquet`` byte for byte: a plain
run (through ``tabsim run --executor dask --scheduler``), a run during which a worker process is killed
with SIGKILL while it computes a chunk, and a run interrupted after two chunks and then resumed.
"""
from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest
from click.testing import CliRunner

pytest.importorskip("distributed")

import tabsim as ts  # noqa: E402
from tabsim.cli import main  # noqa: E402
from tabsim.runtime.dask import DaskExecutor, core_groups, run_task
from tabsim.runtime.executors import ExecutorError, numerics
from tabsim.runtime.planning import fit_memory  # noqa: E402
from tabsim.runtime.chunklog import saved_chunks  # noqa: E402
from tabsim.runtime.store import MARKER, staging_path  # noqa: E402

# 6 conditions in chunks of one (~0.02-0.1 s each once compiled: the worker-kill test strikes from a watcher
# thread as soon as a worker holds one, so the chunks need not be long)
CONFIG = """\
preset = "paper"
[train]
seeds = 4
steps = 100
group_size = 16
chunk_conditions = 1
[sweep]
prior_strength = [0.2, 0.35, 0.5, 0.65, 0.8, 0.9]
"""
N_CHUNKS = 6


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def run_args(config, out, *more):
    """``tabsim run`` of ``config`` into ``out``: quiet, and no figure (the results' bytes are compared; a
    figure costs more than the run)."""
    return ("run", config, "--out", out, "-q", "--no-figure", *more)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cache = tmp_path_factory.mktemp("jax-cache")
    with DaskExecutor(workers=2, compile_cache=cache, announce=False, dashboard=False) as ex:
        yield ex


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    path = tmp_path_factory.mktemp("cfg") / "six.toml"
    path.write_text(CONFIG)
    return path


@pytest.fixture(scope="module")
def local_bytes(config, tmp_path_factory):
    out = tmp_path_factory.mktemp("local") / "out"
    res = cli(*run_args(config, out))
    assert res.exit_code == 0, res.output
    return (out / "results.parquet").read_bytes()


def marker(out) -> dict:
    return json.loads((out / MARKER).read_text())


def test_cluster_run_equals_local_and_leaves_external_cluster_running(cluster, config, local_bytes, tmp_path):
    out = tmp_path / "dask"
    res = cli(*run_args(config, out, "--executor", "dask", "--scheduler", cluster.address))
    assert res.exit_code == 0, res.output
    assert (out / "results.parquet").read_bytes() == local_bytes
    assert marker(out)["chunks_written"] == N_CHUNKS
    assert len(cluster.worker_pids()) == 2  # the command closed its client, not the cluster


def test_factorial_runner_through_the_cluster(cluster):
    base = {"preset": "paper", "train": {"steps": 20}}
    factors = {"prior": {"task.prior_strength": [0.3, 0.7]}, "lr": {"algo.lr": [0.05, 0.1]}}
    local = ts.run_factorial(base, factors, seeds=2, units_per_chunk=2, progress=False)
    with DaskExecutor(client=cluster.client, announce=False) as on_client:  # an open Client, left open
        remote = ts.run_factorial(base, factors, seeds=2, units_per_chunk=2, progress=False, executor=on_client)
    assert cluster.client.status == "running"
    assert remote.provenance["n_chunks_job"] == 4
    assert remote.frame.equals(local.frame)
    for col in local.frame.columns:
        if local.frame[col].dtype.kind == "f":
            assert local.frame[col].to_numpy().tobytes() == remote.frame[col].to_numpy().tobytes(), col


def test_worker_killed_mid_run(cluster, config, local_bytes, tmp_path, monkeypatch):
    """SIGKILL a worker that is computing a chunk of the run: the chunk is rescheduled, the run completes.

    A watcher thread polls the scheduler from the moment the run submits its chunks and kills the first
    worker seen holding one, so the kill cannot miss however fast the chunks finish.
    """
    client = cluster.client
    killed = {}
    inner = DaskExecutor.imap_unordered

    def watch(stop):
        while not stop.is_set():
            busy = {w: keys for w, keys in client.processing().items() if keys}
            if busy:
                victim = sorted(busy)[0]
                pid = client.run(os.getpid, workers=[victim])[victim]
                os.kill(pid, signal.SIGKILL)
                killed.update(pid=pid, keys=list(busy[victim]))
                return
            time.sleep(0.002)

    def killing(self, fn, items):
        stop = threading.Event()
        watcher = threading.Thread(target=watch, args=(stop,), daemon=True)
        watcher.start()
        try:
            yield from inner(self, fn, items)
        finally:
            stop.set()
            watcher.join(timeout=60)

    monkeypatch.setattr(DaskExecutor, "imap_unordered", killing)
    out = tmp_path / "killed"
    res = cli(*run_args(config, out, "--executor", "dask", "--scheduler", cluster.address))
    monkeypatch.undo()
    assert res.exit_code == 0, res.output
    assert killed.get("keys"), "no worker was seen computing a chunk"
    assert (out / "results.parquet").read_bytes() == local_bytes
    client.wait_for_workers(2, timeout=60)  # the nanny restarted it
    assert killed["pid"] not in client.run(os.getpid).values()
    assert_pinned(cluster)  # the restarted worker got its core again


def worker_cores(ex) -> dict:
    """Each worker's name and the cores of each of its threads."""
    def cores(dask_worker):
        return dask_worker.name, {tuple(sorted(os.sched_getaffinity(int(t)))) for t in os.listdir("/proc/self/task")}
    return dict(ex.client.run(cores).values())


def assert_pinned(ex):
    expected = core_groups(2)
    assert set(expected) == {0, 1}
    got = worker_cores(ex)
    assert got == {name: {tuple(cores)} for name, cores in expected.items()}, got


def test_local_workers_get_their_own_cores(cluster):
    """Two workers of a local cluster each hold their share of the cores in every thread (so each XLA
    thread pool is sized to it), and run without Dask's statistical profiler."""
    assert_pinned(cluster)
    if len(os.sched_getaffinity(0)) >= 2:
        a, b = (set(c) for c in core_groups(2).values())
        assert a and b and not a & b
    import dask

    assert set(cluster.client.run(lambda: dask.config.get("distributed.worker.profile.enabled")).values()) == {False}


@pytest.mark.parametrize("cores, n, expected", [
    ({0, 1}, 2, {0: [0], 1: [1]}),
    ({0, 1}, 1, {0: [0, 1]}),
    ({0, 1}, 3, {0: [0], 1: [1], 2: [0]}),
    (set(range(16)), 3, {0: list(range(0, 6)), 1: list(range(6, 11)), 2: list(range(11, 16))}),
    ({3, 5, 9}, 2, {0: [3, 5], 1: [9]}),
])
def test_core_groups_split_the_cores(cores, n, expected, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: cores)
    assert core_groups(n) == expected


def test_unpinned_workers_keep_every_core_and_the_executor_closes_the_cluster_it_started(tmp_path):
    """One single-worker cluster (each start is a scheduler and worker processes) for both checks."""
    with DaskExecutor(workers=1, compile_cache=tmp_path, announce=False, dashboard=False, pin=False) as ex:
        client, cluster = ex.client, ex.cluster
        assert len(ex.worker_pids()) == 1
        assert worker_cores(ex) == {0: {tuple(sorted(os.sched_getaffinity(0)))}}
    assert client.status == "closed"
    assert cluster.status.name == "closed"
    with pytest.raises(ValueError, match="workers"):
        DaskExecutor(workers=0)
    with pytest.raises(ValueError, match="scheduler"):
        DaskExecutor(scheduler="nowhere")


def test_interrupted_then_resumed(cluster, config, local_bytes, tmp_path, monkeypatch):
    """Ctrl-C in the client after two chunks; ``--resume`` computes only the other four."""
    inner = DaskExecutor.imap_unordered

    def interrupted(self, fn, items):
        for n, got in enumerate(inner(self, fn, items)):
            if n == 2:
                raise KeyboardInterrupt
            yield got

    out = tmp_path / "resumed"
    args = run_args(config, out, "--executor", "dask", "--scheduler", cluster.address)
    monkeypatch.setattr(DaskExecutor, "imap_unordered", interrupted)
    res = cli(*args)
    monkeypatch.undo()
    assert res.exit_code == 130, res.output
    assert not out.exists()
    assert saved_chunks(staging_path(out) / "chunks") == 2
    sent = []

    def counting(self, fn, items):
        items = list(items)
        sent.append(len(items))
        yield from inner(self, fn, items)

    monkeypatch.setattr(DaskExecutor, "imap_unordered", counting)
    res = cli(*args, "--resume")
    assert res.exit_code == 0, res.output
    assert sent == [N_CHUNKS - 2]
    assert (marker(out)["chunks_reused"], marker(out)["chunks_written"]) == (2, N_CHUNKS - 2)
    assert (out / "results.parquet").read_bytes() == local_bytes


def test_worker_with_other_numerics_refuses(cluster):
    """A task whose client has other XLA flags or versions is refused by the worker, not run."""
    mine = numerics()
    flags = {**mine, "XLA_FLAGS": mine["XLA_FLAGS"] + " --xla_cpu_enable_fast_math=true"}
    with pytest.raises(ExecutorError, match="XLA_FLAGS"):
        cluster.client.submit(run_task, abs, -1, flags, pure=False).result()
    versions = {**mine, "versions": {**mine["versions"], "jaxlib": "0.0.1"}}
    with pytest.raises(ExecutorError, match="jaxlib"):
        cluster.client.submit(run_task, abs, -1, versions, pure=False).result()
    source = {**mine, "versions": {**mine["versions"], "tabsim source": "0" * 16}}
    with pytest.raises(ExecutorError, match="tabsim source"):
        cluster.client.submit(run_task, abs, -1, source, pure=False).result()
    assert cluster.client.submit(run_task, abs, -1, mine, pure=False).result() == 1


def test_chunks_fit_the_worker_memory_limit(cluster):
    from tabsim.config import ConfigError
    from tabsim.runtime.planning import MEMORY_FRACTION, cap_chunk
    from tabsim.runtime.planning import RUNTIME_BYTES, estimate_bytes

    limit = cluster.memory_limit
    assert limit and limit > 0  # a LocalCluster splits the machine's memory among its workers

    class Worker(ts.LocalExecutor):  # runs here, reports a worker's memory limit
        def __init__(self, limit):
            self.memory_limit = limit

    cfg = ts.resolve({"preset": "paper", "train": {"steps": 4, "seeds": 2},
                      "sweep": {"prior_strength": [0.2, 0.35, 0.5, 0.65, 0.8]}})
    two = (estimate_bytes(cfg, 2, 2) + RUNTIME_BYTES) / MEMORY_FRACTION  # room for exactly two conditions
    assert cap_chunk(Worker(two), cfg, 5, 2) == 2
    assert cap_chunk(Worker(limit), cfg, 5, 2) == 5
    res = ts.run(cfg, executor=Worker(two), progress=False)
    assert res.provenance["n_chunks"] == 3
    with pytest.raises(ConfigError, match="memory: one condition x 2 seed"):
        cap_chunk(Worker(RUNTIME_BYTES), cfg, 5, 2)

    class Limited:
        memory_limit = 1000

    assert fit_memory(Limited(), 64, lambda n: 30 * n) == 16  # 16 * 30 <= 0.5 * 1000 < 17 * 30
    assert fit_memory(Limited(), 8, lambda n: 30 * n) == 8
    assert fit_memory(Limited(), 64, lambda n: 10**6 * n) == 1
    assert fit_memory(None, 64, lambda n: 10**9 * n) == 64


@pytest.mark.parametrize("args, words", [
    (["--workers", "0"], ["--workers", "0", ">= 1"]),
    (["--workers", "2"], ["--workers 2", "--executor dask"]),
    (["--scheduler", "tcp://localhost:8786"], ["--scheduler", "--executor dask"]),
    (["--executor", "dask", "--scheduler", "localhost:8786"], ["--scheduler", "localhost:8786", "SCHEME://HOST:PORT"]),
    (["--executor", "dask", "--scheduler", "tcp://host:99999"], ["--scheduler", "1..65535"]),
    (["--executor", "dask", "--workers", "2", "--scheduler", "tcp://a:1"], ["--workers and --scheduler"]),
    (["--executor", "ray"], ["--executor", "ray", "local", "dask"]),
])
@pytest.mark.parametrize("command", [["run", "x.toml"], ["sweep"], ["reproduce"], ["prereg", "run", "p.yaml"],
                                     ["audit", "t.yaml"]])
def test_bad_executor_options_refused(command, args, words, tmp_path):
    res = cli(*command, "--out", tmp_path / "o", *args)
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    for w in words:
        assert w in res.output, (w, res.output)
    assert not (tmp_path / "o").exists()


class _Reached(Exception):
    """Raised by a stand-in runner once it has seen the executor."""


@pytest.mark.parametrize("command, runner", [
    (["reproduce", "--seeds", "2", "--steps", "2"], "tabsim.studies.factorial.run_designs"),
    (["prereg", "run", "{plan}", "--exploratory"], "tabsim.prereg.runner.run_factorial"),
    (["audit", "{audits}", "--no-cache"], "tabsim.audit.calibrate.run"),
])
def test_commands_hand_the_executor_to_the_runner(command, runner, tmp_path, monkeypatch):
    """``--executor dask --workers 2`` reaches the function that runs the chunks (the cluster itself starts
    only when a chunk is about to run, so none is started here)."""
    import importlib
    import shutil
    from pathlib import Path

    from tabsim.audit import calibrate

    root = Path(__file__).resolve().parents[2]
    plan = tmp_path / "plan.yaml"
    shutil.copy(root / "preregistration" / "clipping_null" / "plan.yaml", plan)
    seen = {}

    def stand_in(*args, executor=None, **kwargs):
        seen["executor"] = executor
        raise _Reached

    module, name = runner.rsplit(".", 1)
    monkeypatch.setattr(importlib.import_module(module), name, stand_in)
    monkeypatch.setattr(calibrate, "_MEMO", {})  # the audit calibration is not taken from memory
    args = [a.format(plan=plan, audits=root / "experiments" / "audits") for a in command]
    res = cli(*args, "--out", tmp_path / "out", "-q", "--executor", "dask", "--workers", "2")
    assert isinstance(res.exception, _Reached), res.output
    ex = seen["executor"]
    assert isinstance(ex, DaskExecutor) and ex.workers == 2 and ex.client is None  # closed, never started


def test_a_run_in_segments_on_the_cluster_equals_the_local_one(cluster, monkeypatch):
    """A long chunk runs in segments inside the worker's task (no checkpoints there): the same frame."""
    from tabsim.runtime import planning

    cfg = ts.resolve({"preset": "paper", "task": {"n_prompts": 12}, "sweep": {"lr": [0.05, 0.1]},
                      "train": {"steps": 30, "seeds": 2, "batch_size": 4, "eval_every": 10}})
    monkeypatch.setattr(planning, "SEGMENT_UNITS", 1500)
    monkeypatch.setattr(planning, "SEGMENTED_ABOVE", 0)
    assert planning.steps_per_segment(cfg, 2, 2) is not None
    local = ts.run(cfg, progress=False).frame
    remote = ts.run(cfg, progress=False, executor=cluster).frame
    assert local.equals(remote)
