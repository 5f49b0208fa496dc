"""Pilot for claim study B3 (run before the plan was locked; writes pilot.json).

The plan's design on pilot seeds 90000-90007, disjoint from the confirmatory seeds: the `grpo` preset with the
unlikeliness reward term (its rank penalty 0.25, or 0: plain GRPO), 1 or 4 updates per rollout batch, on the
reference bandit with 3 correct answers whose prior masses fall by a ratio 0.3, at p_s 0.2 and 0.5, 1000 steps.
Per cell: the TRUE arm's final entropy given a correct answer (the base's is 0.745), its pass@1 and the seed sd;
per prior the two main effects (Sum-coded coefficients, half the difference of the levels' means) and the power
of 8 seeds per cell to find a difference 0.05 beyond the threshold 0.02 (two-sample t, 0.05 / 4).
"""
import json
from pathlib import Path

import pandas as pd
from statsmodels.stats.power import TTestIndPower

import tabsim as ts

PILOT_SEEDS, FIRST, STEPS, PRIORS = 8, 90000, 1000, [0.2, 0.5]


def config(epochs: int) -> dict:
    return {"preset": "grpo", "task": {"n_correct": 3, "correct_mass_ratio": 0.3},
            "arms": {"arms": ["frozen", "true"]},
            "algo": {"reward_terms": ["unlikeliness"], "epochs": epochs},
            "train": {"seeds": PILOT_SEEDS, "seed": FIRST, "steps": STEPS,
                      "metrics": ["pass1", "correct_entropy", "filtered_kl"]},
            "sweep": {"rank_penalty": [0.25, 0.0], "prior_strength": PRIORS}}


fin = pd.concat([ts.run(config(e), progress=False).final().assign(epochs=e) for e in (1, 4)])
true = fin[fin["arm"] == "true"]
cells = []
for (prior, pen, ep), f in true.groupby(["prior_strength", "rank_penalty", "epochs"]):
    cells.append({"prior_strength": float(prior), "rank_penalty": float(pen), "epochs": int(ep),
                  "correct_entropy_mean": float(f["correct_entropy"].mean()),
                  "correct_entropy_sd": float(f["correct_entropy"].std(ddof=1)),
                  "pass1_mean": float(f["pass1"].mean())})
base = fin[fin["arm"] == "frozen"].groupby("prior_strength")[["correct_entropy", "pass1"]].first()
effects = []
for prior in PRIORS:
    c = pd.DataFrame([x for x in cells if x["prior_strength"] == prior])
    sd = float(c["correct_entropy_sd"].max())
    m = c.set_index(["rank_penalty", "epochs"])["correct_entropy_mean"]
    effects.append({"prior_strength": prior, "sd_max": sd,
                    "unlikeliness_minus_plain": float(m.xs(0.25).mean() - m.xs(0.0).mean()),
                    "epochs4_minus_epochs1": float(m.xs(4, level="epochs").mean() - m.xs(1, level="epochs").mean()),
                    "power_8_seeds_at_0.05": float(TTestIndPower().power(
                        effect_size=0.05 / sd, nobs1=16, alpha=0.05 / 4, alternative="larger"))})
Path(__file__).with_name("pilot.json").write_text(json.dumps(
    {"pilot_seeds": PILOT_SEEDS, "first_seed": FIRST, "steps": STEPS,
     "base": {str(k): v for k, v in base.to_dict("index").items()}, "cells": cells, "effects": effects},
    indent=2) + "\n")
print(json.dumps({"base": {str(k): v for k, v in base.to_dict("index").items()}, "cells": cells, "effects": effects},
                 indent=1))
