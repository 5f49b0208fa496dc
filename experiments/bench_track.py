"""What a tracker costs a run: the same run with no tracker, with MLflow and with TensorBoard.

The run is the ``paper`` preset's prior sweep (5 conditions x 8 seeds x 4 arms, 200 steps, evaluated every
10 steps: about 3,900 metric points), compiled once before the timings. Two measurements:

* ``ts.run`` in this process, where the tracker is closed (its writing waited for) before ``ts.run``
  returns; the seconds this process spends in the tracker's calls are printed beside it, and for MLflow
  the CPU seconds of its writer process during the run. ``mlflow`` writes from the writer process
  (:mod:`tabsim.runtime.writer_process`, started by the first run and reused by the next ones);
  ``mlflow-thread`` is MLflow imported and written on a thread of this process
  (``MlflowTracker(process=False)``); ``--batches`` adds ``mlflow-batches``, every point sent through the
  client's ``log_batch`` (``MlflowTracker(files=False)``), with a tabsim whose tracker still had the
  ``files`` option; every point goes through ``log_batch`` now.
* ``tabsim sweep`` (the same study, with its figure) as a whole process, with and without ``--track``:
  there the trackers write on their own thread (MLflow: from its writer process, which imports MLflow
  anew in each command) beside the results and the figure. Its wall seconds and the CPU seconds of the
  command's process and of MLflow's writer process (the figure's helper process not included) are
  compared.

Each round runs every configuration once, in an order that rotates from round to round, and the ratio to
the untracked run of the same round is taken; the medians over rounds are printed, with the machine's load
average before and after (other processes on a shared machine move single timings by far more than 5%).

    python experiments/bench_track.py [--repeats 5] [--steps 200] [--skip-command] [--batches]
"""
from __future__ import annotations

import argparse
import inspect
import os
import resource
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
    """A tracker that adds up the seconds spent in its calls (on the writer thread), and for one that writes
    from a writer process, that process's CPU seconds meanwhile."""

    seconds = 0.0
    writer_cpu = 0.0

    def __init__(self, inner):
        self.inner = inner

    def _timed(self, name, *args):
        t0 = time.perf_counter()
        getattr(self.inner, name)(*args)
        Timed.seconds += time.perf_counter() - t0

    def start(self):
        if hasattr(self.inner, "start"):
            self._timed("start")
        self.pid = getattr(self.inner, "pid", None)
        self.cpu0 = cpu_seconds(self.pid)

    def log_config(self, config):
        self._timed("log_config", config)

    def log_conditions(self, table):
        self._timed("log_conditions", table)

    def close(self):
        self._timed("close")
        Timed.writer_cpu = cpu_seconds(self.pid) - self.cpu0


def cpu_seconds(pid: int | None) -> float:
    """User and system CPU seconds of process ``pid`` so far (Linux ``/proc``; 0 for None or elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, TypeError):
        return 0.0


def tracker(kind: str | None, where: Path):
    if kind is None:
        return None
    if kind.startswith("mlflow"):
        extra = {"files": False} if kind == "mlflow-batches" else {}
        extra = {**extra, "process": False} if kind == "mlflow-thread" and process_option() else extra
        return Timed(trackers.MlflowTracker((where / "mlruns").as_uri(), **extra))
    return Timed(trackers.TensorBoardTracker(where / "runs"))


def process_option() -> bool:
    """Whether this tabsim's MLflow tracker can write from a writer process (else it writes in this one)."""
    return "process" in inspect.signature(trackers.MlflowTracker).parameters


def one(cfg: dict, kind: str | None, where: Path) -> tuple[float, float, float]:
    """Seconds of one ``ts.run`` with the tracker ``kind`` (None: none), of its calls in this process, and
    the CPU seconds of its writer process."""
    Timed.seconds = Timed.writer_cpu = 0.0
    track = tracker(kind, where)
    t0 = time.perf_counter()
    ts.run(cfg, progress=False, tracker=track)  # closes the tracker
    return time.perf_counter() - t0, Timed.seconds, Timed.writer_cpu


def rounds(kinds: list, repeats: int, measure) -> dict:
    """``measure(kind)`` -> tuple of figures, for every kind in every round (order rotated each round)."""
    out: dict = {k: [] for k in kinds}
    for r in range(repeats):
        for k in kinds[r % len(kinds):] + kinds[:r % len(kinds)]:
            out[k].append(measure(k))
    return out


