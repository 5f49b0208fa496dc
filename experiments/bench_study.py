"""A study's time per phase from 8 to 4096 seeds: where the wall time of `tabsim reproduce` goes as it grows.

    python experiments/bench_study.py                       # 8, 64, 512, 4096 seeds at 2 steps, and the default run
    python experiments/bench_study.py --seeds 8 4096 --repeats 3
    python experiments/bench_study.py --baseline ../tabsim-old   # the same commands on another checkout, interleaved
    python experiments/bench_study.py --write               # also rewrite the table in docs/performance.md

Each figure is one fresh process of ``tabsim reproduce --seeds N --steps S --no-figure -q --json`` (the
default run: no ``--seeds``/``--steps``), started as a user starts it, with the compilation cache warm
(one unmeasured run of each command first) and Python's bytecode written by that first run, as on a
user's machine. The command prints its own seconds per phase
(``phase_seconds``: imports and start-up, compile, training, the run store's bookkeeping, frames,
statistics, figures, publish); the wall time is the process's, measured here. With ``--repeats`` the
median of each figure is reported.

``--steps 2`` keeps the work on the engine small, so the table shows what grows with the number of
seeds around it: the chunk bookkeeping, the frames and the statistics. The growth columns are each
phase's seconds at the largest seed count over the smallest (seeds grow 512x from 8 to 4096).

With ``--baseline PATH`` the same commands run with ``PYTHONPATH=PATH`` (another checkout of tabsim),
alternating with this checkout, and each row gets the ratio baseline / this. The last line printed is
a JSON object with every figure, the machine and the versions.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PHASES = ("imports", "compile", "training", "bookkeeping", "frames", "statistics", "figures", "publish")
TABLE_START, TABLE_END = "<!-- bench_study:start -->", "<!-- bench_study:end -->"


def command(seeds: int | None, steps: int | None, out: Path) -> list[str]:
    # the console script beside this interpreter; run from a scratch folder, so that with --baseline the
    # PYTHONPATH checkout is the one imported (a `python -m` started in a checkout imports that checkout)
    exe = Path(sys.executable).with_name("tabsim")
    cmd = [str(exe)] if exe.exists() else [shutil.which("tabsim") or "tabsim"]
    cmd += ["reproduce", "--no-figure", "-q", "--json", "--overwrite", "--out", str(out)]
    if seeds is not None:
        cmd += ["--seeds", str(seeds)]
    if steps is not None:
        cmd += ["--steps", str(steps)]
    return cmd


def one_run(cmd: list[str], env: dict) -> dict:
    t0 = time.perf_counter()
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stderr[-3000:]}")
    doc = json.loads(res.stdout)
    return {"wall": wall, "phases": doc.get("phase_seconds", {})}


def median_run(runs: list[dict]) -> dict:
    phases = sorted({p for r in runs for p in r["phases"]}, key=lambda p: (PHASES + (p,)).index(p))
    return {"wall": statistics.median(r["wall"] for r in runs),
            "phases": {p: statistics.median(r["phases"].get(p, 0.0) for r in runs) for p in phases}}


def environment(baseline: Path | None, work: Path) -> dict[str, dict]:
    """Each checkout's environment. Python writes bytecode, as on a user's machine (where the first import
    of a module compiles it once): a ``PYTHONDONTWRITEBYTECODE`` of this shell is dropped, and each checkout
    keeps its bytecode under ``work`` (``PYTHONPYCACHEPREFIX``), so the warm-up run compiles it and the
    checkout's own folders are not written."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["MPLBACKEND"] = "Agg"
    envs = {"this": dict(env, PYTHONPYCACHEPREFIX=str(work / "pycache-this"))}
    if baseline is not None:
        envs["baseline"] = dict(env, PYTHONPATH=str(baseline.resolve()),
                                PYTHONPYCACHEPREFIX=str(work / "pycache-baseline"))
    return envs


def measure(cases: list[tuple[str, int | None, int | None]], envs: dict, repeats: int, work: Path) -> dict:
    """Per case and checkout, the median of ``repeats`` fresh processes (checkouts alternating)."""
    runs: dict = {(label, name): [] for label, _, _ in cases for name in envs}
    for label, seeds, steps in cases:
        for name, env in envs.items():  # warm the compilation cache: unmeasured
            one_run(command(seeds, steps, work / f"{name}-{label}"), env)
        for _ in range(repeats):
            for name, env in envs.items():
                runs[(label, name)].append(one_run(command(seeds, steps, work / f"{name}-{label}"), env))
                print(f"  {name:8s} {label:22s} {runs[(label, name)][-1]['wall']:7.2f} s", file=sys.stderr)
    return {key: median_run(val) for key, val in runs.items()}


