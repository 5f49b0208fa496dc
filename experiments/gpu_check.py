"""A GPU check anyone can run: the same work on the GPU and on the CPU of one machine, in about 5 minutes.

    python experiments/gpu_check.py            # on a machine with a GPU (and a GPU build of JAX)
    python experiments/gpu_check.py --quick    # a smoke run: smaller grids, the quick tree bench

What it runs, each device in processes of its own (``--device gpu`` / ``--device cpu``, with
``JAX_PLATFORMS=cpu`` for the CPU so that no GPU backend starts there):

1. ``tabsim reproduce`` in a fresh process with an empty cache, timed from outside; then the tables of
   the two runs compared cell by cell: per table the largest relative difference ``|a - b| / max(|a|,
   |b|, floor)`` (the floor a thousandth of the column's scale, so that a near-zero cell is judged on its
   column's scale and a large one, such as an F of 1e6, by its own) and where it is, and whether every
   verdict (true/false and text cells) is the same;
2. the engine's steady throughput: the bandit with 1024 prompts, K = 8, G = 8, 50 steps, the TRUE arm,
   at 64, 512 and 4096 seeds (a compiled program timed on its second call), in sampled answers/s;
3. ``experiments/bench_tree.py`` (its best end-to-end run time and compile time);
4. the expected flow's prior sweep of ``experiments/bench_expected.py``: its first call in a fresh
   process (compilation included) and its steady time (median of 3 more calls).

5. with a GPU, ``pytest tests/core`` on it (the suite's default workers; ``--no-tests`` skips it): the
   passed, failed and error counts and the failures' names.

The last line printed is one JSON object: ``{"machine", "gpu", "cpu", "ratios", "reproduce_tables",
"tests_core_gpu"}``.
On a machine without a GPU the GPU half is skipped (``"gpu": null``) and the CPU half still runs.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEEDS = (64, 512, 4096)
QUICK_SEEDS = (16, 64)


def _env(device: str, cache: Path) -> dict:
    env = {**os.environ, "TABSIM_DEVICE": device, "TABSIM_CACHE": str(cache)}
    env.pop("TABSIM_COMPILATION_CACHE", None)
    if device == "cpu":
        env["JAX_PLATFORMS"] = "cpu"
    else:
        env.pop("JAX_PLATFORMS", None)
    return env


def _last_json(text: str) -> dict:
    return json.loads(text.strip().splitlines()[-1])


def child(device: str, quick: bool) -> dict:
    """In a process of its own: the engine's throughput and the expected flow, on ``device``."""
    import jax

    import tabsim as ts
    from tabsim.sim.params import stack_hypers
    from tabsim.sim.rng import seed_array
    from tabsim.runtime import device as dev_mod

    dev = dev_mod.pick(device)
    out = {"device": f"{dev.platform}:{dev.id}", "device_kind": dev.device_kind, "throughput": {}}
    n, steps = (256, 20) if quick else (1024, 50)
    with dev_mod.using(dev):
        for seeds in (QUICK_SEEDS if quick else SEEDS):
            cfg = ts.resolve({"task": {"n_prompts": n, "n_answers": 8}, "arms": {"arms": ["true"]},
                              "train": {"group_size": 8, "batch_size": n, "steps": steps, "seeds": seeds,
                                        "metrics": ["pass1"]}})
            s = jax.device_put(seed_array(range(seeds)), dev)
            hp = stack_hypers([cfg.hyper_values()])
            t = time.perf_counter()
            train = ts.compiled_train(cfg).lower(s, hp).compile()
            compile_s = time.perf_counter() - t
            jax.block_until_ready(train(s, hp))
            t = time.perf_counter()
            jax.block_until_ready(train(s, hp))
            run_s = time.perf_counter() - t
            answers = seeds * steps * n * 8
            out["throughput"][str(seeds)] = {"answers_per_second": answers / run_s, "run_seconds": round(run_s, 4),
                                             "compile_seconds": round(compile_s, 2)}
        sys.path.insert(0, str(HERE))
        from bench_expected import jax_sweep  # noqa: E402  (the bench's own sweep)

        t = time.perf_counter()
        jax_sweep()
        first = time.perf_counter() - t
        steady = []
        for _ in range(3):
            t = time.perf_counter()
            jax_sweep()
            steady.append(time.perf_counter() - t)
    out["expected_first_seconds"] = round(first, 3)
    out["expected_steady_seconds"] = round(sorted(steady)[1], 4)
    return out


