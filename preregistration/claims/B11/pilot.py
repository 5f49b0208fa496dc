"""Pilot for claim study B11 (run before the plan was locked; writes pilot.json).

The plan's design on pilot seeds 90000-90007, disjoint from the confirmatory seeds: per prior, the mean
and per-seed standard deviation of the final pass@1 of each estimator on the TRUE arm, and the power of
eight seeds to find a difference 0.01 above the plan's threshold at the largest standard deviation.
"""
import json
from pathlib import Path

from statsmodels.stats.power import TTestIndPower

import tabsim as ts

PILOT_SEEDS, FIRST = 8, 90000
finals = {}
for est in ("sign", "grpo"):
    res = ts.run({"preset": "grpo", "arms": {"arms": ["frozen", "true"]}, "algo": {"estimator": est},
                  "train": {"group_size": 4, "seeds": PILOT_SEEDS, "seed": FIRST, "steps": 200},
                  "sweep": {"prior_strength": [0.05, 0.2, 0.5, 0.8]}})
    fin = res.final()
    finals[est] = fin[fin["arm"] == "true"].groupby("prior_strength")["pass1"].agg(["mean", "std"])
cells = [{"prior_strength": float(p), "sign_mean": float(finals["sign"].loc[p, "mean"]),
          "sign_sd": float(finals["sign"].loc[p, "std"]), "grpo_mean": float(finals["grpo"].loc[p, "mean"]),
          "grpo_sd": float(finals["grpo"].loc[p, "std"]),
          "difference": float(finals["sign"].loc[p, "mean"] - finals["grpo"].loc[p, "mean"])}
         for p in finals["sign"].index]
sd = max(max(c["sign_sd"], c["grpo_sd"]) for c in cells)
power = TTestIndPower().power(effect_size=0.01 / sd, nobs1=PILOT_SEEDS, alpha=0.05 / 4, alternative="larger")
Path(__file__).with_name("pilot.json").write_text(json.dumps(
    {"pilot_seeds": PILOT_SEEDS, "first_seed": FIRST, "cells": cells, "sd_max": sd,
     "power_8_seeds_margin_0.01": float(power)}, indent=2) + "\n")
print(json.dumps(cells, indent=1), sd, power)
