"""What a hostile pass over the command line found, one test each: a traceback, three hangs and the silent accepts.

Each test failed on the code before its fix (a run that crashed or waited, an input that ran). The
refusals of plain bad values are cases of ``test_inputs.CASES``; here are the ones that need more than
one command or a stand-in for what would hang.
"""
from __future__ import annotations

import os
import threading

import pytest
from click.testing import CliRunner

from tabsim.cli import main

SMALL = 'preset = "paper"\n[task]\nn_prompts = 8\n[train]\nsteps = 2\nseeds = 2\nbatch_size = 4\ngroup_size = 2\n'


def cli(*args, **kw):
    return CliRunner().invoke(main, [str(a) for a in args], **kw)


def test_a_run_that_records_no_pass1_finishes_and_draws_what_it_recorded(tmp_path):
    """``train.metrics = ["entropy"]`` crashed in the pass@1 figure (KeyError) and left ``.o.staging``."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(SMALL + 'metrics = ["entropy"]\n')
    res = cli("run", cfg, "--out", tmp_path / "o")
    assert res.exit_code == 0, res.output
    assert (tmp_path / "o" / "entropy.png").is_file() and not (tmp_path / "o" / "pass1.png").exists()
    assert "entropy" in res.output  # the summary is of the metric that was recorded
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml", "o"], "left a staging folder behind"


def test_workers_beyond_reason_are_refused_before_anything_starts(tmp_path, monkeypatch):
    """``--workers 1000000 --oversubscribe`` tried to start a million worker processes."""
    from tabsim.runtime import dask as dask_mod

    started = []
    monkeypatch.setattr(dask_mod, "LocalCluster", lambda *a, **k: started.append(k) or (_ for _ in ()).throw(
        AssertionError("a cluster was started")))
    res = cli("sweep", "--vary", "prior_strength=0.3", "--seeds", "1", "--steps", "2", "--out", tmp_path / "o",
              "-q", "--executor", "dask", "--workers", "1000000", "--oversubscribe")
    assert res.exit_code == 2, res.output
    assert "--workers 1000000" in res.output and "at most" in res.output, res.output
    assert not started and not (tmp_path / "o").exists()


def test_a_scheduler_without_workers_is_not_waited_for_in_silence(tmp_path, monkeypatch):
    """A scheduler that no worker joined: the run waited for ever, printing nothing."""
    from distributed import LocalCluster

    from tabsim.runtime import dask as dask_mod

    monkeypatch.setattr(dask_mod, "WORKER_WAIT_SECONDS", 1.0, raising=False)
    with LocalCluster(n_workers=0, processes=False, protocol="tcp", dashboard_address=None) as cluster:
        box = {}
        t = threading.Thread(target=lambda: box.setdefault("res", cli(
            "sweep", "--vary", "prior_strength=0.3", "--seeds", "1", "--steps", "2", "--out", tmp_path / "o", "-q",
            "--executor", "dask", "--scheduler", cluster.scheduler_address)), daemon=True)
        t.start()
        t.join(60)
        assert not t.is_alive(), "still waiting for a worker after 60 s"
    res = box["res"]
    assert res.exit_code == 1, res.output
    assert "no worker" in res.output and cluster.scheduler_address in res.output, res.output
    assert not (tmp_path / "o").exists()


def test_a_long_run_says_up_front_what_it_will_take(tmp_path, monkeypatch):
    """``seeds = 100000`` under ``-q`` was silent for over a minute: an estimate comes first, on stderr."""
    import tabsim.runtime.run as run_mod

    def stop(*a, **k):
        raise KeyboardInterrupt  # the estimate must be out before the run starts; nothing needs to run

    monkeypatch.setattr(run_mod, "run", stop)
    cfg = tmp_path / "c.toml"
    cfg.write_text('preset = "paper"\n[train]\nseeds = 100000\n')
    res = CliRunner().invoke(main, ["run", str(cfg), "--out", str(tmp_path / "o"), "-q"])
    assert res.exit_code == 130, res.output
    assert "100000 seeds" in res.stderr and "estimate" in res.stderr and " min" in res.stderr, res.stderr
    assert res.stdout == ""
    small = tmp_path / "s.toml"
    small.write_text(SMALL)
    res = CliRunner().invoke(main, ["run", str(small), "--out", str(tmp_path / "o2"), "-q"])
    assert "estimate" not in res.stderr  # a run of seconds says nothing under -q


def test_verify_reports_an_added_fifo(tmp_path):
    """A FIFO (or any file that is not a regular one) added to a published folder went unreported."""
    from tabsim.runtime.store import RunStore

    out = tmp_path / "o"
    with RunStore(out, key="k", description="test") as store:
        (store.dir / "a.txt").write_text("a")
    assert cli("verify", out).exit_code == 0
    os.mkfifo(out / "pipe")
    res = cli("verify", out)
    assert res.exit_code == 1 and "added pipe" in res.output, res.output


@pytest.mark.parametrize("spec", ["prior_strength=\uff10.3", "lr=0.0_5", "lr=\u0661"])
def test_vary_takes_plain_ascii_numbers_only(spec, tmp_path):
    """``float()`` reads a full-width digit and an underscore; a level is refused unless written plainly."""
    res = cli("sweep", "--vary", spec, "--seeds", "1", "--steps", "2", "--out", tmp_path / "o", "-q")
    assert res.exit_code == 2, res.output
    assert "--vary" in res.output and "not a plain number" in res.output, res.output
    assert not (tmp_path / "o").exists()
