"""The MLflow tracker writes from a writer process: the run's process never imports MLflow, and a writer
that dies or is stopped is reported in one line without hanging the run."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tabsim.runtime import trackers, writer_process

pytestmark = pytest.mark.skipif(not writer_process.available(), reason="no writer process on this platform")

TINY = {"preset": "paper", "task": {"n_prompts": 4}, "train": {"steps": 2, "eval_every": 1, "seeds": 1,
                                                               "batch_size": 2, "group_size": 2},
        "sweep": {"prior_strength": [0.3, 0.6]}}


def test_a_tracked_run_never_imports_mlflow_in_its_own_process(tmp_path):
    pytest.importorskip("mlflow")
    uri = (tmp_path / "mlruns").as_uri()
    code = (f"import sys; sys.path[:] = {sys.path!r}\n"
            "import tabsim as ts\nfrom tabsim.runtime import trackers\n"
            f"ts.run({TINY!r}, progress=False, tracker=trackers.MlflowTracker({uri!r}, run_name='t'))\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'mlflow'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
    # the writer process wrote the parent run and one child run per condition
    runs = [p.parent for p in (tmp_path / "mlruns").glob("*/*/meta.yaml")]
    names = sorted((r / "tags" / "mlflow.runName").read_text() for r in runs)
    assert names == ["prior_strength=0.3", "prior_strength=0.6", "t"]
    assert all((r / "metrics" / "pass1" / "true").is_file() for r in runs if (r / "tags" / "prior_strength").exists())


@pytest.mark.parametrize("sig, why", [(signal.SIGKILL, r"was killed by signal 9 before it finished"),
                                      (signal.SIGSTOP, r"is stopped; ended it")])
def test_a_writer_process_that_dies_or_stops_is_one_line_and_the_next_tracker_gets_a_new_one(tmp_path, sig, why):
    pytest.importorskip("mlflow")
    tracker = trackers.MlflowTracker((tmp_path / "a").as_uri(), run_name="a", process=True)
    tracker.start()  # as a run's Trackers does on its thread
    tk = trackers.Trackers([tracker])
    tk.log_config({"preset": "paper"})
    os.kill(tracker.pid, sig)
    with pytest.raises(trackers.TrackerError) as err:
        tk.close()
    line = str(err.value)
    assert "\n" not in line
    assert line.startswith(f"tracker mlflow: the writer process (pid {tracker.pid}) ") and why in line, line
    with pytest.raises(ProcessLookupError):  # ended, not left stopped
        os.kill(tracker.pid, 0)
    other = trackers.MlflowTracker((tmp_path / "b").as_uri(), run_name="b", process=True)
    other.log_config({"preset": "paper"})
    other.close()
    assert other.pid != tracker.pid
    assert list((tmp_path / "b").glob("*/*/params/preset"))


class Boom:
    def __init__(self, message: str):
        self.message = message

    def write(self):
        raise OSError(self.message)

    def close(self):
        raise AssertionError("never called after a failed call")


def test_an_error_in_the_writer_is_its_first_line_and_later_calls_are_skipped():
    remote = writer_process.Remote(f"{__name__}:Boom", {"message": "disk full\nsecond line"})
    remote.call("write")
    remote.call("no_such_method")
    with pytest.raises(writer_process.WriterError) as err:
        remote.close()
    assert str(err.value) == "write failed: OSError: disk full"


SLOW_MODULE = """\
import os, time
open(os.environ["PRELOAD_LOG"], "a").write("started\\n")
time.sleep(3)
open(os.environ["PRELOAD_LOG"], "a").write("imported\\n")
"""


def _prestarting(tmp_path, then: str) -> subprocess.CompletedProcess:
    """A process that prestarts its writer with a module taking 3 s to import, waits until the writer has
    begun it, then runs ``then`` and exits."""
    (tmp_path / "slow_import.py").write_text(SLOW_MODULE)
    log = tmp_path / "preload.txt"
    code = (f"import sys, os, time; sys.path[:] = {[str(tmp_path), *sys.path]!r}\n"
            "from tabsim.runtime import writer_process as w\n"
            "w.prestart(('slow_import',))\n"
            f"while not os.path.exists({str(log)!r}): time.sleep(0.01)\n"
            f"{then}\n")
    env = {**os.environ, "PRELOAD_LOG": str(log)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_prestart_imports_in_the_writer_and_a_writer_never_used_is_ended_at_exit(tmp_path):
    """The writer imports the module before any object is built (it began with nothing asked of it); a process
    that built no object there does not wait for that import when it exits: the writer is ended."""
    done = _prestarting(tmp_path, "print(w.writer().pid)")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "preload.txt").read_text().split() == ["started"]  # ended mid-import
    pid = int(done.stdout.split()[-1])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_an_object_built_after_prestart_runs_once_the_import_is_done(tmp_path):
    """A writer that is used is waited for: the object's calls run after the preloaded import, in order."""
    then = (f"r = w.Remote({__name__!r} + ':Boom', {{'message': 'after the import'}}); r.call('write')\n"
            "try:\n    r.close()\nexcept w.WriterError as e:\n    print(e)")
    done = _prestarting(tmp_path, then)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "preload.txt").read_text().split() == ["started", "imported"]
    assert done.stdout.strip().splitlines()[-1] == "write failed: OSError: after the import"


