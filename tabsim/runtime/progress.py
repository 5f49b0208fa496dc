"""A run's progress on screen: the bar (tqdm, or none), whether someone watches, and its ticks in steps."""
from __future__ import annotations

import sys
import threading
import warnings


class NoProgress:
    """A progress bar that shows nothing (the bar of a run nobody watches)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n=1):
        pass

    def set_description(self, desc, refresh=True):
        pass


def progress_bar(total: int, enabled: bool, desc: str, unit: str = "chunk"):
    """A tqdm bar of ``total`` ``unit``s labelled ``desc``, or :class:`NoProgress` when not ``enabled``."""
    if not enabled:  # no bar at all (tqdm warns in notebooks without widgets)
        return NoProgress()
    return _tqdm()(total=total, desc=desc, unit=unit, leave=False)


def write(line: str) -> None:
    """Print ``line`` on stderr above any bar that is showing."""
    _tqdm().write(line, file=sys.stderr)


def _tqdm():
    """tqdm's bar class for where this runs: the notebook's widget in Jupyter, else the terminal's (what
    ``tqdm.auto`` picks, less its ``async for`` support, which loads asyncio: a tenth of a second)."""
    from tqdm.std import TqdmExperimentalWarning  # lazy: loaded when a bar is shown

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=TqdmExperimentalWarning)
        from tqdm.autonotebook import tqdm  # lazy: as above
    return tqdm


def watched() -> bool:
    """Whether someone watches this process's progress: a terminal on stderr, or a Jupyter kernel."""
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):
        tty = False
    return tty or "ipykernel" in sys.modules


class StepTicks:
    """A run's progress in training steps, whatever its cut (chunks, segments, chunks reused from a store).

    ``update(n)`` (the run store's call) counts ``n`` whole chunks of ``steps`` steps each, until chunks
    computed here tick their own steps (:meth:`step`, setting ``live``: in segments as they go, or at their
    end when a sweep's programs differ in steps). The label
    reads ``compiling`` until the first steps are done (the first call compiles, or loads, the program),
    and meanwhile the bar is redrawn every :data:`HEARTBEAT` seconds, so its clock shows the compilation
    going on (nothing else would be printed for seconds). :meth:`close` ends that."""

    HEARTBEAT = 1.0

    def __init__(self, bar, steps: float, desc: str):
        self.bar, self.steps, self.desc = bar, steps, desc
        self.started = False
        self.live = False
        self._done = threading.Event()
        if hasattr(bar, "refresh"):
            threading.Thread(target=self._beat, name="tabsim-progress", daemon=True).start()

    def _beat(self) -> None:
        while not self._done.wait(self.HEARTBEAT):
            try:
                self.bar.refresh()
            except Exception:  # noqa: BLE001  (a bar closed meanwhile: nothing more to show)
                return

    def close(self) -> None:
        self._done.set()

    def step(self, n: int) -> None:
        if not self.started:
            self.started = True
            self._done.set()
            self.bar.set_description(self.desc, refresh=False)
        self.bar.update(n)

    def update(self, n: int = 1) -> None:
        if not self.live:
            self.step(n * self.steps)


def describe_seconds(seconds: float) -> str:
    """``under a second``, ``about 40 s``, ``about 12 min``, ``about 3.4 h``."""
    if seconds < 1:
        return "under a second"  # not "about 0 s"
    if seconds < 90:
        return f"about {seconds:.0f} s"
    if seconds < 90 * 60:
        return f"about {seconds / 60:.0f} min"
    return f"about {seconds / 3600:.1f} h"
