"""Pilot for claim study B16 (run before the plan was locked; writes pilot.json).

The plan's design on pilot seeds 99160-99167, disjoint from the confirmatory seeds: per prior, the mean final
effective_ratio (the share of a step's allotted answers in groups whose rewards are not all equal, averaged over
the 200 steps) and pass@1 of the TRUE arm under the uniform and the knapsack allocation, the seeds' paired
differences (mean and standard deviation), the boundary the plan takes from them (20% of the uniform allocation's
ratio, the claim's lower end), and the power of eight seeds (one-sided paired t at alpha 0.05 / 2) to place the
interval above it where the pilot's difference lies.
"""
import json
import time
from pathlib import Path

import numpy as np
from statsmodels.stats.power import TTestPower

import tabsim as ts

PILOT_SEEDS, FIRST, PRIORS = 8, 99160, [0.2, 0.5]
TASK = {"heterogeneity": 0.5}
start = time.time()
final = {}
for rule in ("uniform", "knapsack"):
    res = ts.run({"preset": "knapsack_rl", "task": TASK, "arms": {"arms": ["frozen", "true"]},
                  "algo": {"allocation": rule, "allocation_max": 64},
                  "train": {"seeds": PILOT_SEEDS, "seed": FIRST, "steps": 200, "metrics": ["pass1", "effective_ratio"]},
                  "sweep": {"prior_strength": PRIORS}}, progress=False)
    fin = res.final()
    fin = fin[fin["arm"] == "true"].sort_values(["prior_strength", "seed"])
    final[rule] = {p: {m: g[m].to_numpy(float) for m in ("effective_ratio", "pass1")} for p, g in fin.groupby("prior_strength")}
cells = []
for p in PRIORS:
    cell = {"prior_strength": p}
    for m in ("effective_ratio", "pass1"):
        for rule in final:
            cell[f"{m}_{rule}"] = float(final[rule][p][m].mean())
        d = final["knapsack"][p][m] - final["uniform"][p][m]
        cell[f"{m}_knapsack_minus_uniform"], cell[f"{m}_knapsack_minus_uniform_sd"] = float(d.mean()), float(d.std(ddof=1))
    cells.append(cell)
for c in cells:  # the boundary: a rise of 20% of the uniform allocation's ratio; the power to clear it
    c["boundary"] = round(0.2 * c["effective_ratio_uniform"], 3)
    c["power_8_seeds"] = float(TTestPower().power(
        effect_size=(c["effective_ratio_knapsack_minus_uniform"] - c["boundary"]) / c["effective_ratio_knapsack_minus_uniform_sd"],
        nobs=PILOT_SEEDS, alpha=0.05 / 2, alternative="larger"))
sd = max(c["effective_ratio_knapsack_minus_uniform_sd"] for c in cells)
power = min(c["power_8_seeds"] for c in cells)
Path(__file__).with_name("pilot.json").write_text(json.dumps(
    {"pilot_seeds": PILOT_SEEDS, "first_seed": FIRST, "task": TASK, "cells": cells, "sd_max": sd,
     "power_8_seeds_min": power, "wall_seconds": round(time.time() - start, 1)}, indent=2) + "\n")
print(json.dumps(cells, indent=1), sd, power, time.time() - start)
