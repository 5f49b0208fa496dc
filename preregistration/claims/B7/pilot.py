"""Pilot for claim study B7 (the plan's pilot; writes pilot.json).

The plan's design on pilot seeds 90000-90007, disjoint from the confirmatory seeds: the `grpo` preset on the tree
(`task.env: tree`, its default shape) with the arms FROZEN (the base), SELF_CERTAINTY (Intuitor's reward) and TRUE
(the verifier), 200 steps, at p_s 0.2, 0.5 and 0.8. Per prior: each arm's mean final pass@1, TRUE's smallest final
pass@1 over the seeds, the seeds' paired differences self_certainty - true (the hypotheses' estimand) and
self_certainty - frozen (the exploratory one), mean and standard deviation; and the power of eight seeds to find a
difference 0.01 beyond the boundary -0.02 at the largest standard deviation of self_certainty - true (one-sided
paired t at alpha 0.05 / 3).

Re-run after the lock: the pilot files committed with the plan (111a2d1) were another pilot's (the intuitor preset,
seeds 91000-91007); this is the pilot the plan describes, on the seeds it names.
"""
import json
from pathlib import Path

from statsmodels.stats.power import TTestPower

import tabsim as ts

PILOT_SEEDS, FIRST, STEPS, PRIORS = 8, 90000, 200, [0.2, 0.5, 0.8]
res = ts.run({"preset": "grpo", "task": {"env": "tree"},
              "arms": {"arms": ["frozen", "self_certainty", "true"]},
              "train": {"seeds": PILOT_SEEDS, "seed": FIRST, "steps": STEPS},
              "sweep": {"prior_strength": PRIORS}}, progress=False)
fin = res.final()
cells = []
for ps, f in fin.groupby("prior_strength", observed=True):
    arm = {a: g.set_index("seed")["pass1"].sort_index() for a, g in f.groupby("arm", observed=True)}
    d, gain = arm["self_certainty"] - arm["true"], arm["self_certainty"] - arm["frozen"]
    cells.append({"prior_strength": float(ps),
                  "base_pass1": float(arm["frozen"].mean()),
                  "self_certainty_pass1": float(arm["self_certainty"].mean()),
                  "true_pass1": float(arm["true"].mean()), "true_pass1_min": float(arm["true"].min()),
                  "sc_minus_true": float(d.mean()), "sc_minus_true_sd": float(d.std(ddof=1)),
                  "sc_minus_frozen": float(gain.mean()), "sc_minus_frozen_sd": float(gain.std(ddof=1))})
sd = max(c["sc_minus_true_sd"] for c in cells)
power = TTestPower().power(effect_size=0.01 / sd, nobs=PILOT_SEEDS, alpha=0.05 / len(PRIORS), alternative="larger")
Path(__file__).with_name("pilot.json").write_text(json.dumps(
    {"pilot_seeds": PILOT_SEEDS, "first_seed": FIRST, "steps": STEPS, "cells": cells, "sd_max": sd,
     "power_8_seeds_distance_0.01": float(power)}, indent=2) + "\n")
print(json.dumps(cells, indent=1), sd, power)