def _reproduce(device: str, root: Path) -> tuple[float, Path]:
    dest = root / f"reproduce-{device}"
    cache = root / f"cache-reproduce-{device}"
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "tabsim.cli", "reproduce", "--device", device, "--out", str(dest), "-q"],
                       env=_env(device, cache), capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"tabsim reproduce --device {device} failed:\n{r.stderr[-3000:]}")
    return wall, dest


REL_FLOOR = 1e-3  # near-zero cells: a difference is relative to at least this share of the column's scale


def _relative(x, y):
    """``|x - y| / max(|x|, |y|, floor)`` per cell, the floor ``REL_FLOOR`` times the column's largest
    magnitude (a cell near zero, such as a d_null of 1e-4 points, is then judged on the column's scale)."""
    import numpy as np

    scale = np.nanmax(np.abs(np.concatenate([x, y]))) if len(x) else 0.0
    floor = max(REL_FLOOR * scale, 1e-300)
    return np.abs(x - y) / np.maximum(np.maximum(np.abs(x), np.abs(y)), floor)


def compare_tables(a: Path, b: Path) -> dict:
    """The two reproduce runs' tables cell by cell: per table the largest relative difference of its numeric
    cells (:func:`_relative`) and where it is, the largest absolute one, and whether every verdict (the
    true/false and text cells: decisions, signs, labels) is the same."""
    import numpy as np
    import pandas as pd

    out = {"max_rel_difference": 0.0, "where": None, "verdicts_agree": True, "verdict_differences": [],
           "per_table": {}}
    for fa in sorted((a / "tables").glob("*.csv")):
        fb = b / "tables" / fa.name
        ta, tb = pd.read_csv(fa), pd.read_csv(fb) if fb.exists() else None
        if tb is None or ta.shape != tb.shape or list(ta.columns) != list(tb.columns):
            out["per_table"][fa.name] = "different shapes"
            out["verdicts_agree"] = False
            continue
        rel, where, absolute = 0.0, None, 0.0
        for col in ta.columns:
            numeric = [pd.api.types.is_numeric_dtype(t[col]) and not pd.api.types.is_bool_dtype(t[col]) for t in (ta, tb)]
            if not all(numeric):  # a verdict: true/false or text
                differ = ta[col].astype(str) != tb[col].astype(str)
                for i in np.flatnonzero(differ.to_numpy()):
                    out["verdict_differences"].append(f"{fa.name}:{col}[{i}] {ta[col].iloc[i]} vs {tb[col].iloc[i]}")
                continue
            x, y = ta[col].to_numpy(float), tb[col].to_numpy(float)
            if np.isnan(x).all() and np.isnan(y).all():
                continue
            r = _relative(x, y)
            if np.any(np.isnan(x) != np.isnan(y)):
                out["verdict_differences"].append(f"{fa.name}:{col} missing in one run only")
            r, d = np.nan_to_num(r, nan=0.0), np.nan_to_num(np.abs(x - y), nan=0.0)
            absolute = max(absolute, float(d.max()) if len(d) else 0.0)
            if len(r) and float(r.max()) > rel:
                rel, where = float(r.max()), f"{fa.name}:{col}[{int(r.argmax())}]"
        out["per_table"][fa.name] = {"max_rel_difference": rel, "where": where, "max_abs_difference": absolute}
        if rel > out["max_rel_difference"]:
            out["max_rel_difference"], out["where"] = rel, where
    out["verdicts_agree"] = out["verdicts_agree"] and not out["verdict_differences"]
    return out


def core_tests(device: str, root: Path) -> dict:
    """``pytest tests/core`` in a process of its own on ``device`` (the suite's own xdist workers; on a GPU
    ``tests/conftest.py`` stops them preallocating it): passed / failed / error counts and the failures."""
    import re

    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "pytest", "tests/core", "-q", "-p", "no:cacheprovider", "-rf"],
                       cwd=HERE.parent, env=_env(device, root / f"cache-tests-{device}"), capture_output=True,
                       text=True, timeout=3600)
    tail = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
    count = lambda word: int(m.group(1)) if (m := re.search(rf"(\d+) {word}", tail)) else 0  # noqa: E731
    failures = [line[7:] for line in r.stdout.splitlines() if line.startswith("FAILED ")]
    return {"passed": count("passed"), "failed": count("failed"), "errors": count("error"), "returncode": r.returncode,
            "failures": failures[:20], "seconds": round(time.perf_counter() - t, 1)}


