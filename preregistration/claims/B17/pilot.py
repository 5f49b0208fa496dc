"""Pilot for claim study B17 (run before the plan was locked; writes pilot.json).

The plan's design on pilot seeds 90000-90007, disjoint from the confirmatory seeds: per prior, the mean
and per-seed standard deviation of the gain of the noisy and the clean verifier over the base, and the
power of eight seeds to find a gain 0.01 above the plan's threshold at the largest standard deviation.
"""
import json
from pathlib import Path

from statsmodels.stats.power import TTestPower

import tabsim as ts

PILOT_SEEDS, FIRST = 8, 90000
res = ts.run({"preset": "grpo", "arms": {"arms": ["frozen", "true", "noisy"], "fpr": 0.2, "fnr": 0.2},
              "train": {"seeds": PILOT_SEEDS, "seed": FIRST, "steps": 200},
              "sweep": {"prior_strength": [0.05, 0.2, 0.5, 0.8]}})
wide = res.final().pivot_table(index=["prior_strength", "seed"], columns="arm", values="pass1", observed=True)
cells = []
for prior, w in wide.groupby(level=0):
    noisy, clean = w["noisy"] - w["frozen"], w["true"] - w["frozen"]
    cells.append({"prior_strength": float(prior), "noisy_gain_mean": float(noisy.mean()),
                  "noisy_gain_sd": float(noisy.std(ddof=1)), "clean_gain_mean": float(clean.mean()),
                  "clean_gain_sd": float(clean.std(ddof=1))})
sd = max(c["noisy_gain_sd"] for c in cells)
power = TTestPower().power(effect_size=0.01 / sd, nobs=PILOT_SEEDS, alpha=0.05 / 4, alternative="larger")
Path(__file__).with_name("pilot.json").write_text(json.dumps(
    {"pilot_seeds": PILOT_SEEDS, "first_seed": FIRST, "cells": cells, "sd_max": sd,
     "power_8_seeds_margin_0.01": float(power)}, indent=2) + "\n")
print(json.dumps(cells, indent=1), sd, power)
