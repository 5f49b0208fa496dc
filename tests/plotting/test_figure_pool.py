"""The figure pool (tabsim.plotting.figure_pool): figures drawn by a process pool on the fork server, its\nfaults drawn in the command's process, and the console script's quick exit."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from tabsim.plotting import figure_pool as fp

pytestmark = pytest.mark.usefixtures("figure_helper")  # the suite draws in-process by default


def _frames():
    pc = pd.DataFrame({"term": ["d_elicit"] * 3 + ["d_rd"] * 3, "n_seeds": [4, 8, 16] * 2,
                       "mean_half_width": [0.04, 0.03, 0.02, 0.05, 0.035, 0.025], "pilot_estimate": [0.1] * 3 + [0.2] * 3})
    mde = pd.DataFrame({"term": ["d_elicit"] * 3 + ["d_rd"] * 3, "n_seeds": [4, 8, 16] * 2,
                        "mde": [0.09, 0.06, 0.04, 0.1, 0.07, 0.05], "pilot_sd": [0.03] * 3 + [0.04] * 3})
    return pc, mde


def test_pool_draws_the_same_png_as_this_process(tmp_path):
    pc, mde = _frames()
    with fp.open_figures(("tabsim.studies.reference.figures",)) as pool:
        assert isinstance(pool, fp.FigurePool)
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
    with fp.open_figures(("tabsim.studies.reference.figures",)) as pool:
        pool.submit("tabsim.studies.reference.figures:figure_power", pc, mde, stem=tmp_path / "p")
        written = pool.wait()
    assert sorted(written) == [str(tmp_path / "p.png"), str(tmp_path / "p.svg")]
    assert (tmp_path / "p.svg").read_text().lstrip().startswith("<?xml")


def test_a_failing_figure_raises_with_the_workers_traceback(tmp_path):
    with fp.open_figures() as pool:
        pool.submit("tabsim.studies.reference.figures:figure_power", "not a frame", None, stem=tmp_path / "bad", formats=["png"])
        with pytest.raises(fp.FigureError, match=r"(?s)figure .*bad failed.*Traceback"):
            pool.wait()
    assert not (tmp_path / "bad.png").exists()


def test_unknown_target_is_reported(tmp_path):
    with fp.open_figures() as pool:
        pool.submit("tabsim.studies.reference.figures:no_such_figure", stem=tmp_path / "x", formats=["png"])
        with pytest.raises(fp.FigureError, match="no_such_figure"):
            pool.wait()


def test_opt_out_draws_in_this_process(tmp_path, monkeypatch):
    monkeypatch.setenv("TABSIM_FIGURE_PROCESS", "0")
    pool = fp.open_figures()
    assert isinstance(pool, fp.LocalFigures)
    pc, mde = _frames()
    pool.submit("tabsim.studies.reference.figures:figure_power", pc, mde, stem=tmp_path / "p", formats=["png"])
    assert pool.wait() == [str(tmp_path / "p.png")]


def _ended(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie counts as ended
    except OSError:
        return True


def _until(pred, what: str, seconds: float = 60):
    """Wait for ``pred()``; the bound is a safety net, never reached when the code works."""
    deadline = time.monotonic() + seconds
    while not pred():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {seconds} s")
        time.sleep(0.05)


def test_an_error_in_the_command_ends_the_pool_at_once(tmp_path):
    pool = fp.open_figures()
    assert isinstance(pool, fp.FigurePool)
    _until(lambda: pool.pids, "a worker started")
    pids = pool.pids
    with pytest.raises(RuntimeError, match="boom"):
        with pool:
            raise RuntimeError("boom")
    _until(lambda: all(_ended(p) for p in pids), "the workers ended")


def test_workers_end_when_the_command_is_killed(tmp_path):
    """A command killed with SIGKILL: its workers end instead of lingering."""
    code = ("import time\n"
            "from tabsim.plotting import figure_pool as fp\n"
            "if __name__ == '__main__':\n"
            "    pool = fp.open_figures()\n"
            "    while not pool.pids:\n"
            "        time.sleep(0.05)\n"
            "    print(*pool.pids, flush=True)\n"
            "    time.sleep(60)\n")
    (tmp_path / "cmd.py").write_text(code)
    parent = subprocess.Popen([sys.executable, str(tmp_path / "cmd.py")], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "TABSIM_FIGURE_PROCESS": "1"})
    workers = [int(p) for p in parent.stdout.readline().split()]
    assert workers
    parent.kill()
    parent.wait()
    try:
        _until(lambda: all(_ended(p) for p in workers), "the workers ended with their command")
    finally:
        for p in workers:
            if not _ended(p):
                os.kill(p, 9)


UNGUARDED = """\
import os, sys
import pandas as pd
from tabsim.plotting import figure_pool as fp
with open(sys.argv[1] if len(sys.argv) > 1 else os.environ["BODY_LOG"], "a") as fh:
    fh.write(f"{os.getpid()}\\n")  # the script's body: no `if __name__ == '__main__':` guard
