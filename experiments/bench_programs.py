"""The program store's saving: ``tabsim reproduce -q --no-figure`` in fresh processes with warm caches,
the store on and off (and another tabsim, optionally), runs interleaved.

    python experiments/bench_programs.py [--runs N] [--before PATH] [--args "reproduce -q --no-figure"]

Each arm has a compilation cache folder of its own, warmed by two runs first; then ``--runs`` rounds
run every arm once, in turn, so that a machine's load falls on all of them alike. ``--before PATH``
adds an arm with ``PYTHONPATH=PATH`` (a checkout of another tabsim); the other arms run the tabsim
this Python imports (a ``PYTHONPATH`` of the caller's included). For each arm the median wall time
and the median CPU time of the process (user + system, from ``getrusage``, which load on a shared
machine disturbs less) are printed, with the ratios to the store switched off. The last line printed
is a JSON object with these figures.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TABSIM = [sys.executable, "-m", "tabsim.cli"]


def arms(before: str | None) -> dict[str, dict]:
    """Each arm's environment additions (the store on, off, and another tabsim)."""
    out = {"on": {}, "off": {"TABSIM_EXECUTABLE_CACHE": "0"}}
    if before:
        out["before"] = {"PYTHONPATH": before}
    return out


def run_once(args: list[str], env: dict, out: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    # run from the output's folder: `python -m` puts the working folder first on the path, before PYTHONPATH
    res = subprocess.run(TABSIM + args + ["--out", str(out), "--overwrite"], env=env, capture_output=True, text=True,
                         cwd=out.parent)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{res.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--before", default=None, help="PYTHONPATH of another tabsim, run as a third arm")
    ap.add_argument("--args", default="reproduce -q --no-figure")
    opt = ap.parse_args()
    args = shlex.split(opt.args)
    tmp = Path(tempfile.mkdtemp(prefix="tabsim-bench-programs-"))
    base = {k: v for k, v in os.environ.items() if k not in ("TABSIM_EXECUTABLE_CACHE", "JAX_COMPILATION_CACHE_DIR")}
    envs = {name: {**base, "TABSIM_COMPILATION_CACHE": str(tmp / f"cache-{name}"), **extra}
            for name, extra in arms(opt.before).items()}
    for name, env in envs.items():  # warm: the compiled and the traced programs on disk
        for _ in range(2):
            run_once(args, env, tmp / f"out-{name}")
    times: dict[str, list] = {name: [] for name in envs}
    for i in range(opt.runs):
        for name, env in envs.items():
            times[name].append(run_once(args, env, tmp / f"out-{name}"))
            print(f"run {i + 1} {name}: {times[name][-1][0]:.2f} s wall, {times[name][-1][1]:.2f} s CPU", flush=True)
    result = {"command": "tabsim " + opt.args, "runs": opt.runs}
    for name, rows in times.items():
        result[f"{name}_wall_seconds"] = round(statistics.median(r[0] for r in rows), 3)
        result[f"{name}_cpu_seconds"] = round(statistics.median(r[1] for r in rows), 3)
    for name in envs:
        if name != "off":
            for what in ("wall", "cpu"):
                result[f"{name}_over_off_{what}"] = round(result[f"{name}_{what}_seconds"] / result[f"off_{what}_seconds"], 3)
    for k, v in result.items():
        print(f"{k}: {v}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
