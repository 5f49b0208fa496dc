"""Pilot for the clipping-induced-null study (run before the plan was locked; writes pilot.json).

Same settings as the plan, on pilot seeds 70000-70015, disjoint from the confirmatory seeds. It gives
the per-seed standard deviation of d_null in every cell, from which the plan's power estimate and
seed count are computed (normal approximation for a one-sided test at the Holm worst case
alpha / 12 / 2, i.e. the first step of the step-down over the 12 confirmatory hypotheses).
"""
import json
import math
from pathlib import Path

from scipy import stats as sps

import tabsim as ts

PILOT_SEEDS, FIRST = 16, 70000
ALGO = {"surrogate": "clip", "ratio": "token", "aggregation": "group-sum", "kl_placement": "none", "beta": 0.0,
        "lr": 0.3, "minibatches": 1, "eps_low": 0.2}
PRIORS = [0.2, 0.35, 0.5, 0.65, 0.8]
rows = []
for epochs in (4, 1):
    res = ts.run({"preset": "paper", "arms": {"arms": ["frozen", "random"]}, "algo": {**ALGO, "epochs": epochs},
                  "train": {"seeds": PILOT_SEEDS, "seed": FIRST, "steps": 200},
                  "sweep": {"eps_high": [0.05, 0.2], "prior_strength": PRIORS}})
    fin = res.final()
    wide = fin.pivot_table(index=["eps_high", "prior_strength", "seed"], columns="arm", values="pass1",
                           observed=True)
    d = (wide["random"] - wide["frozen"]).groupby(level=[0, 1])
    clip = fin[fin["arm"] == "random"].groupby(["eps_high", "prior_strength"])["clip_frac"].mean()
    for (eps_high, prior), x in d:
        rows.append({"epochs": epochs, "eps_high": eps_high, "prior_strength": prior, "d_null_mean": x.mean(),
                     "d_null_sd": x.std(ddof=1), "clip_frac": clip.loc[(eps_high, prior)]})

# Normal-approximation power with n seeds at Holm's strictest step (m = 12 confirmatory hypotheses):
# sign rules (CI bound beyond 0 at level 1 - alpha/m):  Phi(|mu| sqrt(n) / sd - z_{1 - alpha/(2m)}), in the
#   direction of the pilot mean (the plan predicts a direction; a pilot mean of the other sign means no power);
# TOST with margin 0.02 (CI at level 1 - 2 alpha/m inside +/- 0.02):  Phi((0.02 - |mu|) sqrt(n) / sd - z_{1 - alpha/m}).
M, ALPHA, MARGIN = 12, 0.05, 0.02
z_sign, z_tost = sps.norm.ppf(1 - ALPHA / (2 * M)), sps.norm.ppf(1 - ALPHA / M)
for r in rows:
    mu, sd = r["d_null_mean"], r["d_null_sd"]
    for n in (16, 32, 64):
        r[f"power_sign_n{n}"] = float(sps.norm.cdf(abs(mu) * math.sqrt(n) / sd - z_sign))
        r[f"power_tost_n{n}"] = float(sps.norm.cdf((MARGIN - abs(mu)) * math.sqrt(n) / sd - z_tost))
rows = [{k: (float(v) if hasattr(v, "item") else v) for k, v in r.items()} for r in rows]
Path(__file__).with_name("pilot.json").write_text(json.dumps({"pilot_seeds": PILOT_SEEDS, "first_seed": FIRST,
                                                               "algo": ALGO, "cells": rows}, indent=2) + "\n")
for r in rows:
    print({k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()})