pc = pd.DataFrame({"term": ["d_elicit"] * 2, "n_seeds": [4, 8], "mean_half_width": [0.04, 0.03],
                   "pilot_estimate": [0.1, 0.1]})
mde = pd.DataFrame({"term": ["d_elicit"] * 2, "n_seeds": [4, 8], "mde": [0.09, 0.06], "pilot_sd": [0.03, 0.03]})
with fp.open_figures(("tabsim.studies.reference.figures",)) as pool:
    pool.submit("tabsim.studies.reference.figures:figure_power", pc, mde, stem=os.environ["STEM"], formats=["png"])
    pool.wait()
"""


@pytest.mark.parametrize("how", ["script", "module"])
def test_a_script_without_a_main_guard_runs_once_and_its_figures_are_drawn_by_the_pool(tmp_path, how):
    """The pool's workers never run the command's main script (or ``-m`` module) again."""
    (tmp_path / "unguarded.py").write_text(UNGUARDED)
    log = tmp_path / "body.txt"
    argv = [str(tmp_path / "unguarded.py"), str(log)] if how == "script" else ["-m", "unguarded"]
    env = {**os.environ, "TABSIM_FIGURE_PROCESS": "1", "BODY_LOG": str(log), "STEM": str(tmp_path / "fig"),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    res = subprocess.run([sys.executable, *argv], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert len(log.read_text().split()) == 1, log.read_text()  # the body ran once
    assert "note:" not in res.stderr, res.stderr  # drawn by a worker, not again in the script's process
    assert (tmp_path / "fig.png").stat().st_size > 1000


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
import os, signal
import matplotlib.pyplot as plt

def pid_figure(log):
    parent = os.getppid()
    threads = len(os.listdir(f"/proc/{parent}/task"))
    with open(log, "a") as fh:
        fh.write(f"{os.getpid()} {parent} {threads}\\n")
    return plt.figure(figsize=(1, 1))

def signalled(command, sig):
    # sends ``sig`` to the worker that draws it, never to the command (where it is drawn again)
    if os.getpid() != command:
        os.kill(os.getpid(), sig)
    return plt.figure(figsize=(1, 1))
"""


@pytest.fixture
def figs_module(tmp_path, monkeypatch):
    (tmp_path / "figs_mod.py").write_text(FIGS)
    monkeypatch.syspath_prepend(str(tmp_path))  # the workers start with this process's sys.path
    return tmp_path


def test_figures_are_drawn_in_workers_of_a_single_threaded_fork_server(figs_module, capfd):
    """Each figure is drawn in a worker forked from multiprocessing's fork server, in parallel, paths in
    submission order; that server is one thread when it forks (it starts without native thread pools);
    nothing is printed on stderr."""
    log = figs_module / "pids.txt"
    with fp.open_figures(("figs_mod",), parallel=2) as pool:
        for i in range(4):
            pool.submit("figs_mod:pid_figure", str(log), stem=figs_module / f"p{i}", formats=["png"])
        written = pool.wait()
    assert written == [str(figs_module / f"p{i}.png") for i in range(4)]
    rows = [line.split() for line in log.read_text().splitlines()]
    pids, parents, parent_threads = ({int(r[k]) for r in rows} for k in range(3))
    assert len(rows) == 4 and os.getpid() not in pids | parents and pids <= pool.pids
    assert parent_threads == {1}  # forked by the server, a single thread
    assert capfd.readouterr().err == ""


def test_a_figure_module_that_starts_a_thread_is_imported_where_it_draws(figs_module):
    """A job's own module is imported in the process that draws, never in the fork server: a module that
    starts a thread at import leaves the server one thread."""
    (figs_module / "threads_mod.py").write_text(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
        "from figs_mod import pid_figure\n")
    log = figs_module / "pids.txt"
    with fp.open_figures(("threads_mod",), parallel=2) as pool:
        for i in range(3):
            pool.submit("threads_mod:pid_figure", str(log), stem=figs_module / f"q{i}", formats=["png"])
        written = pool.wait()
    assert written == [str(figs_module / f"q{i}.png") for i in range(3)]
    assert {int(line.split()[2]) for line in log.read_text().splitlines()} == {1}


