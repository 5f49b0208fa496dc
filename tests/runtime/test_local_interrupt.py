"""An interrupted script ends at once, with the local executor's chunks still running.

The chunks compute in daemon threads (:func:`tabsim.runtime.executors.LocalExecutor.map`). A pool of
:mod:`concurrent.futures` would not do: its worker threads are joined when the interpreter exits, whatever
``shutdown(wait=False, cancel_futures=True)`` was told, so an interrupted script would wait for the chunk it
was computing (minutes, for a large one). The check is a real SIGINT to a script whose chunks never end on
their own: it exits only if nothing waits for them.
"""
from __future__ import annotations

import signal
import subprocess
import sys

# a script without a ``__main__`` guard, as a user writes one; its chunks wait on stdin, which stays open
SCRIPT = """\
import sys
from tabsim.runtime.executors import LocalExecutor

def chunk(c):
    print("started", flush=True)
    return sys.stdin.read()

try:
    for out in LocalExecutor(threads=2).map(chunk, [0, 1, 2, 3]):
        pass
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
"""


def test_an_interrupted_script_exits_without_waiting_for_its_running_chunks():
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "started", proc.stderr.read()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)  # stdin stays open (communicate would close it): the chunks never return
        out, err = proc.stdout.read(), proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert out.split()[-1] == "interrupted", out
