"""How a chunk's training steps are cut into calls of its compiled programs (no JAX: plain arithmetic).

A chunk run in segments (:mod:`tabsim.runtime.segments`) is a list of calls: ``("advance", n)`` (``n``
steps inside an evaluation interval), ``("point", 0)`` (an interval's evaluation point) and
``("intervals", m)`` (``m`` whole intervals). :mod:`tabsim.runtime.planning` picks the cut's length,
:mod:`tabsim.runtime.segments` runs it; both read the cut from here.
"""
from __future__ import annotations


def near_divisor(n: int, ideal: int) -> int:
    """The largest divisor of ``n`` in ``[ideal / 2, ideal]`` (calls of one length: one compiled program),
    else ``ideal`` (the last call of each round is shorter)."""
    ideal = max(1, min(n, ideal))
    for d in range(ideal, max(1, ideal // 2) - 1, -1):
        if n % d == 0:
            return d
    return ideal


def calls(steps: int, every: int, segment: int) -> list[tuple[str, int]]:
    """The calls that run ``steps`` steps evaluated every ``every`` in segments of ``segment`` steps:
    ``("advance", n)`` (n steps inside an interval), ``("point", 0)`` (an interval's evaluation point) and
    ``("intervals", m)`` (m whole intervals)."""
    n_evals = steps // every
    if segment >= every:
        m = segment // every
        out = [("intervals", m)] * (n_evals // m)
        return out + ([("intervals", n_evals % m)] if n_evals % m else [])
    one = [("advance", segment)] * (every // segment) + ([("advance", every % segment)] if every % segment else [])
    return (one + [("point", 0)]) * n_evals


def steps_done(plan: list[tuple[str, int]], every: int) -> list[int]:
    """Training steps done after each call of ``plan`` (:func:`calls`), from 0 before the first: what a
    progress bar counts, so that a run shows one unit (steps) however it is cut."""
    done = [0]
    for name, n in plan:
        done.append(done[-1] + (n if name == "advance" else n * every if name == "intervals" else 0))
    return done


def progress_segment(steps: int, every: int, calls_wanted: int = 20) -> int:
    """Steps per call that show a chunk's progress in about ``calls_wanted`` ticks: whole evaluation
    intervals when there are enough of them, else an even cut of one interval (one compiled program)."""
    n_evals = max(1, steps // every)
    if n_evals >= calls_wanted // 2:
        return every * near_divisor(n_evals, -(-n_evals // calls_wanted))
    return near_divisor(every, max(1, -(-every * n_evals // calls_wanted)))
