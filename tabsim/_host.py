"""Facts about the host this process runs on."""
from __future__ import annotations

import os


def cpu_count() -> int:
    """Cores this process may run on (``os.sched_getaffinity``, else ``os.cpu_count()``), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)
