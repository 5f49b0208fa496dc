"""What a user waits for: the command line and the first call, each in a fresh process.

    python experiments/bench_cli.py [--repeats N] [--reference PATH [--reference-arg ARG ...]]

Every figure is the wall time of a new process (median of ``--repeats``), started the way a user
starts it, with its caches in a temporary ``XDG_CACHE_HOME`` (so the user's own compilation cache is
neither read nor written):

* ``help_seconds``: ``tabsim --help``; ``subcommand_help_seconds``: ``tabsim CMD --help`` for every
  command and prereg subcommand (``max_help_seconds`` the slowest);
* ``import_seconds``: ``python -c "import tabsim"``;
* ``api_sweep_seconds``: the reference prior sweep (``experiments/configs/paper_sweep.toml``, the
  ``paper`` preset at five prior strengths, 8 seeds, 200 steps) through the Python API in one process
  (``import tabsim``, ``load_config``, ``ts.run``), nothing written;
* ``cli_sweep_seconds``: the same sweep as ``tabsim run ... --out DIR -q`` (results, config,
  provenance and the pass@1 figure written); ``cli_over_api`` their ratio;
* ``reproduce_fresh_seconds``: ``tabsim reproduce --out DIR -q`` with an empty compilation cache
  (a fresh machine); ``reproduce_warm_seconds``: the same once the cache holds its programs;
* the ``_cold`` variants of the two sweeps run with an empty cache too (``_seconds`` are warm);
* ``numpy_reference_seconds``: the same prior sweep as a plain NumPy loop over prompts (the reference
  simulator of docs/science.md, the reference simulator, ``bench_engine.numpy_paper_sweep``), in a fresh process, once;
* with ``--reference PATH``: ``reference_sweep_seconds``, ``python PATH [--reference-arg ...]`` (the
  reference paper's harness running its prior sweep), once, and the ratios against it.

The last line printed is a JSON object with these figures and the ratios.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SWEEP = ROOT / "experiments" / "configs" / "paper_sweep.toml"
TABSIM = [sys.executable, "-m", "tabsim.cli"] if shutil.which("tabsim") is None else ["tabsim"]
API_SWEEP = ("import tabsim as ts; ts.run(ts.load_config({path!r}), progress=False)")
NUMPY_SWEEP = ("import sys; sys.path.insert(0, {exp!r}); from bench_engine import numpy_paper_sweep; "
               "numpy_paper_sweep()")


def wall(cmd: list[str], env: dict, cwd: Path) -> float:
    t0 = time.perf_counter()
    res = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stderr[-3000:]}")
    return dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="fresh processes per figure (median reported)")
    ap.add_argument("--reference", type=Path, default=None,
                    help="the reference paper's harness: a Python script that runs its prior sweep")
    ap.add_argument("--reference-arg", action="append", default=[],
                    help="an argument for the reference script (repeat for several)")
    ap.add_argument("--skip-numpy", action="store_true", help="skip the NumPy reference loop (~15 s)")
    args = ap.parse_args()
    if args.reference is not None and not args.reference.is_file():
        ap.error(f"--reference {args.reference}: no such file")

    work = Path(tempfile.mkdtemp(prefix="tabsim-bench-cli-"))
    n = args.repeats

    def env_with(cache: Path) -> dict:
        # matplotlib's font cache is shared by every run (one build, on the first process); bytecode is
        # written as on a user's machine
        env = dict(os.environ, XDG_CACHE_HOME=str(cache), MPLBACKEND="Agg", MPLCONFIGDIR=str(work / "mpl"))
        for var in ("TABSIM_COMPILATION_CACHE", "TABSIM_CACHE", "JAX_COMPILATION_CACHE_DIR", "PYTHONDONTWRITEBYTECODE"):
            env.pop(var, None)
        return env

    warm_env = env_with(work / "cache-warm")
    counter = iter(range(10**6))

    def fresh_env() -> dict:
        return env_with(work / f"cache-fresh-{next(counter)}")

    def median(make_cmd, env_of, repeats=n) -> tuple[float, list[float]]:
        times = [wall(make_cmd(), env_of(), ROOT) for _ in range(repeats)]
        return statistics.median(times), times

    def out_dir() -> str:
        return str(work / f"out-{next(counter)}")

    load = [os.getloadavg()[0]]
    out: dict = {"cpus": os.cpu_count(), "repeats": n}
    # the first process of all pays for the OS file cache; not counted
    wall(TABSIM + ["--help"], warm_env, ROOT)

    out["help_seconds"], out["help_all"] = median(lambda: TABSIM + ["--help"], lambda: warm_env)
    subs = {}
    for cmd in (["run"], ["sweep"], ["reproduce"], ["audit"], ["prereg"], ["prereg", "run"],
                ["prereg", "lock"], ["prereg", "report"], ["prereg", "validate"]):
        subs[" ".join(cmd)] = median(lambda: TABSIM + cmd + ["--help"], lambda: warm_env, max(1, n // 2))[0]
    out["subcommand_help_seconds"] = subs
    out["max_help_seconds"] = max([out["help_seconds"], *subs.values()])
    out["import_seconds"], _ = median(lambda: [sys.executable, "-c", "import tabsim"], lambda: warm_env)
    print(f"help {out['help_seconds']:.2f} s (slowest command {out['max_help_seconds']:.2f} s), "
          f"import {out['import_seconds']:.2f} s", file=sys.stderr)

    api = [sys.executable, "-c", API_SWEEP.format(path=str(SWEEP))]
    cli = lambda: TABSIM + ["run", str(SWEEP), "--out", out_dir(), "-q"]  # noqa: E731
    out["api_sweep_cold_seconds"], _ = median(lambda: api, fresh_env)
    out["cli_sweep_cold_seconds"], _ = median(cli, fresh_env)
    wall(api, warm_env, ROOT)  # fills the cache for both
    out["api_sweep_seconds"], out["api_sweep_all"] = median(lambda: api, lambda: warm_env)
    out["cli_sweep_seconds"], out["cli_sweep_all"] = median(cli, lambda: warm_env)
    out["cli_over_api"] = out["cli_sweep_seconds"] / out["api_sweep_seconds"]
    out["cli_over_api_cold"] = out["cli_sweep_cold_seconds"] / out["api_sweep_cold_seconds"]
    print(f"prior sweep: API {out['api_sweep_seconds']:.2f} s, CLI {out['cli_sweep_seconds']:.2f} s "
          f"({out['cli_over_api']:.2f}x); empty cache: API {out['api_sweep_cold_seconds']:.2f} s, "
          f"CLI {out['cli_sweep_cold_seconds']:.2f} s", file=sys.stderr)

    repro = lambda: TABSIM + ["reproduce", "--out", out_dir(), "-q"]  # noqa: E731
    out["reproduce_fresh_seconds"], out["reproduce_fresh_all"] = median(repro, fresh_env, max(3, n // 2))
    wall(repro(), warm_env, ROOT)
    out["reproduce_warm_seconds"], out["reproduce_warm_all"] = median(repro, lambda: warm_env)
    print(f"reproduce: fresh {out['reproduce_fresh_seconds']:.2f} s, warm {out['reproduce_warm_seconds']:.2f} s",
          file=sys.stderr)

    if not args.skip_numpy:
        numpy_cmd = [sys.executable, "-c", NUMPY_SWEEP.format(exp=str(ROOT / "experiments"))]
        out["numpy_reference_seconds"] = wall(numpy_cmd, warm_env, ROOT)
        out["numpy_over_cli_sweep"] = out["numpy_reference_seconds"] / out["cli_sweep_seconds"]
        out["numpy_over_cli_sweep_cold"] = out["numpy_reference_seconds"] / out["cli_sweep_cold_seconds"]
        print(f"NumPy reference loop: {out['numpy_reference_seconds']:.1f} s "
              f"({out['numpy_over_cli_sweep']:.1f}x the CLI sweep)", file=sys.stderr)
    if args.reference is not None:
        ref = [sys.executable, str(args.reference.resolve()), *args.reference_arg]
        out["reference_sweep_seconds"] = wall(ref, warm_env, args.reference.resolve().parent)
        out["reference_over_cli_sweep"] = out["reference_sweep_seconds"] / out["cli_sweep_seconds"]
        out["reference_over_reproduce_warm"] = out["reference_sweep_seconds"] / out["reproduce_warm_seconds"]
        print(f"reference harness prior sweep: {out['reference_sweep_seconds']:.1f} s "
              f"({out['reference_over_cli_sweep']:.1f}x the CLI sweep)", file=sys.stderr)
    load.append(os.getloadavg()[0])
    out["load_average"] = load
    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({k: (round(v, 3) if isinstance(v, float) else
                          [round(x, 3) for x in v] if isinstance(v, list) else
                          {a: round(b, 3) for a, b in v.items()} if isinstance(v, dict) else v)
                      for k, v in out.items()}))


if __name__ == "__main__":
    main()
