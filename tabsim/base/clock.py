"""Seconds a command spends in each phase of its work, summed over the process.

A study's wall time splits into phases: its imports, tracing and compiling its programs, training,
the run store's bookkeeping (saving, hashing and checking chunks), building frames, statistics,
waiting for figures and publishing. The code that does each part wraps it in :func:`timed`; a command
reads :func:`totals` at its end and records them (``provenance.json``'s ``phase_seconds``, ``--json``).

Phases may nest (chunks are saved while a run trains) and run in threads at once, so the totals are
seconds spent in each phase, not a partition of the wall time; :func:`net` gives one for the phases
that contain others. Light: no imports beyond the standard library.
"""
from __future__ import annotations

import contextlib
import threading
import time

_LOCK = threading.Lock()
_TOTALS: dict[str, float] = {}

# the phases a study reports, in the order they happen
PHASES = ("imports", "compile", "training", "bookkeeping", "frames", "statistics", "figures", "publish")
# phases measured inside others: (outer, inner) -- the outer's net time leaves the inner out
NESTED = (("training", "compile"), ("training", "bookkeeping"), ("training", "frames"))


def add(phase: str, seconds: float) -> None:
    """Count ``seconds`` to ``phase``."""
    with _LOCK:
        _TOTALS[phase] = _TOTALS.get(phase, 0.0) + float(seconds)


@contextlib.contextmanager
def timed(phase: str):
    """Count the wall time of the ``with`` body to ``phase`` (also when the body raises)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        add(phase, time.perf_counter() - t0)


def totals() -> dict[str, float]:
    """Seconds counted so far per phase (a copy)."""
    with _LOCK:
        return dict(_TOTALS)


def net(raw: dict[str, float] | None = None, digits: int = 3) -> dict[str, float]:
    """Per-phase seconds with nested phases taken out of the phases that contain them, rounded, in
    :data:`PHASES` order (phases never entered are left out; others follow in name order)."""
    raw = dict(totals() if raw is None else raw)
    for outer, inner in NESTED:
        if outer in raw and inner in raw:
            raw[outer] = max(0.0, raw[outer] - raw[inner])
    order = [p for p in PHASES if p in raw] + sorted(set(raw) - set(PHASES))
    return {p: round(raw[p], digits) for p in order}


def reset() -> None:
    """Forget every count (a new command in the same process)."""
    with _LOCK:
        _TOTALS.clear()
