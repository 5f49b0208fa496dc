"""Pilot for claim study B6 (run before the plan was locked; writes pilot.json).

The plan's design on pilot seeds 97000-97007, disjoint from the confirmatory seeds: the grpo preset on a depth-3
tree (branching 3, 32 prompts, 8 answers, no format boost, SGD lr 10) whose root actions form two styles, an
answering habit the base rarely has (style 1: root action 2, prior mass 1 of 5, accuracy p_s) and its absence
(style 0: root actions 0 and 1, mass 4 of 5, accuracy 0.15). Two cells of one design: ground truth (the TRUE arm,
no reward term) and a format-only reward (the random arm at gamma 0, which pays nothing, plus algo.reward_terms
[style] on style 1: reward 1 iff the answer has the habit). 20 steps, p_s 0.15, 0.4 and 0.8.

Per p_s: final pass@1 of each cell (mean, seed sd), the paired difference format - truth and the power of 8 seeds
for the plan's TOST with margin 0.05 (alpha 0.05 / 3); and each cell's gain split into a habit part and a knowledge
part (decompose.py: accuracy = sum_s P(s) P(correct | s)).
"""
import json
import sys
import time
from pathlib import Path

from statsmodels.stats.power import TTestPower

import tabsim as ts

sys.path.insert(0, str(Path(__file__).parent))
from decompose import split  # noqa: E402

PILOT_SEEDS, FIRST, STEPS, PRIORS, MARGIN, N_HYP = 8, 97000, 20, [0.15, 0.4, 0.8], 0.05, 3
cfg = {"preset": "grpo",
       "task": {"env": "tree", "n_prompts": 32, "n_answers": 8, "format_boost": 0.0,
                "tree": {"depth": 3, "branching": 3,
                         "styles": [{"mass": 4.0, "accuracy": 0.15, "actions": [0, 1]}, {"mass": 1.0, "actions": [2]}]}},
       "arms": {"arms": ["true", "random"], "gamma": 0.0},
       "algo": {"lr": 10.0, "reward_style": 1},
       "train": {"seeds": PILOT_SEEDS, "seed": FIRST, "steps": STEPS, "eval_every": STEPS},
       "sweep": {"prior_strength": PRIORS}}
t0 = time.perf_counter()
frames = []
for label, terms in (("none", []), ("style", ["style"])):
    f = ts.run({**cfg, "algo": {**cfg["algo"], "reward_terms": terms}}, progress=False).frame
    frames.append(f.assign(terms=label))
wall = time.perf_counter() - t0
import pandas as pd  # noqa: E402

data = pd.concat(frames, ignore_index=True)
data["reward"] = data["arm"].astype(str)


def tost_power(d, margin):
    """The power of the nearer bound's one-sided test (alpha 0.05 / 3) bounds the TOST's."""
    sd = float(d.std(ddof=1))
    return min(float(TTestPower().power(effect_size=(margin - s * float(d.mean())) / sd, nobs=PILOT_SEEDS,
                                        alpha=0.05 / N_HYP, alternative="larger")) for s in (1, -1))


final = data[data["step"] == STEPS]
cells = []
for ps in PRIORS:
    g = final[final["prior_strength"] == ps]
    fmt = g[(g["reward"] == "random") & (g["terms"] == "style")].set_index("seed")["pass1"]
    truth = g[(g["reward"] == "true") & (g["terms"] == "none")].set_index("seed")["pass1"]
    d = fmt - truth
    parts = split(data[data["prior_strength"] == ps], STEPS)
    cells.append({"prior_strength": ps, "format_pass1": float(fmt.mean()), "format_pass1_sd": float(fmt.std(ddof=1)),
                  "truth_pass1": float(truth.mean()), "truth_pass1_sd": float(truth.std(ddof=1)),
                  "format_minus_truth": float(d.mean()), "format_minus_truth_sd": float(d.std(ddof=1)),
                  f"power_tost_{MARGIN}": tost_power(d, MARGIN), "decomposition": parts})
Path(__file__).with_name("pilot.json").write_text(json.dumps(
    {"pilot_seeds": PILOT_SEEDS, "first_seed": FIRST, "steps": STEPS, "margin": MARGIN, "wall_seconds": round(wall, 1),
     "cells": cells}, indent=2) + "\n")
print(json.dumps(cells, indent=1), f"\n{wall:.0f} s")