@pytest.mark.parametrize("sig, why", [(signal.SIGKILL, "ended before"), (signal.SIGSTOP, "stopped")])
def test_a_killed_or_stopped_worker_leaves_its_figure_to_this_process(figs_module, capfd, sig, why):
    """A worker killed (SIGKILL) or stopped (SIGSTOP) while it draws: one note, the figure drawn here, every
    path returned, and no worker left behind (a stopped one is killed)."""
    with fp.open_figures(("figs_mod",), parallel=2) as pool:
        pool.submit("figs_mod:pid_figure", str(figs_module / "pids.txt"), stem=figs_module / "ok", formats=["png"])
        pool.submit("figs_mod:signalled", os.getpid(), int(sig), stem=figs_module / "hit", formats=["png"])
        written = pool.wait()
    assert written == [str(figs_module / "ok.png"), str(figs_module / "hit.png")]
    assert (figs_module / "hit.png").stat().st_size > 0
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and why in err and "drawing the figures in this process" in err, err
    _until(lambda: all(_ended(p) for p in pool.pids), "the workers ended")


def test_workers_killed_before_the_figures_leave_them_to_this_process(tmp_path, capfd):
    """The workers killed while the command trains (before any figure is submitted): the figures are drawn
    here and the paths returned."""
    pc, mde = _frames()
    with fp.open_figures(("tabsim.studies.reference.figures",)) as pool:
        _until(lambda: pool.pids, "a worker started")
        for pid in pool.pids:
            os.kill(pid, signal.SIGKILL)
        _until(lambda: all(_ended(p) for p in pool.pids), "the workers ended")
        pool.submit("tabsim.studies.reference.figures:figure_power", pc, mde, stem=tmp_path / "p", formats=["png"])
        assert pool.wait() == [str(tmp_path / "p.png")]
    assert "Traceback" not in capfd.readouterr().err


def test_an_os_error_in_a_worker_is_an_os_error_here(tmp_path):
    """A write error (here: a folder that is a file) reaches the command as ``OSError`` with its path,
    which the commands turn into one line (``tabsim.cli.options.guarded``)."""
    (tmp_path / "file").write_text("")
    pc, mde = _frames()
    with fp.open_figures(("tabsim.studies.reference.figures",)) as pool:
        pool.submit("tabsim.studies.reference.figures:figure_power", pc, mde, stem=tmp_path / "file" / "p", formats=["png"])
        with pytest.raises(OSError) as err:
            pool.wait()
    assert not isinstance(err.value, fp.FigureError)
    assert "file" in str(err.value.filename)


