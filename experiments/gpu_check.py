"""A GPU check anyone can run: the same work on the GPU and on the CPU of one machine, in about 5 minutes.

    python experiments/gpu_check.py            # on a machine with a GPU (and a GPU build of JAX)
    python experiments/gpu_check.py --quick    # a smoke run: smaller grids, the quick tree bench

What it runs, each device in processes of its own (``--device gpu`` / ``--device cpu``, with
``JAX_PLATFORMS=cpu`` for the CPU so that no GPU backend starts there):

1. ``tabsim reproduce`` in a fresh process with an empty cache, timed from outside; then the tables of
   the two runs compared cell by cell (the largest absolute difference of every numeric table, and
   which one it is);
2. the engine's steady throughput: the bandit with 1024 prompts, K = 8, G = 8, 50 steps, the TRUE arm,
   at 64, 512 and 4096 seeds (a compiled program timed on its second call), in sampled answers/s;
3. ``experiments/bench_tree.py`` (its best end-to-end run time and compile time);
4. the expected flow's prior sweep of ``experiments/bench_expected.py``: its first call in a fresh
   process (compilation included) and its steady time (median of 3 more calls).

The last line printed is one JSON object: ``{"machine", "gpu", "cpu", "ratios", "reproduce_tables"}``.
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
    from tabsim.params import stack_hypers
    from tabsim.rng import seed_array
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


def compare_tables(a: Path, b: Path) -> dict:
    """The largest absolute difference between the numeric cells of the tables of two reproduce runs."""
    import numpy as np
    import pandas as pd

    worst = {"max_abs_difference": 0.0, "where": None, "per_table": {}}
    for fa in sorted((a / "tables").glob("*.csv")):
        fb = b / "tables" / fa.name
        ta, tb = pd.read_csv(fa), pd.read_csv(fb)
        if ta.shape != tb.shape or list(ta.columns) != list(tb.columns):
            worst["per_table"][fa.name] = "different shapes"
            continue
        biggest, where = 0.0, None
        for col in ta.columns:
            x, y = pd.to_numeric(ta[col], errors="coerce"), pd.to_numeric(tb[col], errors="coerce")
            if x.isna().all() and y.isna().all():
                continue
            d = np.nanmax(np.abs(x.to_numpy(float) - y.to_numpy(float))) if len(x) else 0.0
            if np.isfinite(d) and d > biggest:
                biggest, where = float(d), f"{fa.name}:{col}"
        worst["per_table"][fa.name] = biggest
        if biggest > worst["max_abs_difference"]:
            worst["max_abs_difference"], worst["where"] = biggest, where
    return worst


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
        print(f"reproduce tables, GPU against CPU: largest difference {tables['max_abs_difference']:.3g} "
              f"({tables['where']})", file=sys.stderr)
    print(f"gpu_check: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    print(json.dumps({"machine": machine, "gpu": gpu, "cpu": cpu, "ratios": ratios,
                      "reproduce_tables": tables, "seconds": round(time.perf_counter() - t0, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
