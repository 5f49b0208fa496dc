"""Pilot for claim study B7 (run before the plan was locked; writes pilot.json).

The plan's design on pilot seeds 91000-91007, disjoint from the confirmatory seeds: the intuitor preset (GRPO on
the self_certainty arm's reward, low_var_kl 0.005 in the loss, verl's token-mean) beside the verifier (TRUE) and
the base (FROZEN) on a depth-3 tree (branching 3, 32 prompts, 8 answers of which 2 correct), lr 10, 100 steps, at
p_s 0.2, 0.8 and 0.95. Per p_s: each arm's final pass@1 and mode mass, the base's share of prompts whose likeliest
answer is correct, the seeds' paired difference self_certainty - true (mean, sd) and the power of 8 seeds to put
the 90% interval of that difference on the side of the equivalence margin 0.05 where the pilot's mean lies (t, Holm
over 3 regions: alpha 0.05 / 3 per side, the conservative first step).
"""
import json
from pathlib import Path

from statsmodels.stats.power import TTestPower

import tabsim as ts

PILOT_SEEDS, FIRST, STEPS, PRIORS, MARGIN = 8, 91000, 100, [0.2, 0.8, 0.95], 0.05
res = ts.run({"preset": "intuitor",
              "task": {"env": "tree", "n_prompts": 32, "format_boost": 0.0, "tree": {"depth": 3, "branching": 3}},
              "arms": {"arms": ["frozen", "self_certainty", "true"]},
              "algo": {"lr": 10.0},
              "train": {"seeds": PILOT_SEEDS, "seed": FIRST, "steps": STEPS, "eval_every": STEPS},
              "sweep": {"prior_strength": PRIORS}}, progress=False)
fin = res.final()
cells = []
for ps, f in fin.groupby("prior_strength", observed=True):
    arm = {a: g.set_index("seed") for a, g in f.groupby("arm", observed=True)}
    d = arm["self_certainty"]["pass1"] - arm["true"]["pass1"]
    gain = arm["self_certainty"]["pass1"] - arm["frozen"]["pass1"]
    sd = float(d.std(ddof=1))
    dist = abs(abs(float(d.mean())) - MARGIN)  # the pilot mean's distance from the margin (outside: a miss; inside: TOST)
    cells.append({"prior_strength": float(ps),
                  "base_pass1": float(arm["frozen"]["pass1"].mean()),
                  "base_mode_correct": float(arm["frozen"]["mode_correct"].mean()),
                  "base_mode_mass": float(arm["frozen"]["mode_mass"].mean()),
                  "self_certainty_pass1": float(arm["self_certainty"]["pass1"].mean()),
                  "self_certainty_mode_mass": float(arm["self_certainty"]["mode_mass"].mean()),
                  "true_pass1": float(arm["true"]["pass1"].mean()),
                  "diff_sc_true_mean": float(d.mean()), "diff_sc_true_sd": sd,
                  "gain_sc_frozen_mean": float(gain.mean()), "gain_sc_frozen_sd": float(gain.std(ddof=1)),
                  "power_8_seeds_outside_margin": float(TTestPower().power(
                      effect_size=max(dist, 0.0) / sd, nobs=PILOT_SEEDS, alpha=0.05 / len(PRIORS),
                      alternative="larger")) if sd > 0 else 1.0})
Path(__file__).with_name("pilot.json").write_text(json.dumps(
    {"pilot_seeds": PILOT_SEEDS, "first_seed": FIRST, "steps": STEPS, "margin": MARGIN, "cells": cells},
    indent=2) + "\n")
print(json.dumps(cells, indent=1))