def test_a_matplotlib_that_fails_to_import_is_one_line_naming_no_figure(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    monkeypatch.delitem(sys.modules, "matplotlib.pyplot", raising=False)
    monkeypatch.delitem(sys.modules, "tabsim.plotting.figures", raising=False)
    with pytest.raises(fp.FiguresUnavailable) as err:
        fp.LocalFigures().submit("tabsim.plotting.figures:plot_curves", None, stem=tmp_path / "p")
    assert "\n" not in str(err.value) and "figures cannot be drawn" in str(err.value) and "--no-figure" in str(err.value)


PRESTARTED = """
import os, sys, time
from multiprocessing import forkserver
from tabsim.plotting import figure_pool as fp

fp.prestart(("tabsim.studies.reference.figures",))
server = forkserver._forkserver._forkserver_pid
print("server:", server)
if server is None:
    sys.exit(0)
deadline = time.monotonic() + 120
while "matplotlib" not in open(f"/proc/{server}/maps").read():  # the server loads the plotting stack...
    assert time.monotonic() < deadline, "the fork server never loaded matplotlib"
    time.sleep(0.05)
print("loaded in this process:", "matplotlib" in sys.modules)  # ...while this process goes on without it
import pandas as pd
pc = pd.DataFrame({"term": ["d_elicit"] * 2, "n_seeds": [4, 8], "mean_half_width": [0.04, 0.03],
                   "pilot_estimate": [0.1] * 2})
mde = pd.DataFrame({"term": ["d_elicit"] * 2, "n_seeds": [4, 8], "mde": [0.09, 0.06], "pilot_sd": [0.03] * 2})
with fp.open_figures(("tabsim.studies.reference.figures",)) as pool:
    while not pool.pids:  # the pool starts its first worker at once
        assert time.monotonic() < deadline, "the pool started no worker"
        time.sleep(0.01)
    parents = {int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1]) for pid in pool.pids}
    pool.submit("tabsim.studies.reference.figures:figure_power", pc, mde, stem=sys.argv[1], formats=["png"])
    print("written:", pool.wait())
print("parents:", sorted(parents))
"""


@pytest.mark.parametrize("setting", ["1", "0"])
def test_prestart_loads_the_plotting_stack_in_the_fork_server_that_later_draws(tmp_path, setting):
    """A command that will draw starts the fork server first thing (``prestart``): the server loads matplotlib
    while the command goes on without it, and the pool opened later forks its workers from that same server.
    Where figures are drawn in the command's process, nothing is started."""
    env = {**os.environ, "TABSIM_FIGURE_PROCESS": setting}
    done = subprocess.run([sys.executable, "-c", PRESTARTED, str(tmp_path / "power")], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(": ", 1) for line in done.stdout.strip().splitlines())
    if setting == "0":
        assert lines == {"server": "None"}
        return
    server = int(lines["server"])
    assert lines["loaded in this process"] == "False"
    assert lines["written"] == repr([str(tmp_path / "power.png")])
    assert lines["parents"] == repr([server])


@pytest.mark.parametrize("command, args, starts", [
    ("reproduce", (), True), ("reproduce", ("--no-figure",), False), ("reproduce", ("--dry-run",), False),
    ("sweep", (), True), ("sweep", ("--no-figure",), False),
    ("run", (), True), ("run", ("--no-figure",), False),
])
def test_commands_that_draw_prestart_the_figure_server_with_the_module_their_pool_preloads(
        tmp_path, monkeypatch, command, args, starts):
    """The commands stand in for their work here: what is tested is that ``prestart`` is asked for the same
    module the command's pool preloads, before the work starts, and only when a figure will be drawn."""
    from click.testing import CliRunner

    import tabsim.cli.reproduce as reproduce_cmd
    import tabsim.cli.run as run_cmd
    import tabsim.studies.reference as reference
    from tabsim.cli import main
    from tabsim.studies.reference.design import FIGURE_MODULE

    calls = []
    for mod in (reproduce_cmd, run_cmd):
        monkeypatch.setattr(mod, "prestart", lambda modules: calls.append(("prestart", modules)))
    monkeypatch.setattr(reference, "reproduce", lambda out, **kw: calls.append(("work", None)) or {"wall_seconds": 1})
    monkeypatch.setattr(run_cmd, "_run_and_write", lambda *a, **kw: calls.append(("work", None)))
    extra = ()
    if command == "run":
        (tmp_path / "c.toml").write_text('preset = "paper"\n')
        extra = (str(tmp_path / "c.toml"),)
    res = CliRunner().invoke(main, [command, *extra, "--out", str(tmp_path / "o"), "-q", *args])
    assert res.exit_code == 0, res.output
    module = FIGURE_MODULE if command == "reproduce" else run_cmd.FIGURE_MODULE
    if "--dry-run" in args:
        assert calls == []
    else:
        assert calls == ([("prestart", (module,))] if starts else []) + [("work", None)]


def test_warm_up_imports_then_asks_its_other_questions_in_its_own_thread():
    import threading

    seen = []
    fp.warm_up("json", draw=False, also=(lambda: seen.append(threading.current_thread().name),
                                         lambda: seen.append("json" in sys.modules))).join(60)
    assert seen == ["tabsim-warm-up", True]


def test_workers_that_answered_with_an_error_exit_rather_than_being_killed(tmp_path):
    """A figure's own error leaves the workers healthy: they exit as after a success (a killed fork-server
    worker can leave the resource tracker's semaphore warnings on the command's stderr)."""
    with fp.open_figures() as pool:
        pool.submit("tabsim.studies.reference.figures:figure_power", "not a frame", None, stem=tmp_path / "bad",
                    formats=["png"])
        with pytest.raises(fp.FigureError):
            pool.wait()
        workers = list(pool.processes)
    assert workers and all(p.exitcode == 0 for p in workers), [p.exitcode for p in workers]
