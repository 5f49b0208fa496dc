"""Pilot for claim study B26 (run before the plan was locked; writes pilot.json).

The plan's design on pilot seeds 98000-98007, disjoint from the confirmatory seeds: the grpo preset (GRPO's
z-score, clip 0.2, seq-mean-token-mean as GTPO's objective writes it, SGD lr 0.8, G = 8, batch 16) with
algo.token_weight gtpo_conflict (GTPO's conflict-token weights, arXiv 2508.03772, as the authors' released
trainer: a positive answer's conflict tokens weigh 2, a negative one's 0) against none (GRPO), TRUE and FROZEN arms,
200 steps, on a depth-3 tree (branching 3) whose root token 1 is a "format" token: its style has prior mass 0.8
and accuracy p_s, token 2's style mass 0.2 and accuracy 0.3, STOP mass 0.05. Both content tokens lead to subtrees
with correct and wrong answers, so both are conflict tokens in GTPO's sense; STOP is one leaf and is not. At
p_s 0.3 the format token's answers are as accurate as the others, at 0.5 more. Per p_s: the base's root masses
and pass@1, each weight's final root masses, pass@1 and seq_entropy (mean, seed sd), the paired differences the
plan tests on root1_mass (TRUE - FROZEN under GRPO; gtpo_conflict - none on TRUE) and the power of 8 seeds to put
each 95% interval on the side of 0 where the pilot's mean lies (one-sided t, alpha 0.05 / 4).
"""
import json
import time
from pathlib import Path

from statsmodels.stats.power import TTestPower

import tabsim as ts

PILOT_SEEDS, FIRST, STEPS, PRIORS = 8, 98000, 200, [0.3, 0.5]
TREE = {"depth": 3, "branching": 3, "styles": [{"mass": 0.05, "accuracy": 0.3, "actions": [0]},
                                               {"mass": 0.8, "actions": [1]},
                                               {"mass": 0.2, "accuracy": 0.3, "actions": [2]}]}
KEYS = ["pass1", "root0_mass", "root1_mass", "root2_mass", "seq_entropy"]
t0 = time.time()
fin = ts.run({"preset": "grpo", "arms": {"arms": ["frozen", "true"]}, "task": {"env": "tree", "tree": TREE},
              "train": {"seeds": PILOT_SEEDS, "seed": FIRST, "steps": STEPS, "eval_every": STEPS,
                        "metrics": ["pass1", "root_mass"]},
              "sweep": {"prior_strength": PRIORS, "algo.token_weight": ["gtpo_conflict", "none"]}},
             progress=False).final()
wall = time.time() - t0


def power(d):
    return float(TTestPower().power(effect_size=abs(float(d.mean())) / float(d.std(ddof=1)), nobs=PILOT_SEEDS,
                                    alpha=0.05 / 4, alternative="larger"))


cells = []
for ps, f in fin.groupby("prior_strength", observed=True):
    base = f[f["arm"] == "frozen"].groupby("seed")[KEYS].first()
    true = {w: g.set_index("seed")[KEYS] for w, g in f[f["arm"] == "true"].groupby("algo.token_weight",
                                                                                   observed=True)}
    grpo_moves = true["none"]["root1_mass"] - base["root1_mass"]
    gtpo_minus_grpo = true["gtpo_conflict"]["root1_mass"] - true["none"]["root1_mass"]
    cells.append({"prior_strength": float(ps), **{f"base_{k}": float(base[k].mean()) for k in KEYS},
                  **{f"{w}_{k}": float(g[k].mean()) for w, g in true.items() for k in KEYS},
                  **{f"{w}_{k}_sd": float(g[k].std(ddof=1)) for w, g in true.items() for k in KEYS},
                  "grpo_minus_base_root1": float(grpo_moves.mean()), "grpo_minus_base_root1_sd":
                      float(grpo_moves.std(ddof=1)), "power_grpo_minus_base": power(grpo_moves),
                  "gtpo_minus_grpo_root1": float(gtpo_minus_grpo.mean()), "gtpo_minus_grpo_root1_sd":
                      float(gtpo_minus_grpo.std(ddof=1)), "power_gtpo_minus_grpo": power(gtpo_minus_grpo)})
Path(__file__).with_name("pilot.json").write_text(json.dumps(
    {"pilot_seeds": PILOT_SEEDS, "first_seed": FIRST, "steps": STEPS, "wall_seconds": round(wall, 1),
     "cells": cells}, indent=2) + "\n")
print(json.dumps(cells, indent=1))
