"""Trackers: a run's per-step metrics, config and partition read back with each tracker's own reader."""
from __future__ import annotations

import importlib.util
import socket
import threading

import numpy as np
import pytest
from click.testing import CliRunner

import tabsim as ts
from tabsim.runtime import trackers

BASE = {"preset": "paper", "task": {"n_prompts": 8}, "train": {"steps": 4, "eval_every": 2, "seeds": 2,
                                                              "batch_size": 4, "group_size": 4},
        "sweep": {"prior_strength": [0.3, 0.6]}}


@pytest.fixture(scope="module")
def plain():
    return ts.run(BASE, progress=False)


def means(frame, prior: float, metric: str, arm: str) -> np.ndarray:
    """The mean over seeds of ``metric`` for ``arm`` at every evaluated step, from the frame itself."""
    sub = frame[(frame["prior_strength"] == prior) & (frame["arm"] == arm)]
    return sub.groupby("step")[metric].mean().to_numpy()


def test_mlflow_reads_back_each_condition_config_and_partition(plain, tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    uri = (tmp_path / "mlruns").as_uri()
    res = ts.run(BASE, progress=False, tracker=trackers.MlflowTracker(uri, run_name="t"))
    assert res.frame.equals(plain.frame)  # the tracker changes nothing in the results
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 reads its file store only when allowed
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("tabsim").experiment_id])
    parent = next(r for r in runs if r.info.run_name == "t")
    assert parent.data.params["preset"] == "paper" and parent.data.params["train.steps"] == "4"
    children = {r.data.tags["prior_strength"]: r for r in runs if r.data.tags.get("mlflow.parentRunId")}
    assert sorted(children) == ["0.3", "0.6"]
    for prior in (0.3, 0.6):
        run_id = children[str(prior)].info.run_id
        hist = client.get_metric_history(run_id, "pass1/true")
        assert [m.step for m in hist] == [0, 2, 4]
        np.testing.assert_allclose([m.value for m in hist], means(plain.frame, prior, "pass1", "true"), rtol=1e-12)
        elicit = [m.value for m in client.get_metric_history(run_id, "partition/d_elicit")]
        want = means(plain.frame, prior, "pass1", "majority") - means(plain.frame, prior, "pass1", "random")
        np.testing.assert_allclose(elicit, want, rtol=1e-9, atol=1e-12)


def test_tensorboard_reads_back_each_condition(plain, tmp_path):
    pytest.importorskip("tensorboardX")
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tracker = trackers.TensorBoardTracker(tmp_path / "runs", run_name="t")
    res = ts.run(BASE, progress=False, tracker=tracker)
    assert res.frame.equals(plain.frame)
    for prior in (0.3, 0.6):
        acc = EventAccumulator(str(tracker.dir / f"prior_strength={prior}"))
        acc.Reload()
        assert {"pass1/true", "pass1/frozen", "partition/d_total"} <= set(acc.Tags()["scalars"])
        events = acc.Scalars("pass1/majority")
        assert [e.step for e in events] == [0, 2, 4]
        # TensorBoard keeps float32 scalars
        np.testing.assert_allclose([e.value for e in events], means(plain.frame, prior, "pass1", "majority"),
                                   rtol=1e-6)
    root = EventAccumulator(str(tracker.dir))
    root.Reload()
    assert "config/text_summary" in root.Tags()["tensors"]


def test_a_missing_tracker_library_is_one_line_naming_the_extra(monkeypatch, tmp_path):
    from tabsim.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mlflow" else real(name, *a))
    with pytest.raises(trackers.TrackerError, match=r'pip install "tabsim\[track\]"'):
        ts.run(BASE, tracker="mlflow")
    res = CliRunner().invoke(main, ["sweep", "--track", "mlflow", "--out", str(tmp_path / "o"), "-q"])
    assert res.exit_code == 2, res.output
    assert res.output.strip().splitlines()[-1].endswith('pip install "tabsim[track]"'), res.output
    assert "--track mlflow" in res.output and not (tmp_path / "o").exists()


def table_with_a_gap():
    """Two conditions of three steps; one value missing (not written by either path)."""
    import pandas as pd

    sub = pd.DataFrame({"pass1/true": [0.1, 0.25, 1 / 3], "partition/d_elicit": [0.0, np.nan, -0.125]},
                       index=pd.Index([0, 5, 10], name="step"))
    return [({"prior_strength": 0.3}, sub), ({"prior_strength": 0.6}, sub * 2)]


def read_children(client, experiment_id, parent_name):
    """Per child of ``parent_name``: every metric's history as (step, value) pairs, and its latest values."""
    runs = client.search_runs([experiment_id])
    parent = next(r for r in runs if r.info.run_name == parent_name)
    out = {}
    for r in runs:
        if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id:
            hist = {k: [(m.step, m.value) for m in client.get_metric_history(r.info.run_id, k)]
                    for k in r.data.metrics}
            out[r.data.tags["prior_strength"]] = (hist, r.data.metrics, r.data.params, r.info.status)
    return out


