"""Tree-MDP throughput: sampled tokens per second, against the bandit's throughput per token.

Tree: depth 8, branching 4 (3280 nodes x 4 actions per prompt), 256 prompts (all in every batch),
G = 8, 64 seeds, one reward arm, GRPO with the clip surrogate. Bandit: the same N, G, seeds and algo
with K = 8 answers (one token per answer). Each program is compiled first and timed over repeats
(the best of 3 for the tree, of 12 for the bandit, whose runs are short).

    python experiments/bench_tree.py [--quick]

``--quick`` shrinks seeds and steps for a smoke run. Counts: ``answers`` (B G per step), ``token
slots`` (B G D, what the compiled program processes) and ``tokens`` (real tokens up to and including
STOP, from the exact expected length at the start and end of training, averaged). Each program runs
at ``steps`` and ``LONG steps``: the end-to-end rate includes drawing the task and the two exact
evaluations (a fixed cost that is large for a 3280-node tree), the marginal rate is the cost of the
extra ``(LONG - 1) steps`` of sampling and updates alone (``LONG = 5``: the difference is several
times the noise of the fixed cost). ``compile`` is ``train.lower(...).compile()`` alone
(trace, lowering and XLA compilation; the timed runs call the compiled executable); ``peak memory``
is the process's ``ru_maxrss`` after the two tree programs (before the bandit runs), so it is the
tree's peak plus the interpreter and JAX (``baseline``, measured before anything runs). The last line
printed is a JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

os.environ.setdefault("TABSIM_COMPILATION_CACHE", "0")  # cold compiles: no program from the on-disk cache

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import tabsim as ts  # noqa: E402
from tabsim.sim.params import stack_hypers  # noqa: E402
from tabsim.sim.rng import seed_words  # noqa: E402

LONG = 5  # the long runs have LONG x steps
ALGO = {"estimator": "grpo", "surrogate": "clip", "aggregation": "seq-mean-token-mean", "kl_placement": "none",
        "lr": 1.0}


def peak_mb() -> float:
    """Peak resident memory of this process so far, MB (``ru_maxrss`` is KiB on Linux, bytes on macOS)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 2**20 if sys.platform == "darwin" else rss / 1024


