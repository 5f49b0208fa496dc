"""The Dask executor at its edges: schemes it cannot connect with, a broken ``distributed``, a scheduler
that goes away during a run, local workers that die as they start. Each ends in one line, never a
traceback. The clusters are real LocalClusters of worker processes."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

pytest.importorskip("distributed")

from tabsim.cli import main  # noqa: E402
from tabsim.runtime.dask import DaskExecutor  # noqa: E402
from tabsim.runtime.executors import ExecutorError  # noqa: E402

TINY = ["sweep", "--vary", "prior_strength=0.3,0.6", "--seeds", "2", "--steps", "10", "-q"]


@pytest.mark.parametrize("scheme", ["tls", "ucx"])
def test_a_scheme_that_needs_set_up_is_refused_in_one_line(scheme, tmp_path):
    res = CliRunner().invoke(main, [*TINY, "--out", str(tmp_path / "o"), "--executor", "dask",
                                    "--scheduler", f"{scheme}://127.0.0.1:8786"])
    assert res.exit_code == 2, res.output + repr(res.exception)
    assert f"{scheme}://" in res.output and "supported: tcp" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "o").exists()


def test_a_broken_distributed_gives_the_missing_extra_message(tmp_path):
    (tmp_path / "distributed").mkdir()
    (tmp_path / "distributed" / "__init__.py").write_text("raise ImportError('cannot import name gen from tornado')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "tabsim.cli", *TINY, "--out", str(tmp_path / "o"), "--executor",
                           "dask", "--workers", "1"], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert "cannot be imported" in proc.stderr and 'pip install --force-reinstall "tabsim[dask]"' in proc.stderr


def slow_square(x):
    time.sleep(0.2)  # chunks still running when the scheduler goes; not a timing the test depends on
    return x * x


@pytest.mark.heavy  # about 35 s on 2 cores: the client's close waits out its reconnection to the gone scheduler
def test_a_scheduler_that_goes_away_mid_run_is_one_error():
    with DaskExecutor(workers=1, announce=False, dashboard=False, compile_cache=False, pin=False,
                      in_flight=2) as ex:
        got = ex.imap_unordered(slow_square, range(8))
        assert next(got)[1] in {x * x for x in range(8)}
        ex.cluster.sync(ex.cluster.scheduler.close)
        with pytest.raises(ExecutorError, match="--resume") as err:
            list(got)
    assert "\n" not in str(err.value)


def test_local_workers_that_die_as_they_start_are_one_error(tmp_path, monkeypatch):
    (tmp_path / "sitecustomize.py").write_text("import os\nos._exit(3)\n")  # every new interpreter ends at once
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    with pytest.raises(ExecutorError, match="died as they started") as err:
        DaskExecutor(workers=1, announce=False, dashboard=False, compile_cache=False, pin=False).start()
    assert "\n" not in str(err.value)
