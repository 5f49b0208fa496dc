"""Pilot for claim study B29 (run before the plan was locked; writes pilot.json).

The plan's design on pilot seeds 90000-90007 (task draws), disjoint from the confirmatory seeds: the exact
expected flow (train.dynamics expected) of the grpo preset without KL (REINFORCE++'s k1 reward penalty is zero at
the base, and the exact flow refuses a KL in the reward), SGD lr 0.8, G = 8, batch 16 of 40 prompts, TRUE arm, one
step from the base; heterogeneous prompts (each its own p_s ~ Beta(p_s c, (1 - p_s) c)) at c = 2 and 20, mean p_s
0.2 and 0.5. The metric is grad_cosine, the cosine of the exact expected first update with the true gradient of the
mean pass@1 (tabsim.sim.expected.direction). Three estimators: grpo (the group's z-score, per-prompt
normalisation, arXiv 2402.03300), reinforce_pp (REINFORCE++'s batch whitening, arXiv 2501.03262) and rloo (the
leave-one-out baseline: its expected update is the true gradient times a positive step, cosine 1). Per cell: each
estimator's cosine (mean, seed sd), the paired differences grpo - rloo and reinforce_pp - rloo, and the power of 8
seeds to put the 95% interval on the side of the rule's boundary -0.001 where the pilot's mean lies (one-sided t,
alpha 0.05 / 8 for the eight hypotheses).
"""
import json
import time
from pathlib import Path

from statsmodels.stats.power import TTestPower

from tabsim.studies.factorial import run_factorial

SEEDS, FIRST, BOUND, N_HYP = 8, 90000, -0.001, 8
t0 = time.perf_counter()
base = {"preset": "grpo", "task": {"heterogeneity": 2.0}, "algo": {"kl_placement": "none", "beta": 0.0},
        "arms": {"arms": ["true"]}, "train": {"steps": 1, "seeds": SEEDS, "seed": FIRST, "dynamics": "expected",
                                              "metrics": ["pass1", "grad_cosine"]}}
res = run_factorial(base, {"estimator": {"algo.estimator": ["grpo", "reinforce_pp", "rloo"]},
                           "heterogeneity": {"heterogeneity": [2.0, 20.0]},
                           "prior_strength": {"prior_strength": [0.2, 0.5]}}, progress=False)
wall = time.perf_counter() - t0
f = res.frame[res.frame["step"] == 1]
cells = []
for (c, ps), g in f.groupby(["heterogeneity", "prior_strength"], observed=True):
    cos = {e: h.set_index("seed")["grad_cosine"] for e, h in g.groupby("estimator", observed=True)}
    cell = {"heterogeneity": float(c), "prior_strength": float(ps),
            **{f"{e}_cosine": float(v.mean()) for e, v in cos.items()},
            **{f"{e}_cosine_sd": float(v.std(ddof=1)) for e, v in cos.items()}}
    for e in ("grpo", "reinforce_pp"):
        d = cos[e] - cos["rloo"]
        sd = float(d.std(ddof=1))
        cell.update({f"{e}_minus_rloo": float(d.mean()), f"{e}_minus_rloo_sd": sd,
                     f"{e}_power_{SEEDS}_seeds": float(TTestPower().power(
                         effect_size=abs(float(d.mean()) - BOUND) / sd, nobs=SEEDS, alpha=0.05 / N_HYP,
                         alternative="larger")) if sd > 0 else 1.0})
    cells.append(cell)
Path(__file__).with_name("pilot.json").write_text(json.dumps(
    {"pilot_seeds": SEEDS, "first_seed": FIRST, "bound": BOUND, "wall_seconds": round(wall, 1), "cells": cells},
    indent=2) + "\n")
print(json.dumps(cells, indent=1), f"\n{wall:.0f} s")