def table(cases, figures: dict, envs: dict) -> str:
    cols = [p for p in PHASES if any(p in figures[(c[0], "this")]["phases"] for c in cases)]
    head = "| run | wall s | " + " | ".join(cols) + (" | baseline wall s | speed-up |" if "baseline" in envs else " |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for label, _, _ in cases:
        this = figures[(label, "this")]
        row = f"| {label} | {this['wall']:.2f} | " + " | ".join(f"{this['phases'].get(p, 0.0):.2f}" for p in cols)
        if "baseline" in envs:
            base = figures[(label, "baseline")]
            row += f" | {base['wall']:.2f} | {base['wall'] / this['wall']:.2f}x |"
        else:
            row += " |"
        lines.append(row)
    return "\n".join(lines)


def growth(cases, figures: dict) -> dict:
    """Each phase's seconds at the largest seed count over the smallest (of the ``--steps`` rows)."""
    scaled = [(seeds, label) for label, seeds, steps in cases if seeds is not None]
    if len(scaled) < 2:
        return {}
    (lo, lo_label), (hi, hi_label) = min(scaled), max(scaled)
    a, b = figures[(lo_label, "this")], figures[(hi_label, "this")]
    out = {"seeds": [lo, hi], "wall": round(b["wall"] / max(a["wall"], 1e-9), 2)}
    for p in b["phases"]:
        out[p] = round(b["phases"][p] / max(a["phases"].get(p, 0.0), 1e-3), 1)
    return out


def write_docs(text: str) -> None:
    page = ROOT / "docs" / "performance.md"
    doc = page.read_text()
    if TABLE_START not in doc:
        raise SystemExit(f"{page}: no {TABLE_START} ... {TABLE_END} block to rewrite")
    head, rest = doc.split(TABLE_START, 1)
    _, tail = rest.split(TABLE_END, 1)
    page.write_text(f"{head}{TABLE_START}\n{text}\n{TABLE_END}{tail}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[8, 64, 512, 4096], help="seed counts at --steps")
    ap.add_argument("--steps", type=int, default=2, help="training steps of the seed-scaling rows")
    ap.add_argument("--repeats", type=int, default=1, help="fresh processes per figure (median)")
    ap.add_argument("--no-default", action="store_true", help="leave out the default run (8 seeds, preset steps)")
    ap.add_argument("--baseline", type=Path, default=None, help="another checkout of tabsim to run alternately")
    ap.add_argument("--write", action="store_true", help="rewrite the table in docs/performance.md")
    args = ap.parse_args()
    if any(s < 2 for s in args.seeds) or args.steps < 1 or args.repeats < 1:
        ap.error("--seeds must be >= 2, --steps and --repeats >= 1")
    cases = [(f"{s} seeds, {args.steps} steps", s, args.steps) for s in args.seeds]
    if not args.no_default:
        cases.append(("default reproduce", None, None))
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench_study-") as tmp:
        envs = environment(args.baseline, Path(tmp))
        figures = measure(cases, envs, args.repeats, Path(tmp))
    text = table(cases, figures, envs)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print(f"\n{machine}; load average {load:.1f} before, {os.getloadavg()[0]:.1f} after\n")
    print(text)
    grow = growth(cases, figures)
    if grow:
        print(f"\ngrowth from {grow['seeds'][0]} to {grow['seeds'][1]} seeds (x the smaller run's seconds): "
              + ", ".join(f"{k} {v}x" for k, v in grow.items() if k != "seeds"))
    if args.write:
        write_docs(f"{text}\n\nMeasured by `python experiments/bench_study.py` on {machine}.")
    print(json.dumps({"machine": machine, "load_average": [round(load, 2), round(os.getloadavg()[0], 2)],
                      "repeats": args.repeats, "growth": grow,
                      "runs": {f"{name}: {label}": {"wall_seconds": round(v["wall"], 3),
                                                    "phase_seconds": {p: round(s, 3) for p, s in v["phases"].items()}}
                               for (label, name), v in figures.items()}}))


if __name__ == "__main__":
    main()
