"""Optional parts are extras: Dask (``tabsim[dask]``) and the notebook front end (``tabsim[notebook]``)."""
from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# a process in which Dask cannot be imported (as after `pip install tabsim` without the extra)
NO_DASK = """
import sys
sys.modules["dask"] = None
sys.modules["distributed"] = None
from tabsim.cli import entry
sys.argv = ["tabsim", *sys.argv[1:]]
entry()
"""


def _extras() -> tuple[list[str], dict]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    return project["dependencies"], project["optional-dependencies"]


def test_dask_is_an_extra_and_the_suite_still_has_it():
    core, extras = _extras()
    assert not any(d.startswith(("dask", "distributed")) for d in core), core
    assert any(d.startswith("dask[distributed]") for d in extras["dask"])
    assert [d for d in extras["test"] if d.startswith("dask")] == [d for d in extras["dask"] if d.startswith("dask")]


def test_the_notebook_extra_opens_notebooks():
    _, extras = _extras()
    names = {d.split(">")[0].split("=")[0].split("[")[0].strip() for d in extras["notebook"]}
    assert {"jupyterlab", "jupytext", "ipykernel"} <= names, names


def test_executor_dask_without_the_extra_is_one_line_naming_it(tmp_path):
    proc = subprocess.run([sys.executable, "-c", NO_DASK, "sweep", "--vary", "prior_strength=0.3", "--seeds", "1",
                           "--steps", "2", "--out", str(tmp_path / "o"), "-q", "--executor", "dask", "--workers", "1"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and 'tabsim[dask]' in lines[0] and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "o").exists()


def test_the_python_api_names_the_extra_too():
    code = ("import sys; sys.modules['distributed'] = None\n"
            "try:\n    import tabsim.runtime.dask\nexcept ModuleNotFoundError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    assert 'pip install "tabsim[dask]"' in out, out


def test_a_quiet_local_cluster_keeps_its_warnings_to_itself(monkeypatch):
    """The nannies' warnings (a worker killed at close) were printed under -q."""
    import logging

    from tabsim.runtime import dask as dask_mod
    from tabsim.runtime.executors import ExecutorError

    seen = []

    class Stop(Exception):
        pass

    def cluster(*a, **kw):
        seen.append(kw.get("silence_logs"))
        raise Stop

    monkeypatch.setattr(dask_mod, "LocalCluster", cluster)
    for announce in (False, True):
        with pytest.raises(ExecutorError, match="died as they started"):  # a cluster that cannot start: one line
            dask_mod.DaskExecutor(1, announce=announce).start()
    assert seen == [logging.ERROR, logging.WARNING]


def _names(deps) -> set:
    return {d.split(">")[0].split("=")[0].split("<")[0].split("[")[0].strip() for d in deps}


def test_the_track_extra_brings_the_commands_that_show_a_run():
    """`mlflow ui` needs full mlflow (mlflow-skinny has no Flask: the command stopped on "No module named
    'flask'") and `tensorboard --logdir runs` needs tensorboard; the suite's extra keeps the light client."""
    _, extras = _extras()
    track = _names(extras["track"])
    assert {"mlflow", "tensorboard", "tensorboardX"} <= track and "mlflow-skinny" not in track, track
    assert {"mlflow-skinny", "tensorboard", "tensorboardX"} <= _names(extras["test"])
