"""Pilot for claim study B32 (run before the plan was locked; writes pilot.json).

The plan's design on pilot seeds 94000-94007, disjoint from the confirmatory seeds: the ngrpo preset (NGRPO, arXiv
2509.18851, as its authors' released run: one virtual sample of reward 1 in every group's mean and Bessel std,
asymmetric clip 0.16 for A < 0 / 0.24 for A > 0, verl's token-mean, no KL, no filter) against the same preset
with GRPO's advantage (estimator grpo: an all-wrong group's advantages are 0), TRUE arm, on the reference bandit
(40 prompts, 8 answers, 2 correct, format boost 0.2), 200 steps, at p_s 0.05, 0.2 and 0.5. Per p_s: the base's
pass@1 and pass@8 (the share of groups with a correct answer), each estimator's final pass@1 (mean, seed sd), the
paired difference ngrpo - grpo and the power of 8 seeds to put its 95% interval on the side of the rule's
boundary 0.01 where the pilot's mean lies (one-sided t, alpha 0.05 / 3).
"""
import json
from pathlib import Path

from statsmodels.stats.power import TTestPower

import tabsim as ts

PILOT_SEEDS, FIRST, STEPS, PRIORS, GAIN = 8, 94000, 200, [0.05, 0.2, 0.5], 0.01
fin = ts.run({"preset": "ngrpo", "arms": {"arms": ["frozen", "true"]},
              "train": {"seeds": PILOT_SEEDS, "seed": FIRST, "steps": STEPS, "eval_every": STEPS, "pass_k": [8]},
              "sweep": {"prior_strength": PRIORS, "algo.estimator": ["ngrpo", "grpo"]}}, progress=False).final()
cells = []
for ps, f in fin.groupby("prior_strength", observed=True):
    base = f[f["arm"] == "frozen"].iloc[0]
    true = {e: g.set_index("seed") for e, g in f[f["arm"] == "true"].groupby("algo.estimator", observed=True)}
    d = true["ngrpo"]["pass1"] - true["grpo"]["pass1"]
    sd = float(d.std(ddof=1))
    cells.append({"prior_strength": float(ps), "base_pass1": float(base["pass1"]), "base_pass@8": float(base["pass@8"]),
                  **{f"{e}_pass1": float(g["pass1"].mean()) for e, g in true.items()},
                  **{f"{e}_pass1_sd": float(g["pass1"].std(ddof=1)) for e, g in true.items()},
                  "diff_mean": float(d.mean()), "diff_sd": sd,
                  "power_8_seeds": float(TTestPower().power(effect_size=abs(float(d.mean()) - GAIN) / sd,
                                                            nobs=PILOT_SEEDS, alpha=0.05 / len(PRIORS),
                                                            alternative="larger"))})
Path(__file__).with_name("pilot.json").write_text(json.dumps(
    {"pilot_seeds": PILOT_SEEDS, "first_seed": FIRST, "steps": STEPS, "gain": GAIN, "cells": cells}, indent=2) + "\n")
print(json.dumps(cells, indent=1))