def timed(cfg, seeds: int, repeats: int):
    """``(best run seconds, compile seconds, first run seconds, output)``."""
    s = jnp.stack([seed_words(i) for i in range(seeds)])
    hp = stack_hypers([cfg.hyper_values()])
    t = time.perf_counter()
    train = ts.compiled_train(cfg).lower(s, hp).compile()
    compile_s = time.perf_counter() - t
    t = time.perf_counter()
    out = jax.block_until_ready(train(s, hp))
    first_s = time.perf_counter() - t
    best = first_s if repeats == 0 else float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        out = jax.block_until_ready(train(s, hp))
        best = min(best, time.perf_counter() - t)
    return best, compile_s, first_s, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="8 seeds, 4 steps, 1 repeat")
    ap.add_argument("--seeds", type=int, default=None)
    ap.add_argument("--steps", type=int, default=None)
    args = ap.parse_args()
    seeds = args.seeds or (8 if args.quick else 64)
    steps = args.steps or (4 if args.quick else 20)
    repeats = 1 if args.quick else 3
    N, G, D, b = 256, 8, 8, 4
    train = {"steps": steps, "batch_size": N, "group_size": G, "seeds": seeds}
    tree_cfg = ts.resolve({"task": {"env": "tree", "n_prompts": N, "n_answers": 8, "n_correct": 2,
                                    "tree": {"depth": D, "branching": b, "length_slope_wrong": 1.0}},
                           "arms": {"arms": ["true"]}, "algo": ALGO, "train": train})
    bandit_cfg = ts.resolve({"task": {"n_prompts": N, "n_answers": 8, "n_correct": 2}, "arms": {"arms": ["true"]},
                             "algo": ALGO, "train": train})
    baseline_mb = peak_mb()
    t0 = time.perf_counter()
    dt_tree, c_tree, first_tree, out = timed(tree_cfg, seeds, repeats)
    mean_len = float(jnp.mean(out["len_mean"]))  # mean of start and end (the only eval points)
    answers = seeds * steps * N * G
    long = {"train": {**train, "steps": LONG * steps}}
    dt_tree3, c_tree3 = timed(ts.resolve(tree_cfg.model_dump(), **long), seeds, repeats)[:2]
    tree_wall = time.perf_counter() - t0
    tree_peak_mb = peak_mb()
    # the bandit's runs take 0.05-0.3 s: the best of more repeats, so its marginal (a difference of
    # two short times) is not at the mercy of one noisy run
    bandit_repeats = repeats if args.quick else 4 * repeats
    dt_bandit, c_bandit = timed(bandit_cfg, seeds, bandit_repeats)[:2]
    dt_bandit3 = timed(ts.resolve(bandit_cfg.model_dump(), **long), seeds, bandit_repeats)[0]
    marg_tree, marg_bandit = max(dt_tree3 - dt_tree, 1e-9), max(dt_bandit3 - dt_bandit, 1e-9)
    res = {
        "tree_depth": D, "tree_branching": b, "tree_nodes": ts.make_env(tree_cfg).n_nodes, "n_prompts": N,
        "group_size": G, "seeds": seeds, "steps": steps, "quick": args.quick,
        "tree_seconds": round(dt_tree, 4), "tree_compile_seconds": round(c_tree, 2),
        "tree3_compile_seconds": round(c_tree3, 2), "tree_first_run_seconds": round(first_tree, 2),
        "tree_peak_memory_mb": round(tree_peak_mb, 1), "baseline_memory_mb": round(baseline_mb, 1),
        "tree_wall_seconds": round(tree_wall, 1),
        "tree_mean_len": round(mean_len, 3),
        "tree_answers_per_second": answers / dt_tree,
        "tree_tokens_per_second": answers * mean_len / dt_tree,
        "tree_token_slots_per_second": answers * D / dt_tree,
        "bandit_seconds": round(dt_bandit, 4), "bandit_compile_seconds": round(c_bandit, 2),
        "bandit_tokens_per_second": answers / dt_bandit,
        "tree_fixed_seconds": round(dt_tree - (dt_tree3 - dt_tree) / (LONG - 1), 4),
        "tree_marginal_tokens_per_second": (LONG - 1) * answers * mean_len / marg_tree,
        "tree_marginal_token_slots_per_second": (LONG - 1) * answers * D / marg_tree,
        "bandit_marginal_tokens_per_second": (LONG - 1) * answers / marg_bandit,
        "cpu_count": os.cpu_count(), "backend": jax.default_backend(),
    }
    res["tree_over_bandit_tokens_per_second"] = res["tree_tokens_per_second"] / res["bandit_tokens_per_second"]
    res["tree_over_bandit_marginal"] = res["tree_marginal_tokens_per_second"] / res["bandit_marginal_tokens_per_second"]
    print(f"tree compile {c_tree:.2f} s ({LONG * steps} steps: {c_tree3:.2f} s), peak memory {tree_peak_mb:.0f} MB "
          f"(baseline {baseline_mb:.0f} MB), both tree programs {tree_wall:.1f} s wall")
    print(f"tree  D={D} b={b}: {dt_tree:.3f} s -> {res['tree_tokens_per_second']:.3e} tokens/s "
          f"({res['tree_token_slots_per_second']:.3e} token slots/s, mean length {mean_len:.2f})")
    print(f"bandit K=8:     {dt_bandit:.3f} s -> {res['bandit_tokens_per_second']:.3e} tokens/s")
    print(f"marginal (steps only): tree {res['tree_marginal_tokens_per_second']:.3e} tokens/s, "
          f"bandit {res['bandit_marginal_tokens_per_second']:.3e} tokens/s "
          f"(ratio {res['tree_over_bandit_marginal']:.3f}; end to end {res['tree_over_bandit_tokens_per_second']:.3f})")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
