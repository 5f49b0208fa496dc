"""Study: the expected flow of the `paper` preset against a many-seed Monte Carlo mean (Jensen gap),
and the crossover found by root-finding on the flow.

The flow iterates ``z_{t+1} = z_t + E[update | z_t]`` (``train.dynamics = "expected"``); the mean of
the random process is ``E[z_t]``. They differ because the update is not linear in ``z`` (Jensen). This
script measures the difference of the final pass@1 of every arm at the reference priors, where both
are averaged over the same task draws (seeds 0 .. 63: answer positions, which the majority's
lowest-index tie rule reads), and puts the flow's crossover beside the Monte Carlo one and the prior's
mode switch.

    python experiments/expected_flow/run.py [--quick] [--preset NAME]

Prints the tables recorded in ``docs/expected.md``; writes nothing. About 3 minutes on 2 cores
(``--quick``: 16 task draws, 128 Monte Carlo seeds). ``--preset`` measures another bandit preset's gap
(the crossover is located for ``paper`` only).
"""
from __future__ import annotations

import argparse
import time

import jax
import numpy as np
import pandas as pd

import tabsim as ts
from tabsim.config import resolve
from tabsim.sim.params import stack_hypers
from tabsim.sim.rng import seed_array
from tabsim.runtime.run import compiled_train, expected_crossover
from tabsim.stats import locate_crossover, seed_partition

PRIORS = [0.2, 0.35, 0.5, 0.65, 0.8]
GRID = tuple(round(0.20 + 0.05 * i, 2) for i in range(13))
ARMS = ["frozen", "random", "majority", "true"]


def flow(priors, task_seeds: int, preset: str = "paper") -> np.ndarray:
    """Final pass@1 of the expected flow, ``[prior, task seed, arm]``."""
    cfg = resolve({"preset": preset, "arms": {"arms": ARMS}, "train": {"dynamics": "expected"}})
    hp = stack_hypers([cfg.hyper_values({"prior_strength": p}) for p in priors],
                      shared=[k for k in cfg.hyper_values() if k != "prior_strength"])
    out = jax.device_get(compiled_train(cfg)(seed_array(range(task_seeds)), hp))
    return np.asarray(out["pass1"], np.float64)[..., -1]


def monte_carlo(priors, seeds: int, preset: str = "paper") -> pd.DataFrame:
    res = ts.run({"preset": preset, "arms": {"arms": ARMS}, "train": {"seeds": seeds, "metrics": ["pass1"]},
                  "sweep": {"prior_strength": list(priors)}}, progress=False)
    return res.final()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--preset", default="paper", help="a bandit preset the expected dynamics support")
    args = ap.parse_args(argv)
    n_tasks, n_mc, n_pool = (16, 128, 96) if args.quick else (64, 1024, 320)
    t0 = time.perf_counter()
    fl = flow(PRIORS, n_tasks, args.preset)  # [P, S, A]
    mc = monte_carlo(PRIORS, n_mc, args.preset)
    rows = []
    for i, p in enumerate(PRIORS):
        for a, arm in enumerate(ARMS):
            x = mc[(mc.prior_strength == p) & (mc.arm == arm)].sort_values("seed").pass1.to_numpy()
            paired = x[:n_tasks] - fl[i, :, a]  # the same task draws
            rows.append({"prior": p, "arm": arm, "flow": fl[i, :, a].mean(), "mc_mean": x.mean(),
                         "mc_se": x.std(ddof=1) / np.sqrt(x.size), "gap_mc_minus_flow": x.mean() - fl[i, :, a].mean(),
                         "paired_gap": paired.mean(), "paired_gap_se": paired.std(ddof=1) / np.sqrt(paired.size)})
    table = pd.DataFrame(rows)
    terms = []
    for i, p in enumerate(PRIORS):
        f = fl[i].mean(0)
        sub = mc[mc.prior_strength == p].pivot(index="seed", columns="arm", values="pass1")
        d_mc = (sub["majority"] - sub["random"])
        terms.append({"prior": p, "d_elicit_flow": f[2] - f[1], "d_elicit_mc": d_mc.mean(),
                      "d_elicit_mc_se": d_mc.std(ddof=1) / np.sqrt(d_mc.size),
                      "d_rd_flow": f[3] - f[2], "d_rd_mc": (sub["true"] - sub["majority"]).mean()})
    t_flow = time.perf_counter() - t0
    with pd.option_context("display.width", 200, "display.max_rows", 100):
        print(f"{args.preset}: final pass@1, flow over {n_tasks} task draws vs Monte Carlo over {n_mc} seeds "
              "(200 steps)")
        print(table.round(4).to_string(index=False))
        print(pd.DataFrame(terms).round(4).to_string(index=False))
    print(f"max |gap| {table.gap_mc_minus_flow.abs().max():.4f}; max |paired gap| {table.paired_gap.abs().max():.4f}")
    if args.preset == "paper":
        x_flow = expected_crossover(task_seeds=n_tasks)
        pool = ts.run({"preset": "paper", "train": {"seeds": n_pool, "metrics": ["pass1"]},
                       "sweep": {"prior_strength": list(GRID)}}, progress=False)
        x_mc = locate_crossover(seed_partition(pool.frame, by=["prior_strength"]), paired=True, method="t",
                                n_resamples=200)
        mode_switch = 2 * (1 + 0.2 * 8) / (6 + 2 * (1 + 0.2 * 8))  # k (1 + f K) / (K - k + k (1 + f K))
        print(f"crossover: flow {x_flow:.4f} ({n_tasks} task draws, Brent); Monte Carlo {x_mc.estimate:.4f} "
              f"[{x_mc.ci_low:.4f}, {x_mc.ci_high:.4f}] ({n_pool} seeds, 13 priors, t band); "
              f"prior mode switch {mode_switch:.4f}")
    print(f"total {time.perf_counter() - t0:.1f} s (flow and Monte Carlo sweep {t_flow:.1f} s)")


if __name__ == "__main__":
    main()
