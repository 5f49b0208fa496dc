"""The figure helper process (tabsim.plotting.helper) and the console script's quick exit."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from tabsim.plotting import helper as fp

pytestmark = pytest.mark.usefixtures("figure_helper")  # the suite draws in-process by default


def _frames():
    pc = pd.DataFrame({"term": ["d_elicit"] * 3 + ["d_rd"] * 3, "n_seeds": [4, 8, 16] * 2,
                       "mean_half_width": [0.04, 0.03, 0.02, 0.05, 0.035, 0.025], "pilot_estimate": [0.1] * 3 + [0.2] * 3})
    mde = pd.DataFrame({"term": ["d_elicit"] * 3 + ["d_rd"] * 3, "n_seeds": [4, 8, 16] * 2,
                        "mde": [0.09, 0.06, 0.04, 0.1, 0.07, 0.05], "pilot_sd": [0.03] * 3 + [0.04] * 3})
    return pc, mde


def test_helper_draws_the_same_png_as_this_process(tmp_path):
    pc, mde = _frames()
    with fp.start(("tabsim.studies.reference.figures",)) as pool:
        assert isinstance(pool, fp.FigureProcess)
        pool.submit("tabsim.studies.reference.figures:figure_power", pc, mde, stem=tmp_path / "helper", formats=["png"])
        written = pool.wait()
    local = fp.LocalFigures()
    local.submit("tabsim.studies.reference.figures:figure_power", pc, mde, stem=tmp_path / "local", formats=["png"])
    assert written == [str(tmp_path / "helper.png")]
    assert local.wait() == [str(tmp_path / "local.png")]
    from matplotlib.image import imread

    a, b = imread(tmp_path / "helper.png"), imread(tmp_path / "local.png")
    assert a.shape == b.shape and a.shape[0] > 100
    np.testing.assert_array_equal(a, b)  # same renderer, same data: the same pixels


def test_formats_follow_the_environment_at_submission(tmp_path, monkeypatch):
    pc, mde = _frames()
    monkeypatch.setenv("TABSIM_FIGURE_FORMATS", "png,svg")
    with fp.start(("tabsim.studies.reference.figures",)) as pool:
        pool.submit("tabsim.studies.reference.figures:figure_power", pc, mde, stem=tmp_path / "p")
        written = pool.wait()
    assert sorted(written) == [str(tmp_path / "p.png"), str(tmp_path / "p.svg")]
    assert (tmp_path / "p.svg").read_text().lstrip().startswith("<?xml")


def test_a_failing_figure_raises_with_the_helpers_traceback(tmp_path):
    with fp.start() as pool:
        pool.submit("tabsim.studies.reference.figures:figure_power", "not a frame", None, stem=tmp_path / "bad", formats=["png"])
        with pytest.raises(fp.FigureError, match=r"(?s)figure .*bad failed.*Traceback"):
            pool.wait()
    assert not (tmp_path / "bad.png").exists()


def test_unknown_target_is_reported(tmp_path):
    with fp.start() as pool:
        pool.submit("tabsim.studies.reference.figures:no_such_figure", stem=tmp_path / "x", formats=["png"])
        with pytest.raises(fp.FigureError, match="no_such_figure"):
            pool.wait()


def test_opt_out_draws_in_this_process(tmp_path, monkeypatch):
    monkeypatch.setenv("TABSIM_FIGURE_PROCESS", "0")
    pool = fp.start()
    assert isinstance(pool, fp.LocalFigures)
    pc, mde = _frames()
    pool.submit("tabsim.studies.reference.figures:figure_power", pc, mde, stem=tmp_path / "p", formats=["png"])
    assert pool.wait() == [str(tmp_path / "p.png")]


def test_an_error_in_the_command_ends_the_helper_at_once(tmp_path):
    pool = fp.start()
    assert isinstance(pool, fp.FigureProcess)
    proc = pool._proc
    with pytest.raises(RuntimeError, match="boom"):
        with pool:
            raise RuntimeError("boom")
    assert proc.poll() is not None


def test_helper_ends_when_the_command_is_killed(tmp_path):
    """A command killed with SIGKILL closes the pipe; its helper ends instead of lingering."""
    code = ("import sys, time\n"
            "from tabsim.plotting import helper as fp\n"
            "pool = fp.start()\n"
            "print(pool.pid, flush=True)\n"
            "time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    helper = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(helper, 0)
        except ProcessLookupError:
            break
        try:  # a zombie of init's counts as ended
            with open(f"/proc/{helper}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
        except OSError:
            break
        time.sleep(0.1)
    else:
        os.kill(helper, 9)
        pytest.fail("the figure helper outlived its command")


@pytest.mark.parametrize("args, code, stream, text", [
    (["--help"], 0, "stdout", "Commands"),
    (["no-such-command"], 2, "stderr", "No such command"),
    (["run", "/no/such/config.toml"], 2, "stderr", "config file not found"),  # a usage error
])
def test_console_script_keeps_exit_status_and_output(args, code, stream, text):
    proc = subprocess.run([sys.executable, "-m", "tabsim.cli", *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == code, proc.stderr
    assert text in getattr(proc, stream)


FIGS = """
import os, sys
import matplotlib.pyplot as plt

