"""A chunk bar's clock while its first chunk compiles: seconds in which nothing else is printed.

:func:`tabsim.studies.factorial.run_designs` (``tabsim reproduce``, ``tabsim prereg run``) shows one bar over
chunks; the first call compiles (or loads) the program, and the bar, at 0%, would say nothing meanwhile.
"""
from __future__ import annotations

import contextlib
import threading

HEARTBEAT = 1.0  # seconds between redraws of the bar while its first chunk compiles


@contextlib.contextmanager
def until_first_chunk(bar):
    """Redraw ``bar`` every :data:`HEARTBEAT` seconds until its first chunk is done: the first call compiles
    (or loads) the program, seconds in which nothing else is printed, so the bar's clock shows it going on
    (as a single run's step bar does, :class:`tabsim.runtime.run._Steps`)."""
    if not hasattr(bar, "refresh"):  # no bar
        yield
        return
    done = threading.Event()

    def beat():
        while not done.wait(HEARTBEAT) and not bar.n:
            try:
                bar.refresh()
            except Exception:  # noqa: BLE001  (a bar closed meanwhile: nothing more to show)
                return

    threading.Thread(target=beat, name="tabsim-progress", daemon=True).start()
    try:
        yield
    finally:
        done.set()