def test_mlflow_metrics_go_through_the_public_clients_log_batch(tmp_path, monkeypatch):
    """Every metric point reaches a local file store through MLflow's public client (``log_batch``), none is
    written into the store's files by tabsim, and the series read back through the client as sent."""
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    sent = []
    real = MlflowClient.log_batch

    def counting(self, run_id, metrics=(), **kw):
        sent.extend(metrics)
        return real(self, run_id, metrics=metrics, **kw)

    monkeypatch.setattr(MlflowClient, "log_batch", counting)
    uri = (tmp_path / "mlruns").as_uri()
    tracker = trackers.MlflowTracker(uri, run_name="run", process=False)
    tracker.log_conditions(table_with_a_gap())
    tracker.close()
    assert len(sent) == 2 * (3 + 2)  # two conditions of three steps; one value missing
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("tabsim").experiment_id
    children = read_children(client, exp, "run")
    hist, latest, params, status = children["0.3"]
    assert hist == {"pass1/true": [(0, 0.1), (5, 0.25), (10, 1 / 3)], "partition/d_elicit": [(0, 0.0), (10, -0.125)]}
    assert latest == {"pass1/true": 1 / 3, "partition/d_elicit": -0.125}
    assert params == {"prior_strength": "0.3"} and status == "FINISHED"
    assert children["0.6"][0]["pass1/true"] == [(0, 0.2), (5, 0.5), (10, 2 / 3)]


class Failing:
    name = "failing"

    def log_conditions(self, table):
        raise RuntimeError("disk full\nsecond line of the report")

    def close(self):
        pass


class Recording:
    def __init__(self):
        self.calls = []

    def log_conditions(self, table):
        self.calls.append("log_conditions")

    def close(self):
        self.calls.append("close")


def test_a_failing_tracker_is_one_line_and_the_others_are_still_written_and_closed():
    import pandas as pd

    frame = pd.DataFrame({"seed": [0, 0], "arm": ["true", "true"], "step": [0, 1], "pass1": [0.1, 0.2]})
    other = Recording()
    tk = trackers.Trackers([Failing(), other])
    tk.log_frame(frame, [])
    with pytest.raises(trackers.TrackerError) as err:
        tk.close()
    assert str(err.value) == "tracker failing: log_conditions failed: RuntimeError: disk full"
    assert other.calls == ["log_conditions", "close"]


def test_a_tracker_that_cannot_write_fails_the_command_in_one_line_after_the_results(tmp_path):
    pytest.importorskip("mlflow")
    from tabsim.cli import main

    out = tmp_path / "o"
    args = ["sweep", "--preset", "paper", "--vary", "prior_strength=0.3,0.6", "--seeds", "2", "--steps", "4",
            "--set", "task.n_prompts=8", "--set", "train.eval_every=2", "--set", "train.batch_size=4",
            "--set", "train.group_size=4", "--no-figure", "-q", "--track", "mlflow", "--out", str(out)]
    blocked = tmp_path / "a-file"
    blocked.write_text("")  # the store's folder would be inside a file
    res = CliRunner().invoke(main, args, env={"MLFLOW_TRACKING_URI": (blocked / "mlruns").as_uri()})
    assert res.exit_code == 1, res.output
    last = res.output.strip().splitlines()[-1]
    assert last.startswith("Error: tracker mlflow: start failed: NotADirectoryError") and str(out) in last, last
    assert (out / "results.parquet").is_file() and (out / "provenance.json").is_file()


# the sweep of the command test above: one compiled program for the file
SWEEP = ["sweep", "--preset", "paper", "--vary", "prior_strength=0.3,0.6", "--seeds", "2", "--steps", "4",
         "--set", "task.n_prompts=8", "--set", "train.eval_every=2", "--set", "train.batch_size=4",
         "--set", "train.group_size=4", "--no-figure", "-q"]
# far above the deadline asked (1 s, tried twice, after the writer's import of MLflow on a busy machine) and
# far below MLflow's own (a silent server: 8 tries of 120 s; a closed port: 7 retries backing off, 4 minutes)
OUTER_BOUND = 90.0


@pytest.fixture
def silent_server():
    """A port where a server accepts connections and never answers."""
    server = socket.create_server(("127.0.0.1", 0))
    held, stop = [], threading.Event()

    def accept():
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1]
    stop.set()
    server.close()
    for conn in held:
        conn.close()


@pytest.fixture
def closed_port():
    """A port where nothing listens (bound and released: connections to it are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_cli(args, env):
    """The command in this process, on a thread given :data:`OUTER_BOUND` seconds: a hang fails the test."""
    from tabsim.cli import main

    box = {}
    thread = threading.Thread(target=lambda: box.update(res=CliRunner().invoke(main, args, env=env)), daemon=True)
    thread.start()
    thread.join(OUTER_BOUND)
    assert not thread.is_alive(), f"the command was still running after {OUTER_BOUND:g} s"
    return box["res"]


@pytest.mark.parametrize("server, why", [("silent_server", "answered nothing within 1 s (tried 2 times"),
                                         ("closed_port", "cannot connect to the tracking server")])
def test_a_silent_or_absent_tracking_server_fails_the_tracker_in_one_line_within_the_deadline(
        request, tmp_path, server, why):
    pytest.importorskip("mlflow")
    uri = f"http://127.0.0.1:{request.getfixturevalue(server)}"
    out = tmp_path / "o"
    res = run_cli([*SWEEP, "--track", "mlflow", "--track-timeout", "1", "--out", str(out)],
                  env={"MLFLOW_TRACKING_URI": uri})
    assert res.exit_code == 1, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1, res.output
    assert lines[0].startswith(f"Error: tracker mlflow: start failed: ") and why in lines[0], lines[0]
    assert uri in lines[0] and str(out) in lines[0]
    assert (out / "results.parquet").is_file() and (out / "provenance.json").is_file()
