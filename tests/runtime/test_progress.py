"""A run's progress: one unit (training steps) whatever its cut, and steps shown for a run of one chunk."""
from __future__ import annotations

import numpy as np

import tabsim as ts
from tabsim.runtime import planning, segments
from tabsim.runtime import progress as bars
from tabsim.runtime import run as run_mod

SMALL = {"preset": "paper", "task": {"n_prompts": 8}, "train": {"seeds": 2, "steps": 40, "eval_every": 20,
                                                                "batch_size": 4, "group_size": 2},
         "sweep": {"lr": [0.05, 0.1]}}


class Bar:
    """A stand-in for tqdm that records what the run tells it."""

    made: list = []

    def __init__(self, total, desc, unit, leave):
        self.total, self.desc, self.unit, self.n, self.updates, self.descs = total, desc, unit, 0, [], [desc]
        Bar.made.append(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n=1):
        self.n += n
        self.updates.append(n)

    def set_description(self, desc, refresh=True):
        self.descs.append(desc)

    @staticmethod
    def write(msg, file=None):
        pass


def test_steps_done_and_the_progress_cut():
    plan = segments.calls(40, 20, 5)  # 4 advances of 5 steps and a point, twice
    assert segments.steps_done(plan, 20) == [0, 5, 10, 15, 20, 20, 25, 30, 35, 40, 40]
    assert segments.steps_done(segments.calls(300, 50, 100), 50)[-1] == 300
    for steps, every in [(300, 300), (200, 20), (2000, 20), (40000, 20000), (7, 7), (1, 1)]:
        seg = segments.progress_segment(steps, every)
        n = len(segments.calls(steps, every, seg))
        assert segments.steps_done(segments.calls(steps, every, seg), every)[-1] == steps
        assert n <= 2 * 20 + steps // every, (steps, every, seg, n)  # about 20 calls, never thousands
        assert n >= min(10, steps), (steps, every, seg, n)  # and enough to move a bar


def test_a_one_chunk_run_shows_its_steps_in_one_unit_with_the_same_numbers(monkeypatch):
    """A watched run of one chunk moved its bar from 0 to the end in one jump (or said nothing); its unit
    was ``chunk`` or ``segment`` depending on the cut. Now it counts steps, in several ticks."""
    monkeypatch.setattr(bars, "_tqdm", lambda: Bar)
    monkeypatch.setattr(planning, "SEGMENT_UNITS", 100)  # this small run counts as long enough to watch
    Bar.made.clear()
    shown = ts.run(SMALL, progress=True)
    (bar,) = Bar.made
    assert bar.unit == "step" and bar.total == 40 and bar.n == 40
    assert len(bar.updates) >= 4 and max(bar.updates) < 40, bar.updates  # steps as they are done, no jump
    assert bar.descs[0].endswith("compiling") and bar.descs[-1] == "tabsim run"
    monkeypatch.setattr(planning, "SEGMENT_UNITS", 25_000_000)
    quiet = ts.run(SMALL, progress=False)
    for c in shown.frame.columns:  # the cut changes no number
        a, b = np.asarray(shown.frame[c]), np.asarray(quiet.frame[c])
        assert a.dtype == b.dtype and (a.tobytes() == b.tobytes() if a.dtype != object else list(a) == list(b)), c


def test_chunks_count_their_steps_too(monkeypatch):
    monkeypatch.setattr(bars, "_tqdm", lambda: Bar)
    Bar.made.clear()
    cfg = {**SMALL, "train": {**SMALL["train"], "chunk_conditions": 1}}  # two chunks, each in one call
    ts.run(cfg, progress=True)
    (bar,) = Bar.made
    assert bar.unit == "step" and bar.total == 80 and bar.updates == [40, 40]


def test_gpg_expected_flow_says_its_jensen_gap():
    """GPG's flow sits 0.011-0.021 of MAJORITY's pass@1 from the seeds' mean; that was only in docs/expected.md."""
    import warnings

    cfg = {"preset": "gpg", "task": {"n_prompts": 8}, "arms": {"arms": ["frozen", "majority"]},
           "train": {"dynamics": "expected", "steps": 1, "batch_size": 2, "group_size": 2}}
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ts.run(cfg, progress=False)
        ts.run({**cfg, "preset": "paper"}, progress=False)
    notes = [w for w in seen if issubclass(w.category, run_mod.ExpectedFlowNote)]
    assert len(notes) == 1 and "0.011-0.021" in str(notes[0].message) and notes[0].filename == __file__


def test_the_bar_shows_its_clock_while_the_first_call_compiles(monkeypatch):
    """Nothing was printed for the seconds of a compilation; the bar now redraws itself until steps come."""
    import time

    class Redrawn(Bar):
        def refresh(self):
            self.descs.append("refresh")

    monkeypatch.setattr(bars.StepTicks, "HEARTBEAT", 0.02)
    bar = Redrawn(10, "x: compiling", "step", False)
    ticks = bars.StepTicks(bar, 10, "x")
    time.sleep(0.3)
    ticks.step(5)
    n = bar.descs.count("refresh")
    time.sleep(0.1)
    ticks.close()
    assert n >= 3 and bar.descs.count("refresh") == n  # redrawn while compiling, not after the first steps


def test_a_sweep_over_steps_counts_every_group_on_one_bar(monkeypatch):
    """A sweep over a static field drew one bar per group; its groups are one plan now, on one bar, each
    chunk ticking its own program's steps (40 and 20 here)."""
    monkeypatch.setattr(bars, "_tqdm", lambda: Bar)
    Bar.made.clear()
    ts.run({**SMALL, "sweep": {**SMALL["sweep"], "train.steps": [40, 20]}}, progress=True)
    (bar,) = Bar.made
    assert bar.unit == "step" and bar.total == 60 and bar.n == 60 and sorted(bar.updates) == [20, 40]
