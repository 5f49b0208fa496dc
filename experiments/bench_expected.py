"""Benchmark: the expected flow's prior sweep of the `paper` preset, against a plain NumPy reference.

    python experiments/bench_expected.py [--repeats 5]

The sweep is the preset's five reference priors x four arms x 200 steps with
``train.dynamics = "expected"`` through ``ts.run``. Printed figures:

* steady_seconds: the sweep called again in the same process (the compiled program reused), the median
  over ``--repeats`` calls: what every further sweep of this shape costs;
* cold_seconds: the first call in a fresh process (tracing and XLA compilation included; the on-disk
  compilation cache switched off);
* cached_seconds: the first call in a fresh process whose on-disk compilation cache (on by default)
  already holds the program, as on a user's second session: the median of three such processes, after
  one that fills a temporary cache;
* numpy_seconds: a plain NumPy implementation of the same flow (every composition of the group
  enumerated per prompt, per step, with per-prompt advantage tables), and the ratios numpy / steady and
  numpy / cold;
* max_abs_pass1_difference: the largest difference of any recorded pass@1 between the two (float32
  against float64).

The last line printed is a JSON object with these figures.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

PRIORS = [0.2, 0.35, 0.5, 0.65, 0.8]
CONFIG = {"preset": "paper", "train": {"dynamics": "expected"}, "sweep": {"prior_strength": PRIORS}}


def jax_sweep():
    import tabsim as ts

    return ts.run(CONFIG, progress=False)


def fresh_process_seconds(cache: str) -> float:
    """The sweep's first call in a new process (import excluded), with ``TABSIM_COMPILATION_CACHE = cache``."""
    code = ("import time, tabsim as ts; t = time.perf_counter(); "
            f"ts.run({CONFIG!r}, progress=False); print(time.perf_counter() - t)")
    env = {**os.environ, "TABSIM_COMPILATION_CACHE": cache}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def cold_seconds() -> float:
    return fresh_process_seconds("0")


def cached_seconds() -> float:
    with tempfile.TemporaryDirectory() as cache:
        fresh_process_seconds(cache)  # fills the cache
        return statistics.median(fresh_process_seconds(cache) for _ in range(3))


# -- the plain NumPy reference --------------------------------------------------------------------
def compositions(n: int, k: int) -> np.ndarray:
    if k == 1:
        return np.array([[n]])
    return np.array([[i, *rest] for i in range(n, -1, -1) for rest in compositions(n - i, k - 1)])


def log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def grpo_pop(rewards, eps=1e-8):
    """Population-std z-score of each row of ``rewards [R, G]`` (0 for homogeneous rows)."""
    mean, std = rewards.mean(-1, keepdims=True), rewards.std(-1, keepdims=True)
    return np.where(std > 0, (rewards - mean) / (std + eps), 0.0)


def numpy_flow(prior, correct, *, G=8, B=16, lr=0.05, beta=0.01, gamma=0.5, steps=200, eval_every=200):
    """pass@1 of the expected flow of the paper preset, ``{arm: [evals]}``, for one task."""
    N, K = prior.shape
    comp = compositions(G, K).astype(np.float64)  # [O, K]
    lmc = math.lgamma(G + 1) - np.vectorize(lambda c: math.lgamma(c + 1))(comp).sum(1)
    canon = np.stack([np.repeat(np.arange(K), row.astype(int)) for row in comp])  # [O, G] answers of each group
    ref = np.exp(prior)
    tables = {}
    for arm in ("random", "majority", "true"):
        C = np.zeros((N, len(comp), K))
        kept = np.zeros((N, len(comp)))
        for i in range(N):
            if arm == "true":
                r = correct[i][canon]  # [O, G]
                A = grpo_pop(r)
                kp = (r.max(1) > r.min(1)).astype(float)
                coef = A * kp[:, None] / G
            elif arm == "majority":
                label = comp.argmax(1)  # ties to the lowest index
                r = (canon == label[:, None]).astype(float)
                A = grpo_pop(r)
                kp = (r.max(1) > r.min(1)).astype(float)
                coef = A * kp[:, None] / G
            else:  # rewards independent of the answers: every reward pattern, weighted
                coef = np.zeros(canon.shape)
                kp = np.zeros(len(comp))
                for bits in range(2 ** G):
                    r = np.array([(bits >> g) & 1 for g in range(G)], float)
                    w = gamma ** r.sum() * (1 - gamma) ** (G - r.sum())
                    if r.max() > r.min():
                        coef += w * grpo_pop(r[None])[0] / G
                        kp += w
                coef = np.broadcast_to(coef, canon.shape)
            for g in range(G):
                np.add.at(C[i], (np.arange(len(comp)), canon[:, g]), coef[:, g])
            kept[i] = kp
        tables[arm] = (C, kept)
    out = {"frozen": [float((np.exp(prior) * correct).sum(1).mean())] * (steps // eval_every + 1)}
    for arm, (C, kept) in tables.items():
        z = prior.copy()
        evals = [float((np.exp(log_softmax(z)) * correct).sum(1).mean())]
        for t in range(steps):
            logq = log_softmax(z)
            pi = np.exp(logq)
            P = np.exp(lmc[None, :] + logq @ comp.T)  # [N, O]
            g = np.einsum("no,nok->nk", P, C)
            q = (P * kept).sum(1, keepdims=True)
            grad = -(g - pi * g.sum(1, keepdims=True)) + beta * q * (pi - ref)
            z = z - lr * (B / N) * grad
            if (t + 1) % eval_every == 0:
                evals.append(float((np.exp(log_softmax(z)) * correct).sum(1).mean()))
        out[arm] = evals
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    import jax.numpy as jnp

    from tabsim.config import resolve
    from tabsim.sim.params import Hyper
    from tabsim.sim.rng import seed_array
    from tabsim.runtime.run import make_env

    cold = cold_seconds()
    cached = cached_seconds()
    res = jax_sweep()
    steady = []
    for _ in range(args.repeats):
        t = time.perf_counter()
        res = jax_sweep()
        steady.append(time.perf_counter() - t)
    cfg = resolve({"preset": "paper"})
    env = make_env(cfg)
    t = time.perf_counter()
    diff = 0.0
    for p in PRIORS:
        task = env.init_task(jnp.asarray(seed_array([0])[0]), Hyper(**cfg.hyper_values({"prior_strength": p})))
        ref = numpy_flow(np.asarray(task.prior_logits, np.float64), np.asarray(task.correct, np.float64))
        f = res.frame[res.frame.prior_strength == p]
        for arm, evals in ref.items():
            diff = max(diff, float(np.abs(f[f.arm == arm].sort_values("step").pass1.to_numpy() - evals).max()))
    numpy_s = time.perf_counter() - t
    out = {"steady_seconds": round(statistics.median(steady), 3), "cold_seconds": round(cold, 2),
           "cached_seconds": round(cached, 2),
           "numpy_seconds": round(numpy_s, 1), "speedup_steady": round(numpy_s / statistics.median(steady), 1),
           "speedup_cold": round(numpy_s / cold, 1), "max_abs_pass1_difference": float(f"{diff:.3g}"),
           "cores": os.cpu_count()}
    print(f"expected-flow paper prior sweep (5 priors x 4 arms x 200 steps): steady {out['steady_seconds']} s "
          f"(median of {args.repeats}), fresh process with the compilation cache {out['cached_seconds']} s, "
          f"cold {out['cold_seconds']} s; plain NumPy {out['numpy_seconds']} s "
          f"({out['speedup_steady']}x steady, {out['speedup_cold']}x cold); max |pass@1 difference| "
          f"{out['max_abs_pass1_difference']}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
