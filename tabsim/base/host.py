"""Facts about the host this process runs on."""
from __future__ import annotations

import os
import time


def cpu_count() -> int:
    """Cores this process may run on (``os.sched_getaffinity``, else ``os.cpu_count()``), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped (``SIGSTOP``, a debugger: psutil's ``stopped`` or ``tracing-stop``
    status); False for a process that is gone, or whose status cannot be read."""
    import psutil  # lazy: a command's start-up imports this module; only a watcher of a process asks

    try:
        return psutil.Process(pid).status() in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP)
    except psutil.Error:
        return False


def process_seconds() -> float | None:
    """Seconds since this process started (Linux ``/proc``: the interpreter's start-up and imports counted,
    as ``time`` counts them), or None where that cannot be read. Read from ``/proc/uptime``, not from
    ``psutil.Process().create_time()``: psutil adds the start to the boot time in whole seconds, which
    puts it up to a second off."""
    try:
        with open("/proc/self/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        start = int(fields[19]) / os.sysconf("SC_CLK_TCK")
        with open("/proc/uptime") as fh:
            return max(0.0, float(fh.read().split()[0]) - start)
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def started_at() -> float:
    """The ``time.perf_counter()`` reading of this process's start (now, where that cannot be read): a
    command's clock, so that the times it prints and records are the wall time a user measures."""
    now = time.perf_counter()
    return now - (process_seconds() or 0.0)
