"""Ctrl-C and SIGTERM as a user sends them, and what is left when the command has ended.

Ctrl-C in a terminal reaches the whole foreground process group: the command, the figure pool's fork
server and its workers. A worker printed its ``KeyboardInterrupt`` traceback before the command's one
line; SIGTERM killed the command without a word and left multiprocessing's resource tracker warning about
leaked semaphores; a Ctrl-C while JAX loaded broke its extensions (tracebacks, once a crash: checked
in-process, as where a signal lands in an import cannot be chosen from outside); and the fork server
outlived the command. The end-to-end checks start the console script as a subprocess in a session
of its own, wait for its progress line before they signal, and list its descendants (the fork server's
workers included) to check that none is alive once its exit status is in. They compile a program, so
they are heavy; the decisions they rest on are checked here in-process.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest

from tabsim.cli import app

LONG = ["sweep", "--preset", "paper", "--vary", "prior_strength=0.2,0.4,0.6,0.8", "--seeds", "64", "--steps", "3000"]
SHORT = ["sweep", "--vary", "prior_strength=0.3,0.6", "--seeds", "2", "--steps", "10"]
MARK = "compiling, then training"  # the phase line printed once the engine has loaded


def start(args, out):
    """The console script in a session of its own (its process group is what Ctrl-C reaches), figures on."""
    env = {k: v for k, v in os.environ.items() if k != "TABSIM_FIGURE_PROCESS"}
    return subprocess.Popen([sys.executable, "-m", "tabsim", *args, "--out", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, start_new_session=True)


def read_until(proc, mark: str | None, timeout: float = 300.0) -> tuple[list, threading.Event]:
    """Stderr read by a thread into a list; the event is set once ``mark`` is in it."""
    seen, found = [], threading.Event()

    def read():
        for chunk in iter(lambda: os.read(proc.stderr.fileno(), 4096), b""):
            seen.append(chunk.decode(errors="replace"))
            if mark is not None and mark in "".join(seen):
                found.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if mark is not None and not found.wait(timeout):
        proc.kill()
        raise AssertionError(f"no {mark!r} in {timeout} s: {''.join(seen)}")
    return seen, reader


def family(proc) -> list[psutil.Process]:
    return psutil.Process(proc.pid).children(recursive=True)


def alive(procs) -> list[str]:
    left = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                left.append(" ".join(p.cmdline())[:100])
        except psutil.NoSuchProcess:
            pass
    return left


def finish(proc, reader, seen, procs, timeout: float = 120.0) -> tuple[str, list[str]]:
    """Stderr and the descendants alive the moment the exit status is in (before the reader's end, which
    waits for every process holding the pipe)."""
    proc.wait(timeout)
    left = alive(procs)
    reader.join(30)
    return "".join(seen), left


def assert_one_line(err: str, code: int, rc: int) -> None:
    assert rc == code, (rc, err)
    assert "Traceback" not in err and "leaked" not in err and "Error" not in err, err
    said = [ln for ln in err.replace("\r", "\n").splitlines() if ln.startswith("interrupted:")]
    assert len(said) == 1 and "--resume" in said[0], err


@pytest.mark.heavy
@pytest.mark.parametrize("sig, group, code", [(signal.SIGINT, True, 130), (signal.SIGTERM, False, 143),
                                               (signal.SIGTERM, True, 143)],
                         ids=["ctrl-c", "sigterm", "sigterm-to-the-group"])
def test_an_interrupted_command_says_one_line_and_leaves_no_process(tmp_path, sig, group, code):
    proc = start(LONG, tmp_path / "o")
    seen, reader = read_until(proc, MARK)
    procs = family(proc)
    assert procs, "no figure server was started: the check would be empty"
    (os.killpg if group else os.kill)(proc.pid, sig)
    err, left = finish(proc, reader, seen, procs)
    assert_one_line(err, code, proc.returncode)
    assert not left, left


@pytest.mark.heavy
def test_no_helper_outlives_a_command_that_finished(tmp_path):
    proc = start(SHORT, tmp_path / "o")
    seen, reader = read_until(proc, None)
    procs, names = {}, set()
    while proc.poll() is None:  # every descendant, as it appears
        try:
            for p in family(proc):
                if p.pid not in procs:
                    procs[p.pid] = p
                    names.add(" ".join(p.cmdline()))
        except psutil.Error:
            pass
        time.sleep(0.02)
    err, left = finish(proc, reader, seen, procs.values())
    assert proc.returncode == 0, err
    assert any("forkserver" in n for n in names), names  # the check is not empty
    assert not left, left


# -- what they rest on, in-process --------------------------------------------------------------------
def test_sigterm_interrupts_as_ctrl_c_does(monkeypatch):
    monkeypatch.setattr(app, "_SIGNALLED", [])
    before = signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(KeyboardInterrupt):
            app._interrupt(signal.SIGTERM, sys._getframe())
        assert app._SIGNALLED == [signal.SIGTERM]
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # a second one ends the process
    finally:
        signal.signal(signal.SIGTERM, before)


def test_an_interrupt_inside_an_import_waits_for_the_import(monkeypatch, tmp_path):
    """Raised inside a module being imported, it broke JAX's and numpy's extensions; it comes after."""
    monkeypatch.setattr(app, "_SIGNALLED", [])
    (tmp_path / "tabsim_test_slow_module.py").write_text(
        "import signal, sys\nfrom tabsim.cli import app\n"
        "app._interrupt(signal.SIGINT, sys._getframe())\nDONE = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = signal.getsignal(signal.SIGALRM)
    try:
        import tabsim_test_slow_module  # noqa: F401  (the interrupt landed during its import)

        assert sys.modules["tabsim_test_slow_module"].DONE
        assert signal.getitimer(signal.ITIMER_REAL)[0] > 0, "the interrupt was dropped, not put off"
        with pytest.raises(KeyboardInterrupt):
            app._interrupt(signal.SIGALRM, sys._getframe())  # the timer: the import is done now
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
        sys.modules.pop("tabsim_test_slow_module", None)
