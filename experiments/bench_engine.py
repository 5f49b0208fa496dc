"""Engine benchmark: throughput on a large grid, the `paper` prior sweep end to end, and a plain
NumPy per-prompt loop doing the same sweep.

    python experiments/bench_engine.py [--quick]

The last line printed is a JSON object with:

* samples_per_second: sampled answers per second in steady state on a large grid;
* paper_sweep_seconds: the paper prior sweep as the first call in a fresh process (tracing and XLA
  compilation included), the median over ``--fresh`` processes (``paper_sweep_seconds_all`` lists
  them: the machine's noise is about +-10%). It records what the NumPy loop computes: pass@1
  (``train.metrics = ["pass1"]``) and the per-update diagnostics;
* paper_sweep_all_metrics_seconds and speedup_all_metrics: the same with the preset's default metric
  set (pass@1, entropy, mode accuracy, format mass, KL to the prior at every eval point);
* numpy_reference_seconds and speedup (NumPy loop time / paper_sweep_seconds);
* paper_sweep_steady_seconds and speedup_steady_state: the same sweep called again, the compiled
  program reused (what every further sweep of the same shape costs);
* paper_sweep_cached_seconds: the first call in a fresh process whose compiled program is loaded
  from the on-disk compilation cache (``TABSIM_COMPILATION_CACHE``) written by an earlier process;
* jax_minimal_program_seconds: the floor of the cold figure. A minimal hand-written JAX program of
  the same sweep (the reference update written out by hand, no autodiff, final pass@1 only), first
  call in a fresh process, median over ``--fresh`` processes.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

PRIORS = (0.20, 0.35, 0.50, 0.65, 0.80)
ARMS = ("frozen", "random", "majority", "true")


def numpy_paper_sweep(seeds=8, steps=200, N=40, K=8, k=2, G=8, B=16, lr=0.05, beta=0.01, f=0.2):
    """The reference simulator (docs/science.md) as a plain NumPy loop over prompts, arms, seeds and priors."""
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


def tabsim_paper_sweep(all_metrics: bool = False):
    """The ``paper`` preset's prior sweep through ``tabsim.run``; seconds and final pass@1 [prior, arm].

    By default it records what the NumPy loop computes, pass@1 (``train.metrics = ["pass1"]``, plus
    the per-update diagnostics); ``all_metrics`` keeps the preset's default metric set (pass@1,
    entropy, mode accuracy, format mass, KL to the prior).
    """
    import tabsim as ts

    cfg = {"preset": "paper", "sweep": {"prior_strength": list(PRIORS)}}
    if not all_metrics:
        cfg["train"] = {"metrics": ["pass1"]}
    t = time.perf_counter()
    res = ts.run(cfg, progress=False)
    fin = res.final().groupby(["prior_strength", "arm"], observed=True).pass1.mean().unstack()
    return time.perf_counter() - t, fin


def minimal_jax_sweep(seeds=8, steps=200, N=40, K=8, k=2, G=8, B=16, lr=0.05, beta=0.01, f=0.2):
    """The paper sweep as a minimal hand-written JAX program (the floor of what a compiled sweep costs).

    The reference update written out in closed form (no autodiff, no diagnostics, no metrics but the
    final pass@1), with tabsim's random numbers. Returns (seconds of the first call, final pass@1
    [priors, arms] averaged over seeds).
    """
    import jax
    import jax.numpy as jnp

    from tabsim.sim import rng as R
    from tabsim.sim.ops import take_rows, weighted_counts

    def init(seed, p_s):
        u = R.uniform(seed, (N, K), step=R.TASK_STEP, tag=R.POSITIONS)
        rank = jnp.argsort(jnp.argsort(u, 1), 1)
        correct = (rank < k).astype(jnp.float32)
        logit = jnp.where(correct > 0, jnp.log(p_s / k), jnp.log((1 - p_s) / (K - k)))
        logit = logit + jnp.where(rank == k, jnp.log1p(f * K), 0.0)
        return jax.nn.log_softmax(logit, -1), correct

    def step(theta, prior, correct, seed, t, arm):
        idx = jax.lax.top_k(R.uniform(seed, (N,), step=t, tag=R.BATCH), B)[1]
        pi = jax.nn.softmax(theta[idx], -1)
        ans = R.categorical(seed, pi, G, step=t, tag=R.ROLLOUT)
        u = R.uniform(seed, (B, G), step=t, tag=R.REWARD)
        label = jnp.argmax(weighted_counts(ans, None, K), -1)
        r = jnp.stack([jnp.zeros((B, G)), (u < 0.5).astype(jnp.float32),
                       (ans == label[:, None]).astype(jnp.float32), take_rows(correct[idx], ans)])[arm]
        m = r.mean(-1, keepdims=True)
        sd = jnp.sqrt(((r - m) ** 2).mean(-1, keepdims=True))
        keep = (r.max(-1) > r.min(-1)).astype(jnp.float32)[:, None]
        adv = keep * (r - m) / (sd + 1e-8)
        g = weighted_counts(ans, adv / G, K) - adv.sum(-1, keepdims=True) / G * pi
        g = g - beta * (pi - jnp.exp(prior[idx])) * keep
        return theta.at[idx].add((arm != 0) * lr * g)

    @jax.jit
    def sweep(s, p, a):
        def one(seed, p_s, arm):
            prior, correct = init(seed, p_s)
            theta = jax.lax.fori_loop(0, steps, lambda t, th: step(th, prior, correct, seed, t, arm), prior)
            return (jax.nn.softmax(theta, -1) * correct).sum(-1).mean()
        return jax.vmap(one)(s, p, a)

    from tabsim.sim.rng import seed_array
    n_p, n_a = len(PRIORS), len(ARMS)
    s = np.repeat(np.tile(seed_array(range(seeds)), (n_p, 1)), n_a, axis=0)
    p = np.repeat(np.asarray(PRIORS, np.float32), seeds * n_a)
    a = np.tile(np.arange(n_a, dtype=np.int32), n_p * seeds)
    t = time.perf_counter()
    out = np.asarray(sweep(s, p, a))
    return time.perf_counter() - t, out.reshape(n_p, seeds, n_a).mean(1)


def child(kind: str):
    """One measurement in this (fresh) process; prints its seconds as JSON."""
    import tabsim  # noqa: F401  (imported before timing, as in a user's session)

    dt, _ = minimal_jax_sweep() if kind == "floor" else tabsim_paper_sweep(all_metrics=kind == "cold_all")
    print(json.dumps({"seconds": dt}))


def fresh(kind: str, n: int, env: dict | None = None) -> list[float]:
    """Seconds of ``n`` fresh processes each measuring ``kind``."""
    out = []
    for _ in range(n):
        res = subprocess.run([sys.executable, __file__, "--child", kind], capture_output=True, text=True,
                             check=True, env={**os.environ, **(env or {})})
        out.append(json.loads(res.stdout.strip().splitlines()[-1])["seconds"])
    return out


def throughput(N=1024, K=8, G=8, seeds=64, steps=50, arms=("true",), rng="fast"):
    import jax

    import tabsim as ts
    from tabsim.sim.params import stack_hypers
    from tabsim.sim.rng import seed_words

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
    ap.add_argument("--fresh", type=int, default=5, help="fresh processes per cold figure (median reported)")
    ap.add_argument("--child", choices=["cold", "cold_all", "floor"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child)
    cold = fresh("cold", args.fresh)
    sweep_s = statistics.median(cold)
    print(f"tabsim paper sweep (5 priors x 4 arms x 8 seeds x 200 steps), first call in a fresh process, "
          f"incl. tracing and compilation: median {sweep_s:.2f} s over {len(cold)} processes "
          f"({', '.join(f'{x:.2f}' for x in cold)})")
    cold_all = fresh("cold_all", args.fresh)
    all_s = statistics.median(cold_all)
    print(f"the same with the preset's default metrics (pass@1, entropy, mode accuracy, format mass, KL), "
          f"fresh processes: median {all_s:.2f} s ({', '.join(f'{x:.2f}' for x in cold_all)})")
    floor = fresh("floor", args.fresh)
    print(f"minimal hand-written JAX program of the same sweep, first call in a fresh process: "
          f"median {statistics.median(floor):.2f} s ({', '.join(f'{x:.2f}' for x in floor)})")
    with tempfile.TemporaryDirectory() as cache:
        fresh("cold", 1, {"TABSIM_COMPILATION_CACHE": cache})  # writes the cache
        cached = fresh("cold", 3, {"TABSIM_COMPILATION_CACHE": cache})
    print(f"the same, compiled program loaded from the on-disk compilation cache: median "
          f"{statistics.median(cached):.2f} s ({', '.join(f'{x:.2f}' for x in cached)})")
    _, fin = tabsim_paper_sweep()
    _, minimal = minimal_jax_sweep()
    gap = np.abs(fin[list(ARMS)].to_numpy() - minimal).max()
    print(f"minimal program vs tabsim, final pass@1 per prior x arm: max |difference| {gap:.1e}")
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
                      "paper_sweep_seconds_all": [round(x, 3) for x in cold],
                      "paper_sweep_all_metrics_seconds": round(all_s, 3),
                      "speedup_all_metrics": round(np_s / all_s, 2),
                      "paper_sweep_steady_seconds": round(steady_s, 3),
                      "speedup_steady_state": round(np_s / steady_s, 1),
                      "paper_sweep_cached_seconds": round(statistics.median(cached), 3),
                      "speedup_cached": round(np_s / statistics.median(cached), 2),
                      "jax_minimal_program_seconds": round(statistics.median(floor), 3),
                      "speedup_jax_minimal_program": round(np_s / statistics.median(floor), 2),
                      "cpu_count": os.cpu_count()}))


if __name__ == "__main__":
    main()
