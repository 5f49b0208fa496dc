"""A tracker never hangs a run nor prints a traceback: MLflow's requests are bounded, and a disk that refuses
TensorBoard's event files or a tensorboardX that cannot be imported end in one line (a silent or absent
tracking server: test_trackers.py, whose sweep is compiled once for its file)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tabsim.runtime import trackers

SWEEP = ["sweep", "--preset", "paper", "--vary", "prior_strength=0.3", "--seeds", "1", "--steps", "1", "-q"]
OUTER_BOUND = 90.0  # seconds: a subprocess that hangs fails the test


def test_requests_are_bounded_only_where_the_user_left_mlflows_settings_alone(monkeypatch):
    from tabsim.runtime.mlflow_io import bounded

    monkeypatch.delenv("MLFLOW_HTTP_REQUEST_TIMEOUT", raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "5")
    with bounded(2.5):
        assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "3"  # whole seconds, rounded up
        assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "5"
    assert "MLFLOW_HTTP_REQUEST_TIMEOUT" not in os.environ and os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "5"


@pytest.mark.parametrize("timeout", [0, -1, True, "30"])
def test_a_timeout_that_is_not_a_positive_number_of_seconds_is_refused(timeout):
    pytest.importorskip("mlflow")
    with pytest.raises(ValueError, match=rf"timeout: {timeout!r} is not a number of seconds > 0"):
        trackers.MlflowTracker("file:///nowhere", timeout=timeout)


# writes beyond 64 bytes fail (EFBIG: the file size limit, with its signal ignored), as on a full disk
FULL = """
import resource, signal, sys
from tabsim.runtime import trackers
tk = trackers.open_trackers("tensorboard", sys.argv[1], run_name="t")
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (64, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
tk.log_config({"preset": "paper", "note": "x" * 300})
try:
    tk.close()
except trackers.TrackerError as err:
    print(err)
"""


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin", reason="RLIMIT_FSIZE as on Linux")
def test_tensorboard_on_a_disk_that_refuses_writes_is_one_line_without_a_thread_or_exit_traceback(tmp_path):
    pytest.importorskip("tensorboardX")
    done = subprocess.run([sys.executable, "-c", FULL, str(tmp_path)], capture_output=True, text=True,
                          timeout=OUTER_BOUND)
    assert done.stderr == "", done.stderr  # no thread's, no atexit hook's traceback
    assert done.returncode == 0
    assert done.stdout.strip() == "tracker tensorboard: log_config failed: OSError: [Errno 27] File too large"


def test_a_tensorboardx_that_cannot_be_imported_is_refused_in_one_line_before_the_run(tmp_path):
    fake = tmp_path / "fake" / "tensorboardX"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('libtbx.so: cannot open shared object file')\n")
    out = tmp_path / "o"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake.parent), *sys.path])}
    done = subprocess.run([sys.executable, "-m", "tabsim", *SWEEP, "--track", "tensorboard", "--out", str(out)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=OUTER_BOUND)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines() == [
        "Error: --track tensorboard: tensorboardX is installed but cannot be imported (ImportError: libtbx.so: "
        'cannot open shared object file): pip install --force-reinstall "tabsim[track]"'], done.stderr
    assert not out.exists()