def pid_figure(log):
    parent = os.getppid()
    threads = len(os.listdir(f"/proc/{parent}/task"))
    with open(log, "a") as fh:
        fh.write(f"{os.getpid()} {parent} {threads}\\n")
    return plt.figure(figsize=(1, 1))

def die():
    os._exit(3)
"""


@pytest.fixture
def figs_module(tmp_path, monkeypatch):
    (tmp_path / "figs_mod.py").write_text(FIGS)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    return tmp_path


def test_figures_are_drawn_in_processes_of_a_single_threaded_fork_server(figs_module, capfd):
    """The helper never forks: each figure is drawn in a process of its own from multiprocessing's fork
    server (in parallel, replies in submission order), and that server is one thread when it forks (it
    starts without native thread pools); no fork warning is printed."""
    log = figs_module / "pids.txt"
    with fp.start(("figs_mod",), parallel=2) as pool:
        for i in range(4):
            pool.submit("figs_mod:pid_figure", str(log), stem=figs_module / f"p{i}", formats=["png"])
        written = pool.wait()
    assert written == [str(figs_module / f"p{i}.png") for i in range(4)]
    rows = [line.split() for line in log.read_text().splitlines()]
    pids, parents, parent_threads = ({int(r[k]) for r in rows} for k in range(3))
    assert len(rows) == 4 and len(pids) == 4 and pool.pid not in pids  # one process per figure
    assert pool.pid not in parents and parent_threads == {1}  # forked by the server, a single thread
    assert pool._proc.poll() is not None
    assert "fork" not in capfd.readouterr().err


def test_a_figure_module_that_starts_a_thread_is_imported_where_it_draws(figs_module):
    """A job's own module is imported in the process that draws, never in the fork server: a module that
    starts a thread at import leaves the server one thread."""
    (figs_module / "threads_mod.py").write_text(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
        "from figs_mod import pid_figure\n")
    log = figs_module / "pids.txt"
    with fp.start(("threads_mod",), parallel=2) as pool:
        for i in range(3):
            pool.submit("threads_mod:pid_figure", str(log), stem=figs_module / f"q{i}", formats=["png"])
        written = pool.wait()
    assert written == [str(figs_module / f"q{i}.png") for i in range(3)]
    assert {int(line.split()[2]) for line in log.read_text().splitlines()} == {1}


def test_a_child_that_dies_is_reported(figs_module):
    with fp.start(("figs_mod",), parallel=2) as pool:
        pool.submit("figs_mod:pid_figure", str(figs_module / "pids.txt"), stem=figs_module / "ok", formats=["png"])
        pool.submit("figs_mod:die", stem=figs_module / "dead", formats=["png"])
        with pytest.raises(fp.FigureError, match="dead"):
            pool.wait()
    assert (figs_module / "ok.png").exists()


def test_an_os_error_in_the_helper_is_an_os_error_here(tmp_path):
    """A write error (here: a folder that is a file) reaches the command as ``OSError`` with its path,
    which the commands turn into one line (``tabsim.cli.options.guarded``)."""
    (tmp_path / "file").write_text("")
    pc, mde = _frames()
    with fp.start(("tabsim.studies.reference.figures",)) as pool:
        pool.submit("tabsim.studies.reference.figures:figure_power", pc, mde, stem=tmp_path / "file" / "p", formats=["png"])
        with pytest.raises(OSError) as err:
            pool.wait()
    assert not isinstance(err.value, fp.FigureError)
    assert "file" in str(err.value.filename)
