"""What a tracker costs a run: the same run with no tracker, with MLflow and with TensorBoard.

The run is the ``paper`` preset's prior sweep (5 conditions x 8 seeds x 4 arms, 200 steps, evaluated every
10 steps), compiled once before the timings. Each configuration runs ``--repeats`` times, interleaved, and
the medians are compared; the time the tracker itself spends writing (the frame's condition table and the
client calls) is printed beside it, since two shared cores make
whole-run medians move by a few percent on their own.

The command line's cost is measured too: ``tabsim sweep`` (the same study, with its figure) with and
without ``--track``, as whole processes; there the trackers write beside the results and the figure.

    python experiments/bench_track.py [--repeats 3] [--steps 200]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import tabsim as ts
from tabsim.runtime import trackers


def config(steps: int) -> dict:
    return {"preset": "paper", "train": {"steps": steps, "eval_every": 10, "seeds": 8},
            "sweep": {"prior_strength": [0.2, 0.35, 0.5, 0.65, 0.8]}}


class Timed:
    """A tracker that adds up the seconds spent in its client calls."""

    seconds = 0.0

    def __init__(self, inner):
        self.inner = inner

    def _timed(self, name, *args):
        t0 = time.perf_counter()
        getattr(self.inner, name)(*args)
        Timed.seconds += time.perf_counter() - t0

    def log_config(self, config):
        self._timed("log_config", config)

    def log_conditions(self, table):
        self._timed("log_conditions", table)

    def close(self):
        self._timed("close")


def one(cfg: dict, kind: str | None, where: Path) -> tuple[float, float]:
    """Seconds of one ``ts.run`` with the tracker ``kind`` (None: none), and of its writing."""
    Timed.seconds = 0.0
    tracker = None
    if kind == "mlflow":
        tracker = Timed(trackers.MlflowTracker((where / "mlruns").as_uri()))
    elif kind == "tensorboard":
        tracker = Timed(trackers.TensorBoardTracker(where / "runs"))
    t0 = time.perf_counter()
    ts.run(cfg, progress=False, tracker=tracker)  # closes the tracker
    return time.perf_counter() - t0, Timed.seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args()
    cfg = config(args.steps)
    kinds = [None] + [k for k in trackers.TRACKERS if _available(k)]
    with tempfile.TemporaryDirectory() as tmp:
        one(cfg, None, Path(tmp))  # compile once
        times: dict = {k: [] for k in kinds}
        writes: dict = {k: [] for k in kinds}
        for _ in range(args.repeats):
            for k in kinds:
                total, wrote = one(cfg, k, Path(tmp))
                times[k].append(total)
                writes[k].append(wrote)
    base = statistics.median(times[None])
    print(f"run: paper prior sweep, 5 conditions x 8 seeds x 4 arms, {args.steps} steps; median of {args.repeats}")
    print(f"{'tracker':<12} {'run s':>8} {'ratio':>7} {'writing s':>10} {'writing / run':>14}")
    for k in kinds:
        med, w = statistics.median(times[k]), statistics.median(writes[k])
        print(f"{k or 'none':<12} {med:8.2f} {med / base:7.3f} {w:10.3f} {w / base:14.2%}")
    with tempfile.TemporaryDirectory() as tmp:
        command(args.steps, kinds, Path(tmp), args.repeats)


def command(steps: int, kinds: list, where: Path, repeats: int) -> None:
    """Median seconds of ``tabsim sweep`` without and with each tracker (whole processes)."""
    env = {**os.environ, "MLFLOW_TRACKING_URI": (where / "cli-mlruns").as_uri()}
    base_args = [sys.executable, "-m", "tabsim.cli", "sweep", "--preset", "paper", "--seeds", "8", "--steps",
                 str(steps), "--set", "train.eval_every=10", "-q", "--overwrite", "--track-dir", str(where)]
    walls: dict = {k: [] for k in kinds}
    for r in range(repeats + 1):  # the first round warms the caches and is not counted
        for k in kinds:
            args = base_args + ["--out", str(where / f"o-{k}")] + (["--track", k] if k else [])
            t0 = time.perf_counter()
            subprocess.run(args, check=True, env=env, capture_output=True)
            if r:
                walls[k].append(time.perf_counter() - t0)
    base = statistics.median(walls[None])
    print(f"tabsim sweep (with its figure), whole process; median of {repeats}")
    for k in kinds:
        med = statistics.median(walls[k])
        print(f"{k or 'none':<12} {med:8.2f} {med / base:7.3f}")


def _available(kind: str) -> bool:
    try:
        trackers.check(kind)
        return True
    except trackers.TrackerError:
        print(f"{kind}: not installed ({trackers.EXTRA}); skipped")
        return False


if __name__ == "__main__":
    main()
