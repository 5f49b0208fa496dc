"""Pilot for claim study B12 (run before the plan was locked; writes pilot.json).

The plan's design on pilot seeds 90000-90007, disjoint from the confirmatory seeds: per prior, the mean
final pass@1 of each advantage (grpo, sign, raft) with and without the all-wrong filter on the TRUE arm,
the seeds' paired differences that the plan's hypotheses estimate (mean and standard deviation), and the
power of eight seeds (one-sided paired t at alpha 0.05 / 9) to find a difference 0.01 beyond each rule's
boundary at the largest standard deviation.
"""
import json
from pathlib import Path

import numpy as np
from statsmodels.stats.power import TTestPower

import tabsim as ts

PILOT_SEEDS, FIRST, PRIORS = 8, 90000, [0.05, 0.2, 0.5]
final = {}
for est in ("grpo", "sign", "raft"):
    for stage in ("none", "drop_all_wrong"):
        res = ts.run({"preset": "grpo", "arms": {"arms": ["frozen", "true"]}, "algo": {"estimator": est},
                      "train": {"group_size": 4, "group_stage": stage, "seeds": PILOT_SEEDS, "seed": FIRST,
                                "steps": 200},
                      "sweep": {"prior_strength": PRIORS}}, progress=False)
        fin = res.final()
        fin = fin[fin["arm"] == "true"].sort_values(["prior_strength", "seed"])
        final[est, stage] = {p: g["pass1"].to_numpy(float) for p, g in fin.groupby("prior_strength")}
contrasts = {"filter_on_sign": (("sign", "drop_all_wrong"), ("sign", "none")),
             "grpo_minus_sign_filtered": (("grpo", "drop_all_wrong"), ("sign", "drop_all_wrong")),
             "raft_minus_grpo": (("raft", "none"), ("grpo", "none")),
             "grpo_minus_sign": (("grpo", "none"), ("sign", "none"))}
cells = []
for p in PRIORS:
    cell = {"prior_strength": p, **{f"{e}_{s}": float(final[e, s][p].mean()) for e, s in final}}
    for name, (a, b) in contrasts.items():
        d = final[a][p] - final[b][p]
        cell[name], cell[name + "_sd"] = float(d.mean()), float(d.std(ddof=1))
    cells.append(cell)
sd = max(c[k] for c in cells for k in c if k.endswith("_sd"))
power = TTestPower().power(effect_size=0.01 / sd, nobs=PILOT_SEEDS, alpha=0.05 / 9, alternative="larger")
Path(__file__).with_name("pilot.json").write_text(json.dumps(
    {"pilot_seeds": PILOT_SEEDS, "first_seed": FIRST, "cells": cells, "sd_max": sd,
     "power_8_seeds_distance_0.01": float(power)}, indent=2) + "\n")
print(json.dumps(cells, indent=1), sd, power)
