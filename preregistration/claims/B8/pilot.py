"""Pilot for claim study B8 (run before the plan was locked; writes pilot.json).

The plan's design on pilot seeds 92000-92007, disjoint from the confirmatory seeds: GRPO (the grpo preset) on
TTRV's frequency reward (the frequency arm: each answer's share of its group, arXiv 2510.06783) beside the base
(FROZEN), the hard majority reward (MAJORITY, 1 iff the answer is its group's plurality answer) and the verifier
(TRUE), on the reference bandit (40 prompts, 8 answers, 2 correct, format boost 0.2), 200 steps, at p_s 0.2, 0.5
and 0.8. Per p_s: the base's pass@1 and the share of prompts whose likeliest answer is correct (mode_correct),
each arm's final pass@1, mode_correct and answer entropy, the seeds' paired difference frequency - frozen (mean, sd)
and the power of 8 seeds to put its 95% interval on the side of the rule's boundary 0.01 where the pilot's
mean lies (one-sided t, alpha 0.05 / 3, the conservative first step of Holm).
"""
import json
from pathlib import Path

from statsmodels.stats.power import TTestPower

import tabsim as ts

PILOT_SEEDS, FIRST, STEPS, PRIORS, GAIN = 8, 92000, 200, [0.2, 0.5, 0.8], 0.01
res = ts.run({"preset": "grpo", "arms": {"arms": ["frozen", "frequency", "majority", "true"]},
              "train": {"seeds": PILOT_SEEDS, "seed": FIRST, "steps": STEPS, "eval_every": STEPS},
              "sweep": {"prior_strength": PRIORS}}, progress=False)
fin = res.final()
cells = []
for ps, f in fin.groupby("prior_strength", observed=True):
    arm = {a: g.set_index("seed") for a, g in f.groupby("arm", observed=True)}
    d = arm["frequency"]["pass1"] - arm["frozen"]["pass1"]
    sd = float(d.std(ddof=1))
    dist = abs(float(d.mean()) - GAIN)
    cells.append({"prior_strength": float(ps),
                  "base_pass1": float(arm["frozen"]["pass1"].mean()),
                  "base_mode_correct": float(arm["frozen"]["mode_correct"].mean()),
                  "base_mode_correct_min": float(arm["frozen"]["mode_correct"].min()),
                  "base_mode_correct_max": float(arm["frozen"]["mode_correct"].max()),
                  **{f"{a}_{m}": float(arm[a][m].mean()) for a in ("frequency", "majority", "true")
                     for m in ("pass1", "mode_correct", "entropy")},
                  "base_entropy": float(arm["frozen"]["entropy"].mean()),
                  "diff_frequency_frozen_mean": float(d.mean()), "diff_frequency_frozen_sd": sd,
                  "diff_frequency_majority_mean": float((arm["frequency"]["pass1"] - arm["majority"]["pass1"]).mean()),
                  "diff_frequency_true_mean": float((arm["frequency"]["pass1"] - arm["true"]["pass1"]).mean()),
                  "power_8_seeds": float(TTestPower().power(effect_size=dist / sd, nobs=PILOT_SEEDS,
                                                            alpha=0.05 / len(PRIORS), alternative="larger"))})
Path(__file__).with_name("pilot.json").write_text(json.dumps(
    {"pilot_seeds": PILOT_SEEDS, "first_seed": FIRST, "steps": STEPS, "gain": GAIN, "cells": cells},
    indent=2) + "\n")
print(json.dumps(cells, indent=1))