@pytest.mark.parametrize("dry_run", [True, False])
def test_the_commands_start_the_mlflow_writer_early_except_for_a_dry_run(monkeypatch, dry_run):
    pytest.importorskip("mlflow")
    from tabsim.cli.run import check_track

    started = []
    monkeypatch.setattr(writer_process, "prestart", started.append)
    check_track(("mlflow",), start=not dry_run)
    assert bool(started) is not dry_run
    assert not started or "mlflow.tracking" in started[0]


def test_the_writers_log_is_closed_when_the_process_exits():
    code = ("from tabsim.runtime import writer_process as w\n"
            "log = w.writer().log\n"
            "w._end()\n"
            "print(log.closed)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


def test_stopped_tells_a_stopped_process_from_a_running_or_gone_one():
    """What the writer's watcher reads (tabsim.base.host.stopped): True only while the process is stopped."""
    from tabsim.base.host import stopped

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert not stopped(child.pid)
        os.kill(child.pid, signal.SIGSTOP)
        os.waitpid(child.pid, os.WUNTRACED)  # returns once the kernel has stopped it
        assert stopped(child.pid)
        os.kill(child.pid, signal.SIGCONT)
        os.waitpid(child.pid, os.WCONTINUED)
        assert not stopped(child.pid)
    finally:
        child.kill()
        child.wait()
    assert not stopped(child.pid)  # gone (reaped)


def test_the_writer_ends_when_the_process_it_serves_is_killed(tmp_path):
    """A process killed outright (SIGKILL, the OOM killer) leaves no writer behind: the writer reads the end of
    its pipe and exits. (A ``ProcessPoolExecutor``'s worker outlived its killed parent: measured, Python 3.11.)"""
    psutil = pytest.importorskip("psutil")
    code = (f"import os, sys; sys.path[:] = {sys.path!r}\nfrom tabsim.runtime import writer_process as w\n"
            "print(w.Remote('builtins:dict', {}).pid, flush=True)\nos.kill(os.getpid(), 9)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    writer = psutil.Process(int(done.stdout.split()[-1]))
    try:  # polled (the writer is not this process's child): gone, or a zombie left for its new parent to reap
        writer.wait(timeout=60)
    except psutil.TimeoutExpired:
        if writer.status() != psutil.STATUS_ZOMBIE:
            writer.kill()
            raise AssertionError("the writer outlived the process it served") from None


def test_a_script_without_a_main_guard_is_not_run_again_by_its_writer(tmp_path):
    """The writer starts with ``python -c``: a script that builds a tracker at its top level, with no
    ``if __name__ == "__main__"`` guard, runs once. (multiprocessing's spawn, a ``ProcessPoolExecutor``'s
    included, imports the main script again in the child: the script's work ran twice, measured.)"""
    log = tmp_path / "ran.txt"
    script = tmp_path / "user_script.py"
    script.write_text(f"import sys; sys.path[:] = {sys.path!r}\n"
                      f"open({str(log)!r}, 'a').write('ran\\n')\n"
                      "from tabsim.runtime import writer_process as w\n"
                      "r = w.Remote('builtins:dict', {})\n"
                      "r.call('pop', 'written')\n"
                      "try:\n    r.close()\nexcept w.WriterError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "pop failed: KeyError: 'written'"  # the object was built and called
    assert log.read_text().split() == ["ran"]
