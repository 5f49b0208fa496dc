"""Pilot for claim study B10 (run before the plan was locked; writes pilot.json).

The base policy's exact pass@1 and maj@8 at each prior (they depend on the prior alone, not on a seed:
the thresholds of the plan), and the plan's design on pilot seeds 90000-90007, disjoint from the
confirmatory seeds: the mean and per-seed standard deviation of the majority arm's gain over the base,
and the power of eight seeds to find a gain 0.01 and 0.05 beyond a threshold at each prior's standard deviation.
"""
import json
from pathlib import Path

from statsmodels.stats.power import TTestPower

import tabsim as ts

PILOT_SEEDS, FIRST, PRIORS = 8, 90000, [0.2, 0.35, 0.5, 0.65, 0.8]
res = ts.run({"preset": "grpo", "arms": {"arms": ["frozen", "majority", "true"]},
              "train": {"seeds": PILOT_SEEDS, "seed": FIRST, "steps": 1000, "maj_k": [8]},
              "sweep": {"prior_strength": PRIORS}})
fin = res.final()
cells = []
for prior, f in fin.groupby("prior_strength"):
    base = f[f["arm"] == "frozen"]
    gain = f[f["arm"] == "majority"]["pass1"].to_numpy() - base["pass1"].to_numpy()
    cells.append({"prior_strength": float(prior), "base_pass1": float(base["pass1"].iloc[0]),
                  "base_maj8": float(base["maj@8"].iloc[0]),
                  "base_maj8_minus_pass1": float(base["maj@8"].iloc[0] - base["pass1"].iloc[0]),
                  "majority_gain_mean": float(gain.mean()), "majority_gain_sd": float(gain.std(ddof=1)),
                  "base_mode_correct": float(base["mode_correct"].iloc[0])})
for c in cells:
    for margin in (0.01, 0.05):
        c[f"power_8_seeds_margin_{margin}"] = float(TTestPower().power(
            effect_size=margin / c["majority_gain_sd"], nobs=PILOT_SEEDS, alpha=0.05 / len(PRIORS), alternative="larger"))
Path(__file__).with_name("pilot.json").write_text(json.dumps(
    {"pilot_seeds": PILOT_SEEDS, "first_seed": FIRST, "steps": 1000, "cells": cells}, indent=2) + "\n")
print(json.dumps(cells, indent=1))
