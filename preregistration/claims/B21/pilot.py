"""Pilot for claim study B21 (run before the plan was locked; writes pilot.json).

The plan's design on pilot seeds 96500-96507, disjoint from the confirmatory seeds: the gmpo preset's recipe (group
z-score, seq-mean-token-mean, no KL, SGD) on a depth-3 tree, four passes over each batch (algo.epochs 4), answers drawn
by the mismatch sampler (algo.behaviour mismatch, sigma 1), SGD at lr 8 and 32 (the preset's 0.8 keeps every
ratio inside the clip), the surrogate PPO's clip (GRPO's arithmetic mean of token terms) or GMPO's geometric mean
(arXiv 2507.20673), each clip bound 0.2 or 0.4, 100 steps. Metric: the optional metric log_ratio_range (the range of
the token log-ratios over a step's updates, as GMPO's trainer logs it), averaged over the run's 100 steps. Per lr:
each cell's mean and seed sd, and the paired differences the plan tests, with the power of 8 seeds (one-sided
t, alpha 0.05 / 4).
"""
import json
import time
from pathlib import Path

from statsmodels.stats.power import TTestPower

import tabsim as ts

PILOT_SEEDS, FIRST, STEPS, SIGMAS, LRS = 8, 96500, 100, [1.0], [8.0, 32.0]
BASE = {"preset": "gmpo", "arms": {"arms": ["true"]},
        "task": {"env": "tree", "n_prompts": 32, "tree": {"depth": 3}},
        "algo": {"epochs": 4, "behaviour": "mismatch"},
        "train": {"seeds": PILOT_SEEDS, "seed": FIRST, "steps": STEPS, "eval_every": STEPS,
                  "metrics": ["pass1", "log_ratio_range"]},
        "sweep": {"lr": LRS, "mismatch_sigma": SIGMAS, "eps_low": [0.2, 0.4], "eps_high": [0.2, 0.4]}}
CELLS = {"grpo": ("clip", 0.2), "gmpo": ("gmpo", 0.4), "gmpo_narrow": ("gmpo", 0.2), "grpo_wide": ("clip", 0.4)}
t0 = time.time()
runs = {}
for surrogate in ("clip", "gmpo"):
    fin = ts.run({**BASE, "algo": {**BASE["algo"], "surrogate": surrogate}}, progress=False).final()
    for (lr, sig, lo, hi), g in fin.groupby(["lr", "mismatch_sigma", "eps_low", "eps_high"], observed=True):
        runs[(surrogate, float(lr), float(sig), round(float(lo), 4), round(float(hi), 4))] = g.set_index("seed")
wall = time.time() - t0


def power(d):
    return float(TTestPower().power(effect_size=abs(float(d.mean())) / float(d.std(ddof=1)), nobs=PILOT_SEEDS,
                                    alpha=0.05 / 4, alternative="larger"))


out = []
for lr, sig in ((lr, sig) for lr in LRS for sig in SIGMAS):
    cell = {name: runs[(s, lr, sig, e, e)] for name, (s, e) in CELLS.items()}
    row = {"lr": lr, "mismatch_sigma": sig}
    for name, g in cell.items():
        row[f"{name}_range"] = float(g["log_ratio_range"].mean())
        row[f"{name}_range_sd"] = float(g["log_ratio_range"].std(ddof=1))
        row[f"{name}_pass1"] = float(g["pass1"].mean())
        row[f"{name}_clip_frac"] = float(g["clip_frac"].mean())
    for a, b in (("gmpo", "grpo"), ("gmpo_narrow", "grpo")):
        d = cell[a]["log_ratio_range"] - cell[b]["log_ratio_range"]
        row[f"{a}_minus_{b}"] = float(d.mean())
        row[f"{a}_minus_{b}_sd"] = float(d.std(ddof=1))
        row[f"power_{a}_below_{b}"] = power(d)
    out.append(row)
Path(__file__).with_name("pilot.json").write_text(json.dumps(
    {"pilot_seeds": PILOT_SEEDS, "first_seed": FIRST, "steps": STEPS, "wall_s": round(wall, 1), "cells": out},
    indent=2) + "\n")
print(json.dumps(out, indent=1), wall)