def _half(device: str, root: Path, quick: bool) -> dict:
    wall, dest = _reproduce(device, root)
    res = {"reproduce_seconds": round(wall, 2), "reproduce_out": str(dest)}
    r = subprocess.run([sys.executable, __file__, "--child", device, *(["--quick"] if quick else [])],
                       env=_env(device, root / f"cache-child-{device}"), capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise SystemExit(f"the {device} measurements failed:\n{r.stderr[-3000:]}")
    res.update(_last_json(r.stdout))
    tree_env = {**_env(device, root / f"cache-tree-{device}"), "TABSIM_COMPILATION_CACHE": "0"}
    r = subprocess.run([sys.executable, str(HERE / "bench_tree.py"), *(["--quick"] if quick else [])],
                       env=tree_env, capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise SystemExit(f"bench_tree.py on the {device} failed:\n{r.stderr[-3000:]}")
    tree = _last_json(r.stdout)
    res["tree_seconds"], res["tree_compile_seconds"] = tree["tree_seconds"], tree["tree_compile_seconds"]
    res["tree_backend"] = tree["backend"]
    return res


def has_gpu() -> bool:
    r = subprocess.run([sys.executable, "-c", "import jax; print(len(jax.devices('gpu')))"],
                       env={k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"},
                       capture_output=True, text=True, timeout=300)
    return r.returncode == 0 and r.stdout.strip().isdigit() and int(r.stdout.strip()) > 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller grids and the quick tree bench (a smoke run)")
    ap.add_argument("--keep", type=Path, default=None, help="keep the runs' folders here (default: a temporary folder)")
    ap.add_argument("--no-tests", action="store_true", help="skip pytest tests/core on the GPU")
    ap.add_argument("--child", choices=["cpu", "gpu"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.quick)))
        return 0
    t0 = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="tabsim-gpu-check-")) if args.keep is None else args.keep
    root.mkdir(parents=True, exist_ok=True)
    import jax
    import jaxlib

    machine = {"python": platform.python_version(), "jax": jax.__version__, "jaxlib": jaxlib.__version__,
               "cpu_cores": os.cpu_count(), "platform": platform.platform(), "quick": args.quick}
    try:
        gpu = _half("gpu", root, args.quick) if has_gpu() else None
        cpu = _half("cpu", root, args.quick)
        tables = compare_tables(Path(gpu["reproduce_out"]), Path(cpu["reproduce_out"])) if gpu else None
        tests = core_tests("gpu", root) if gpu and not args.no_tests else None
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    ratios = None
    if gpu:
        ratios = {"reproduce_cpu_over_gpu": round(cpu["reproduce_seconds"] / gpu["reproduce_seconds"], 2),
                  "tree_cpu_over_gpu": round(cpu["tree_seconds"] / gpu["tree_seconds"], 1),
                  "expected_steady_cpu_over_gpu": round(cpu["expected_steady_seconds"] / gpu["expected_steady_seconds"], 1),
                  **{f"throughput_{s}_gpu_over_cpu": round(gpu["throughput"][s]["answers_per_second"]
                                                           / cpu["throughput"][s]["answers_per_second"], 1)
                     for s in cpu["throughput"]}}
    for name, half in (("gpu", gpu), ("cpu", cpu)):
        if half is None:
            print("gpu: none here (JAX sees no GPU); the GPU half was skipped", file=sys.stderr)
            continue
        rates = ", ".join(f"{s} seeds {v['answers_per_second']:.2e}/s" for s, v in half["throughput"].items())
        print(f"{name} ({half['device_kind']}): reproduce {half['reproduce_seconds']} s; bandit {rates}; "
              f"tree bench {half['tree_seconds']} s (compile {half['tree_compile_seconds']} s); expected flow first "
              f"{half['expected_first_seconds']} s, steady {half['expected_steady_seconds']} s", file=sys.stderr)
    if tables:
        print(f"reproduce tables, GPU against CPU: largest relative difference {tables['max_rel_difference']:.3g} "
              f"({tables['where']}); every verdict the same: {'yes' if tables['verdicts_agree'] else 'NO'}",
              file=sys.stderr)
    if tests:
        print(f"pytest tests/core on the GPU: {tests['passed']} passed, {tests['failed']} failed, "
              f"{tests['errors']} errors", file=sys.stderr)
    print(f"gpu_check: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    print(json.dumps({"machine": machine, "gpu": gpu, "cpu": cpu, "ratios": ratios,
                      "reproduce_tables": tables, "tests_core_gpu": tests, "seconds": round(time.perf_counter() - t0, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
