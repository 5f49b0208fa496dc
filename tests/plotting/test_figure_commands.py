"""The commands with the figure pool: no warning on stderr, and no fault of the figures' processes (a
killed worker, a removed working folder, a broken matplotlib) ends in a traceback or loses the trained
results."""
from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import tabsim.runtime.run
from tabsim.cli import main

pytestmark = pytest.mark.usefixtures("figure_helper")  # the suite draws in-process by default
TINY = ["sweep", "--vary", "prior_strength=0.3,0.6", "--seeds", "2", "--steps", "10", "-q"]


def _tabsim(*args, env=None, cwd=None):
    """The ``tabsim`` console script (as a user runs it), or ``python -m tabsim.cli`` where there is none."""
    script = Path(sys.executable).with_name("tabsim")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "tabsim.cli"]
    return subprocess.run([*cmd, *map(str, args)], capture_output=True, text=True, timeout=300, cwd=cwd,
                          env={**os.environ, "TABSIM_FIGURE_PROCESS": "1", **(env or {})})


def _until(pred, what: str, seconds: float = 60):
    """Wait for ``pred()``; the bound is a safety net, never reached when the code works."""
    deadline = time.monotonic() + seconds
    while not pred():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {seconds} s")
        time.sleep(0.05)


def test_reproduce_prints_nothing_on_stderr(tmp_path):
    proc = _tabsim("reproduce", "-q", "--seeds", "2", "--steps", "5", "--out", tmp_path / "r", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert sorted(p.name for p in (tmp_path / "r" / "figures").iterdir()) == ["factorial.png", "power.png",
                                                                               "prior_sweep.png"]


def test_a_matplotlib_that_fails_to_import_is_one_line_naming_no_figure(tmp_path):
    (tmp_path / "matplotlib").mkdir()
    (tmp_path / "matplotlib" / "__init__.py").write_text("raise ImportError('libfreetype.so.6: cannot open')\n")
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    proc = _tabsim(*TINY, "--out", tmp_path / "o", env=env, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert "figures cannot be drawn" in proc.stderr and "--no-figure" in proc.stderr
    assert _tabsim(*TINY, "--out", tmp_path / "o", "--no-figure", "--resume", env=env, cwd=tmp_path).returncode == 0


def _before_training(monkeypatch, action):
    real = tabsim.runtime.run.run

    def run(*args, **kwargs):
        action()
        return real(*args, **kwargs)

    monkeypatch.setattr(tabsim.runtime.run, "run", run)


def test_figure_workers_killed_during_training_still_publish_everything(tmp_path, monkeypatch, capfd):
    def kill_workers():
        _until(multiprocessing.active_children, "a figure worker started")
        workers = multiprocessing.active_children()
        for proc in workers:
            os.kill(proc.pid, signal.SIGKILL)
        _until(lambda: not any(p.is_alive() for p in workers), "the workers ended")

    _before_training(monkeypatch, kill_workers)
    res = CliRunner().invoke(main, [*TINY, "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output + repr(res.exception)
    assert (tmp_path / "o" / "pass1.png").stat().st_size > 0 and (tmp_path / "o" / "results.parquet").exists()
    assert "Traceback" not in capfd.readouterr().err


def test_a_working_folder_removed_during_the_run_gives_no_traceback(tmp_path, monkeypatch, capfd):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    _before_training(monkeypatch, work.rmdir)
    res = CliRunner().invoke(main, [*TINY, "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output + repr(res.exception)
    assert (tmp_path / "o" / "pass1.png").stat().st_size > 0
    assert "Traceback" not in capfd.readouterr().err
