"""Engine benchmark: throughput on a large grid, the `paper` prior sweep end to end, and a plain
NumPy per-prompt loop doing the same sweep.

    python experiments/bench_engine.py [--quick]

The last line printed is a JSON object with samples_per_second, paper_sweep_seconds (first call in
a fresh process: tracing and XLA compilation included), numpy_reference_seconds and speedup (NumPy
loop time / paper_sweep_seconds), plus paper_sweep_steady_seconds and speedup_steady_state (the same
sweep called again, the compiled program reused: what every further sweep of the same shape costs).
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

PRIORS = (0.20, 0.35, 0.50, 0.65, 0.80)
ARMS = ("frozen", "random", "majority", "true")


def numpy_paper_sweep(seeds=8, steps=200, N=40, K=8, k=2, G=8, B=16, lr=0.05, beta=0.01, f=0.2):
    """The reference simulator (SPEC §3) as a plain NumPy loop over prompts, arms, seeds and priors."""
    out = np.zeros((len(PRIORS), seeds, len(ARMS)))
    for pi_, p_s in enumerate(PRIORS):
        for s in range(seeds):
            rng = np.random.default_rng(s)
            correct = np.zeros((N, K), bool)
            fmt = np.zeros(N, int)
            for n in range(N):
                perm = rng.permutation(K)
                correct[n, perm[:k]] = True
                fmt[n] = perm[k]
            logit = np.where(correct, np.log(p_s / k), np.log((1 - p_s) / (K - k)))
            logit[np.arange(N), fmt] += np.log1p(f * K)
            prior = logit - np.log(np.exp(logit).sum(1, keepdims=True))
            pref = np.exp(prior)
            for a, arm in enumerate(ARMS):
                theta = prior.copy()
                arng = np.random.default_rng(1000 + s)  # paired across arms
                for _ in range(steps):
                    batch = arng.permutation(N)[:B]
                    upd = np.zeros_like(theta)
                    for n in batch:
                        z = np.exp(theta[n] - theta[n].max())
                        pi = z / z.sum()
                        ans = arng.choice(K, size=G, p=pi)
                        if arm == "frozen":
                            continue
                        if arm == "random":
                            r = (arng.random(G) < 0.5).astype(float)
                        elif arm == "majority":
                            r = (ans == np.bincount(ans, minlength=K).argmax()).astype(float)
                        else:
                            r = correct[n, ans].astype(float)
                        if r.max() == r.min():
                            continue
                        adv = (r - r.mean()) / (r.std() + 1e-8)
                        g = np.zeros(K)
                        np.add.at(g, ans, adv / G)
                        g -= adv.sum() / G * pi
                        g -= beta * (pi - pref[n])
                        upd[n] += lr * g
                    theta += upd
                z = np.exp(theta - theta.max(1, keepdims=True))
                pi = z / z.sum(1, keepdims=True)
                out[pi_, s, a] = (pi * correct).sum(1).mean()
    return out


def tabsim_paper_sweep():
    import tabsim as ts

    t = time.perf_counter()
    res = ts.run({"preset": "paper", "sweep": {"prior_strength": list(PRIORS)}}, progress=False)
    fin = res.final().groupby(["prior_strength", "arm"], observed=True).pass1.mean().unstack()
    return time.perf_counter() - t, fin


def throughput(N=1024, K=8, G=8, seeds=64, steps=50, arms=("true",), rng="fast"):
    import jax

    import tabsim as ts
    from tabsim.params import stack_hypers
    from tabsim.rng import seed_words

    cfg = ts.resolve({"task": {"n_prompts": N, "n_answers": K, "n_correct": 2},
                      "arms": {"arms": list(arms)},
                      "algo": {"estimator": "grpo", "surrogate": "reinforce", "aggregation": "group-sum",
                               "kl_placement": "none", "lr": 0.05},
                      "train": {"steps": steps, "batch_size": N, "group_size": G, "seeds": seeds, "rng": rng}})
    train = ts.compiled_train(cfg)
    import jax.numpy as jnp
    s = jnp.stack([seed_words(i) for i in range(seeds)])
    hp = stack_hypers([cfg.hyper_values()])
    jax.block_until_ready(train(s, hp))  # compile
    reps = []
    for _ in range(3):
        t = time.perf_counter()
        jax.block_until_ready(train(s, hp))
        reps.append(time.perf_counter() - t)
    dt = min(reps)
    samples = seeds * len(arms) * steps * N * G
    return samples / dt, dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer seeds in the NumPy reference (scaled up)")
    args = ap.parse_args()
    sweep_s, fin = tabsim_paper_sweep()
    print(f"tabsim paper sweep (5 priors x 4 arms x 8 seeds x 200 steps, incl. compile): {sweep_s:.2f} s")
    steady_s = min(tabsim_paper_sweep()[0] for _ in range(3))
    print(f"the same sweep again (compiled program reused): {steady_s:.3f} s")
    print(fin.round(3).to_string())
    for rng in ("fast", "threefry"):
        sps, dt = throughput(rng=rng)
        print(f"throughput rng={rng}: N=1024 K=8 G=8 64 seeds, 50 steps: {dt:.3f} s -> {sps:.3e} sampled answers/s")
        if rng == "fast":
            best = sps
    sps4, _ = throughput(arms=ARMS)
    print(f"throughput with 4 paired arms: {sps4:.3e} sampled answers/s")
    n_seeds = 2 if args.quick else 8
    t = time.perf_counter()
    ref = numpy_paper_sweep(seeds=n_seeds)
    np_s = (time.perf_counter() - t) * 8 / n_seeds
    print(f"NumPy per-prompt loop, same sweep: {np_s:.2f} s" + (" (scaled from 2 seeds)" if args.quick else ""))
    print("NumPy final pass@1 (mean over seeds):")
    print(np.round(ref.mean(1), 3))
    print(json.dumps({"samples_per_second": float(best), "paper_sweep_seconds": round(sweep_s, 3),
                      "numpy_reference_seconds": round(np_s, 3), "speedup": round(np_s / sweep_s, 2),
                      "paper_sweep_steady_seconds": round(steady_s, 3),
                      "speedup_steady_state": round(np_s / steady_s, 1),
                      "cpu_count": os.cpu_count()}))


if __name__ == "__main__":
    main()
