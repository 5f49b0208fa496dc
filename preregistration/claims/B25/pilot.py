"""Pilot for claim study B25 (run before the plan was locked; writes pilot.json).

The plan's design on pilot seeds 97000-97007, disjoint from the confirmatory seeds: the lambda_grpo preset
(lambda-GRPO, arXiv 2509.21154, as its authors' released trainer: GRPO's z-score with Bessel std and eps 1e-4,
clip 0.2, seq-mean-token-mean, 6 answers, each token's loss divided by the number of the group's answers sharing
its prefix) against the same preset without the weights (algo.token_weight none: GRPO), both with Adam at lr 0.05
(the authors' trainer uses Adam), on a depth-3 tree (branching 3: STOP and two content tokens per node) whose root
steps are unbalanced: STOP and token 1 belong to a frequent style (prior mass 0.9, accuracy 0.1), token 2 to a
rare style (mass 0.1, accuracy the traced p_s), at p_s 0.3 and 0.6. 50 steps (mid-learning: the question is
which reaches its peak sooner). Per p_s: the base's pass@1 and root masses, each arm's pass@1 at step 50 (mean,
seed sd), the paired difference lambda - GRPO and the power of 8 seeds to put its 95% interval on the side of the
rule's boundary 0.01 where the pilot's mean lies (one-sided t, alpha 0.05 / 2); and the learning curves (every 10
steps) of both, for the record.
"""
import json
import time
from pathlib import Path

from statsmodels.stats.power import TTestPower

import tabsim as ts

PILOT_SEEDS, FIRST, STEPS, PRIORS, GAIN = 8, 97000, 50, [0.3, 0.6], 0.01
TREE = {"depth": 3, "branching": 3, "styles": [{"mass": 0.9, "accuracy": 0.1, "actions": [0, 1]},
                                               {"mass": 0.1, "actions": [2]}]}
t0 = time.time()
data = ts.run({"preset": "lambda_grpo", "algo": {"optimizer": "adam", "lr": 0.05},
               "arms": {"arms": ["frozen", "true"]}, "task": {"env": "tree", "tree": TREE},
               "train": {"seeds": PILOT_SEEDS, "seed": FIRST, "steps": STEPS, "eval_every": 10,
                         "metrics": ["pass1", "root_mass"]},
               "sweep": {"prior_strength": PRIORS, "algo.token_weight": ["lambda_grpo", "none"]}}, progress=False).frame
wall = time.time() - t0
cells = []
for ps, f in data.groupby("prior_strength", observed=True):
    fin = f[f["step"] == STEPS]
    base = fin[fin["arm"] == "frozen"].iloc[0]
    true = f[f["arm"] == "true"]
    wide = true.pivot_table(index=["step", "seed"], columns="algo.token_weight", values="pass1", observed=True)
    d = (wide["lambda_grpo"] - wide["none"]).loc[STEPS]
    sd = float(d.std(ddof=1))
    end = wide.loc[STEPS]
    masses = fin[fin["arm"] == "true"].groupby("algo.token_weight", observed=True)[
        ["root0_mass", "root1_mass", "root2_mass"]].mean()
    cells.append({"prior_strength": float(ps), "base_pass1": float(base["pass1"]),
                  "base_root_mass": [float(base[f"root{a}_mass"]) for a in range(3)],
                  **{f"{w}_pass1": float(end[w].mean()) for w in ("lambda_grpo", "none")},
                  **{f"{w}_pass1_sd": float(end[w].std(ddof=1)) for w in ("lambda_grpo", "none")},
                  **{f"{w}_root_mass": [float(x) for x in masses.loc[w]] for w in ("lambda_grpo", "none")},
                  "diff_mean": float(d.mean()), "diff_sd": sd,
                  "curve_diff_mean": {int(s): float(v) for s, v in
                                      (wide["lambda_grpo"] - wide["none"]).groupby("step").mean().items()},
                  "power_8_seeds": float(TTestPower().power(effect_size=abs(float(d.mean()) - GAIN) / sd,
                                                            nobs=PILOT_SEEDS, alpha=0.05 / len(PRIORS),
                                                            alternative="larger"))})
Path(__file__).with_name("pilot.json").write_text(json.dumps(
    {"pilot_seeds": PILOT_SEEDS, "first_seed": FIRST, "steps": STEPS, "gain": GAIN, "wall_seconds": round(wall, 1),
     "cells": cells}, indent=2) + "\n")
print(json.dumps(cells, indent=1))
