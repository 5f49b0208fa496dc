"""Pilot for claim study B38 (run before the plan was locked; writes pilot.json).

The plan's design on pilot seeds 90000-90007, disjoint from the confirmatory seeds: RLOO (whose expected update
is the true gradient of pass@1) with the exact KL to the base in the loss at beta 0, 0.05, 0.2 and 1, on the
reference bandit with 3 correct answers whose prior masses fall by a ratio 0.3 (1 : 0.3 : 0.09 of p_s = 0.2),
2000 steps. Per beta: the TRUE arm's final KL from the filtered base (the base conditioned on a correct answer),
its entropy given a correct answer and its pass@1, their seed sd, and the power of 8 seeds to find the KL 0.01
beyond the threshold 0.02 (one-sided t, 0.05 / 4).
"""
import json
from pathlib import Path

from statsmodels.stats.power import TTestPower

import tabsim as ts

PILOT_SEEDS, FIRST, STEPS, BETAS = 8, 90000, 2000, [0.0, 0.05, 0.2, 1.0]
res = ts.run({"preset": "grpo", "task": {"n_correct": 3, "correct_mass_ratio": 0.3, "prior_strength": 0.2},
              "arms": {"arms": ["frozen", "true"]},
              "algo": {"estimator": "rloo", "kl": "exact", "kl_placement": "loss"},
              "train": {"seeds": PILOT_SEEDS, "seed": FIRST, "steps": STEPS,
                        "metrics": ["pass1", "correct_entropy", "filtered_kl"]},
              "sweep": {"beta": BETAS}}, progress=False)
fin = res.final()
cells = []
for beta, f in fin.groupby("beta"):
    base, true = f[f["arm"] == "frozen"], f[f["arm"] == "true"]
    sd = float(true["filtered_kl"].std(ddof=1))
    cells.append({"beta": float(beta), "base_correct_entropy": float(base["correct_entropy"].iloc[0]),
                  "base_pass1": float(base["pass1"].iloc[0]),
                  "filtered_kl_mean": float(true["filtered_kl"].mean()), "filtered_kl_sd": sd,
                  "correct_entropy_mean": float(true["correct_entropy"].mean()),
                  "pass1_mean": float(true["pass1"].mean()),
                  "power_8_seeds_margin_0.01": float(TTestPower().power(
                      effect_size=0.01 / sd, nobs=PILOT_SEEDS, alpha=0.05 / len(BETAS), alternative="larger"))})
Path(__file__).with_name("pilot.json").write_text(json.dumps(
    {"pilot_seeds": PILOT_SEEDS, "first_seed": FIRST, "steps": STEPS, "cells": cells}, indent=2) + "\n")
print(json.dumps(cells, indent=1))
