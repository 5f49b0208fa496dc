"""Pilot for the clipping-at-new-priors study (run before the plan was written; writes pilot.json).

The plan's settings on pilot seeds 90000-90007, disjoint from the confirmatory seeds 3000-3015: the
mean and per-seed standard deviation of d_null at the two new priors, the frozen policy's mode and the
fraction of clipped tokens, from which the seed count and the power estimate of the plan follow.
"""
import json
from pathlib import Path

import tabsim as ts

PILOT_SEEDS, FIRST = 8, 90000
ALGO = {"surrogate": "clip", "ratio": "token", "aggregation": "group-sum", "kl_placement": "none", "beta": 0.0,
        "lr": 0.3, "minibatches": 1, "eps_low": 0.2, "epochs": 4, "eps_high": 0.05}
res = ts.run({"preset": "paper", "arms": {"arms": ["frozen", "random"]}, "algo": ALGO,
              "train": {"seeds": PILOT_SEEDS, "seed": FIRST, "steps": 200},
              "sweep": {"prior_strength": [0.25, 0.9]}})
fin = res.final()
wide = fin.pivot_table(index=["prior_strength", "seed"], columns="arm", values="pass1", observed=True)
d = (wide["random"] - wide["frozen"]).groupby(level=0)
cells = []
for prior, x in d:
    f = fin[fin["prior_strength"] == prior]
    cells.append({"prior_strength": float(prior), "d_null_mean": float(x.mean()), "d_null_sd": float(x.std(ddof=1)),
                  "frozen_mode_correct": float(f[f["arm"] == "frozen"]["mode_correct"].mean()),
                  "random_clip_frac_min": float(f[f["arm"] == "random"]["clip_frac"].min())})
Path(__file__).with_name("pilot.json").write_text(json.dumps({"pilot_seeds": PILOT_SEEDS, "first_seed": FIRST,
                                                               "algo": ALGO, "cells": cells}, indent=2) + "\n")
for c in cells:
    print(c)
