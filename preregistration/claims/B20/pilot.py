"""Pilot for claim study B20 (run before the plan was locked; writes pilot.json).

The plan's design on pilot seeds 96700-96707, disjoint from the confirmatory seeds: the gspo preset's recipe (group
z-score, seq-mean-token-mean, no KL, SGD) on a depth-3 tree of 32 prompts at p_s 0.2, four passes over each batch
(algo.epochs 4), answers drawn by the mismatch sampler (algo.behaviour mismatch, no importance correction) at sigma
1 and 4, SGD lr 8 and 32, 200 steps, the TRUE arm. Cells: GSPO (algo.ratio sequence: the length-normalised sequence
ratio, clipped at 3e-4 / 4e-4) and GRPO's token ratio clipped at 0.2 / 0.2. Per lr and sigma: final pass@1 and
clip_frac of each cell, the paired difference GSPO - GRPO, and the power of 8 seeds (one-sided t, alpha 0.05 / 4).
"""
import json
import time
from pathlib import Path

from statsmodels.stats.power import TTestPower

import tabsim as ts

PILOT_SEEDS, FIRST, STEPS = 8, 96700, 200
BASE = {"preset": "gspo", "arms": {"arms": ["true"]},
        "task": {"env": "tree", "n_prompts": 32, "prior_strength": 0.2, "tree": {"depth": 3}},
        "algo": {"epochs": 4, "behaviour": "mismatch"},
        "train": {"seeds": PILOT_SEEDS, "seed": FIRST, "steps": STEPS},
        "sweep": {"lr": [8.0, 32.0], "mismatch_sigma": [1.0, 4.0], "eps_low": [3e-4, 0.2], "eps_high": [4e-4, 0.2]}}
CELLS = {"gspo": ("sequence", 3e-4, 4e-4), "grpo": ("token", 0.2, 0.2)}
t0 = time.time()
runs = {}
for ratio in ("token", "sequence"):
    fin = ts.run({**BASE, "algo": {**BASE["algo"], "ratio": ratio}}, progress=False).final()
    for (lr, sig, lo, hi), g in fin.groupby(["lr", "mismatch_sigma", "eps_low", "eps_high"], observed=True):
        runs[(ratio, float(lr), float(sig), round(float(lo), 6), round(float(hi), 6))] = g.set_index("seed")
wall = time.time() - t0
out = []
for lr in (8.0, 32.0):
    for sig in (1.0, 4.0):
        cell = {name: runs[(r, lr, sig, lo, hi)] for name, (r, lo, hi) in CELLS.items()}
        d = cell["gspo"]["pass1"] - cell["grpo"]["pass1"]
        row = {"lr": lr, "mismatch_sigma": sig, **{f"{n}_{m}": float(g[m].mean()) for n, g in cell.items()
                                                    for m in ("pass1", "clip_frac")},
               "gspo_minus_grpo": float(d.mean()), "gspo_minus_grpo_sd": float(d.std(ddof=1)),
               "power_interval_on_pilot_side": float(TTestPower().power(
                   effect_size=abs(float(d.mean())) / float(d.std(ddof=1)), nobs=PILOT_SEEDS, alpha=0.05 / 4,
                   alternative="larger"))}
        out.append(row)
Path(__file__).with_name("pilot.json").write_text(json.dumps(
    {"pilot_seeds": PILOT_SEEDS, "first_seed": FIRST, "steps": STEPS, "wall_s": round(wall, 1), "cells": out},
    indent=2) + "\n")
print(json.dumps(out, indent=1), wall)
