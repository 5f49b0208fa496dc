"""A Dask scheduler that stops answering (stopped, its machine gone) is waited for at most the executor's
``timeout``: a question to it during the run ends in one line saying so. The scheduler is a real one, in a
process of its own, stopped with SIGSTOP."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

pytest.importorskip("distributed")

from distributed import Client  # noqa: E402

from tabsim.runtime import dask as dask_mod  # noqa: E402
from tabsim.runtime.dask import DaskExecutor  # noqa: E402
from tabsim.runtime.executors import ExecutorError  # noqa: E402

OUTER_BOUND = 60.0  # seconds: far above the 1 s asked; without a deadline the questions below never return
START = ("from distributed import Scheduler; import asyncio\n"
         "async def main():\n"
         "    async with Scheduler(host='127.0.0.1', port=0, dashboard=False) as s:\n"
         "        print(s.address, flush=True)\n"
         "        await s.finished()\n"
         "asyncio.run(main())\n")


@pytest.fixture
def scheduler():
    """The address and process of a Dask scheduler of its own (no workers)."""
    proc = subprocess.Popen([sys.executable, "-c", START], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    try:
        yield proc.stdout.readline().strip(), proc
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait()


def bounded(fn):
    """``fn()`` on a thread given :data:`OUTER_BOUND` seconds (a hang fails the test); what it raised."""
    box = {}

    def call():
        try:
            fn()
        except Exception as err:  # noqa: BLE001 - handed to the test
            box["error"] = err

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(OUTER_BOUND)
    assert not thread.is_alive(), f"still waiting after {OUTER_BOUND:g} s"
    return box.get("error")


def test_a_stopped_scheduler_ends_the_run_in_one_line(scheduler, monkeypatch):
    address, proc = scheduler
    monkeypatch.setattr(dask_mod, "numerics", dict)  # the workers' numeric settings: none here (8 s of JAX saved)
    client = Client(address, timeout="10s")
    try:
        ex = DaskExecutor(client=client, compile_cache=False, announce=False, timeout=1)
        assert ex.threads == 1  # the scheduler answers: no workers, one chunk at a time
        os.kill(proc.pid, signal.SIGSTOP)
        err = bounded(lambda: ex.threads)
        assert isinstance(err, ExecutorError), err
        line = str(err)
        assert "\n" not in line and line.startswith("dask: the scheduler answered nothing within 1 s (") \
            and "--resume" in line, line
        assert isinstance(bounded(lambda: ex.memory_limit), ExecutorError)  # asked nothing more
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        bounded(lambda: client.close(timeout=1))


@pytest.mark.parametrize("timeout", [0, -2, True, "10"])
def test_a_timeout_that_is_not_a_positive_number_of_seconds_is_refused(timeout):
    with pytest.raises(ValueError, match=rf"timeout: {timeout!r} is not a number of seconds > 0"):
        DaskExecutor(workers=1, timeout=timeout)
