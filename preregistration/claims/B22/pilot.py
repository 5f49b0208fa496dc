"""Pilot for claim study B22 (run before the plan was locked; writes pilot.json).

The plan's design on pilot seeds 96600-96607, disjoint from the confirmatory seeds: the grpo preset without its KL
term (a reference penalty would pull a collapsing policy back to the base), SGD lr 8, a depth-3 tree of 32 prompts at
p_s 0.2, answers drawn by the mismatch sampler (algo.behaviour mismatch: the sampler's logits are the trainer's plus
Gaussian noise of sd sigma, drawn afresh each step; logp_old is the trainer's; no importance correction) at sigma 0,
1 and 4, one pass over each batch (no off-policy drift beyond the mismatch) or four, 200 steps, arms TRUE and FROZEN
(the base). Per epochs and sigma: final pass@1 of the trained run and the base, and their paired difference (the
collapse criterion: the trained run ends below its base), with the power of 8 seeds (one-sided t, alpha 0.05 / 4).
"""
import json
import time
from pathlib import Path

from statsmodels.stats.power import TTestPower

import tabsim as ts

PILOT_SEEDS, FIRST, STEPS, SIGMAS = 8, 96600, 200, [0.0, 1.0, 4.0]
BASE = {"preset": "grpo", "arms": {"arms": ["true", "frozen"]},
        "task": {"env": "tree", "n_prompts": 32, "prior_strength": 0.2, "tree": {"depth": 3}},
        "algo": {"kl_placement": "none", "beta": 0.0, "lr": 8.0, "behaviour": "mismatch"},
        "train": {"seeds": PILOT_SEEDS, "seed": FIRST, "steps": STEPS},
        "sweep": {"mismatch_sigma": SIGMAS}}
t0 = time.time()
out = []
for epochs in (1, 4):
    fin = ts.run({**BASE, "algo": {**BASE["algo"], "epochs": epochs}}, progress=False).final()
    for sig, g in fin.groupby("mismatch_sigma", observed=True):
        w = g.pivot(index="seed", columns="arm", values="pass1")
        d = w["true"] - w["frozen"]
        effect = abs(float(d.mean())) / float(d.std(ddof=1))
        out.append({"epochs": epochs, "mismatch_sigma": float(sig), "trained_pass1": float(w["true"].mean()),
                    "trained_pass1_sd": float(w["true"].std(ddof=1)), "base_pass1": float(w["frozen"].mean()),
                    "trained_minus_base": float(d.mean()), "trained_minus_base_sd": float(d.std(ddof=1)),
                    "power_interval_on_pilot_side": float(TTestPower().power(
                        effect_size=effect, nobs=PILOT_SEEDS, alpha=0.05 / 4, alternative="larger"))})
wall = time.time() - t0
Path(__file__).with_name("pilot.json").write_text(json.dumps(
    {"pilot_seeds": PILOT_SEEDS, "first_seed": FIRST, "steps": STEPS, "wall_s": round(wall, 1), "cells": out},
    indent=2) + "\n")
print(json.dumps(out, indent=1), wall)
