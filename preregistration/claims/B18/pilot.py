"""Pilot for claim study B18 (run before the plan was locked; writes pilot.json).

The plan's design on pilot seeds 95000-95007, disjoint from the confirmatory seeds: the dr_grpo preset (Dr. GRPO's
mean-centred advantage r - mean, no division by the group's spread; SGD lr 0.8) and the same preset with GRPO's
z-score (estimator grpo), each with and without the backward correction (algo.reward_terms [backward]:
r' = (r - fpr) / (1 - fpr - fnr), arXiv 2510.00915), on the TRUE arm and on the noisy verifier (fpr 0.1,
fnr 0.3), the reference bandit (40 prompts, 8 answers, 2 correct, format boost 0.2), 200 steps, at p_s 0.2 and
0.5. Per p_s and estimator: final pass@1 of each cell (mean, seed sd) and the paired differences the plan tests,
with the power of 8 seeds (one-sided t and TOST, alpha 0.05 / 5).
"""
import json
from pathlib import Path

from statsmodels.stats.power import TTestPower

import tabsim as ts

PILOT_SEEDS, FIRST, STEPS, PRIORS = 8, 95000, 200, [0.2, 0.5]
cfg = {"preset": "dr_grpo", "arms": {"arms": ["true", "noisy"], "fpr": 0.1, "fnr": 0.3},
       "train": {"seeds": PILOT_SEEDS, "seed": FIRST, "steps": STEPS, "eval_every": STEPS},
       "sweep": {"prior_strength": PRIORS, "algo.estimator": ["dr_grpo", "grpo"]}}
runs = {}
for label, terms in (("none", []), ("backward", ["backward"])):
    fin = ts.run({**cfg, "algo": {"reward_terms": terms}}, progress=False).final()
    for (ps, est, arm), g in fin.groupby(["prior_strength", "algo.estimator", "arm"], observed=True):
        runs[(float(ps), str(est), str(arm), label)] = g.set_index("seed")["pass1"]


def power(d, margin=0.0):
    return float(TTestPower().power(effect_size=abs(float(d.mean()) - margin) / float(d.std(ddof=1)),
                                    nobs=PILOT_SEEDS, alpha=0.05 / 5, alternative="larger"))


def tost_power(d, margin):
    """Both one-sided tests at alpha 0.05 / 5 (the power of the nearer bound's test bounds the TOST's)."""
    return min(power(d, margin), power(d, -margin))


cells = []
for ps in PRIORS:
    for est in ("dr_grpo", "grpo"):
        r = {k[2:]: v for k, v in runs.items() if k[:2] == (ps, est)}
        corrected_minus_plain = r[("noisy", "backward")] - r[("noisy", "none")]
        corrected_minus_clean = r[("noisy", "backward")] - r[("true", "none")]
        plain_minus_clean = r[("noisy", "none")] - r[("true", "none")]
        cells.append({"prior_strength": ps, "estimator": est,
                      **{f"{a}_{t}_pass1": float(v.mean()) for (a, t), v in r.items()},
                      **{f"{a}_{t}_pass1_sd": float(v.std(ddof=1)) for (a, t), v in r.items()},
                      "corrected_minus_plain": float(corrected_minus_plain.mean()),
                      "corrected_minus_plain_sd": float(corrected_minus_plain.std(ddof=1)),
                      "corrected_minus_clean": float(corrected_minus_clean.mean()),
                      "corrected_minus_clean_sd": float(corrected_minus_clean.std(ddof=1)),
                      "plain_minus_clean": float(plain_minus_clean.mean()),
                      "plain_minus_clean_sd": float(plain_minus_clean.std(ddof=1)),
                      "power_corrected_above_plain": power(corrected_minus_plain),
                      "power_tost_corrected_clean_0.005": tost_power(corrected_minus_clean, 0.005),
                      "power_tost_corrected_plain_0.001": tost_power(corrected_minus_plain, 0.001)})
Path(__file__).with_name("pilot.json").write_text(json.dumps(
    {"pilot_seeds": PILOT_SEEDS, "first_seed": FIRST, "steps": STEPS, "fpr": 0.1, "fnr": 0.3, "cells": cells},
    indent=2) + "\n")
print(json.dumps(cells, indent=1))