def paired(results: dict, kind, i: int = 0) -> tuple[float, float]:
    """Median of figure ``i`` over rounds, and the median over rounds of its ratio to the untracked run's."""
    ratios = [a[i] / b[i] for a, b in zip(results[kind], results[None])]
    return statistics.median(a[i] for a in results[kind]), statistics.median(ratios)


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def in_process(steps: int, kinds: list, repeats: int) -> None:
    cfg = config(steps)
    with tempfile.TemporaryDirectory() as tmp:
        for k in kinds:  # compile once, import every client library once
            one(cfg, k, Path(tmp))
        res = rounds(kinds, repeats, lambda k: one(cfg, k, Path(tmp)))
    print(f"ts.run: paper prior sweep, 5 conditions x 8 seeds x 4 arms, {steps} steps; {repeats} rounds")
    print(f"{'tracker':<15} {'run s':>7} {'ratio':>7} {'extra s':>8} {'calls s':>8} {'writer cpu s':>13}")
    for k in kinds:
        med, ratio = paired(res, k)
        extra = statistics.median(a[0] - b[0] for a, b in zip(res[k], res[None]))
        calls, cpu = (statistics.median(x[i] for x in res[k]) for i in (1, 2))
        print(f"{k or 'none':<15} {med:7.2f} {ratio:7.3f} {extra:8.3f} {calls:8.3f} {cpu:13.3f}")


def command(steps: int, kinds: list, repeats: int) -> None:
    """``tabsim sweep`` without and with each tracker, whole processes: wall and CPU seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        args = [sys.executable, "-m", "tabsim.cli", "sweep", "--preset", "paper", "--seeds", "8", "--steps",
                str(steps), "--set", "train.eval_every=10", "-q", "--overwrite", "--track-dir", str(where)]

        runs = iter(range(10**6))

        def measure(k):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            done = subprocess.run(args + ["--out", str(where / f"o{next(runs)}")] + (["--track", k] if k else []),
                                  capture_output=True, text=True)
            wall, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
            if done.returncode:
                sys.exit(f"tabsim sweep --track {k} failed: {done.stderr.strip().splitlines()[-1:]}")
            return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)

        rounds(kinds, 1, measure)  # warms the compilation cache and the file system; not counted
        res = rounds(kinds, repeats, measure)
    print(f"tabsim sweep (with its figure), whole process; {repeats} rounds")
    print(f"{'tracker':<15} {'wall s':>7} {'ratio':>7} {'cpu s':>7} {'ratio':>7}")
    for k in kinds:
        (wall, wr), (cpu, cr) = paired(res, k, 0), paired(res, k, 1)
        print(f"{k or 'none':<15} {wall:7.2f} {wr:7.3f} {cpu:7.2f} {cr:7.3f}")


def import_seconds(module: str) -> float:
    """CPU seconds of importing ``module`` in a fresh process that has already loaded tabsim's own stack (the
    fixed cost a tracker adds to a run, whatever its size)."""
    code = (f"import time, pandas, numpy, jax, tabsim.runtime.run; c = time.process_time(); import {module}; "
            "print(time.process_time() - c)")
    return float(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--skip-command", action="store_true", help="time ts.run only")
    ap.add_argument("--batches", action="store_true", help="also MLflow with every point through log_batch")
    args = ap.parse_args()
    kinds = [None] + [k for k in trackers.TRACKERS if _available(k)]
    print(f"load average (1, 5, 15 min) before: {load()}; {os.cpu_count()} CPU core(s)")
    whole = "files" in inspect.signature(trackers.MlflowTracker).parameters  # else: MLflow through log_batch only
    batches = ["mlflow-batches"] if "mlflow" in kinds and whole and args.batches else []
    batches += ["mlflow-thread"] if "mlflow" in kinds and process_option() else []
    for k in kinds[1:]:
        module = trackers.TRACKERS[k]
        cpu = statistics.median(import_seconds(module) for _ in range(3))
        print(f"{k}: importing {module} costs {cpu:.2f} s of CPU (median of 3 fresh processes)")
    in_process(args.steps, kinds + batches, args.repeats)
    print(f"load average: {load()}")
    if not args.skip_command:
        command(args.steps, kinds, args.repeats)
        print(f"load average after: {load()}")


def _available(kind: str) -> bool:
    try:
        trackers.check(kind)
        return True
    except trackers.TrackerError:
        print(f"{kind}: not installed ({trackers.EXTRA}); skipped")
        return False


if __name__ == "__main__":
    main()
