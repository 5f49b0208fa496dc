"""Trackers: a run's per-step metrics, config and partition read back with each tracker's own reader."""
from __future__ import annotations

import importlib.util

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
