"""Pilot for claim study B14 (run before the plan was locked; writes pilot.json).

The plan's design on pilot seeds 98000-98007 (task draws), disjoint from the confirmatory seeds: the exact expected
first update (train.dynamics expected) of three advantage rules on a bandit of two-answer prompts (one correct, no
format boost; 40 prompts, batch 16, SGD lr 0.8, no KL, the reinforce surrogate: on the first, on-policy step every
surrogate's gradient is -A grad log pi), each prompt's p drawn from Beta(2, 2) (heterogeneity 4, mean 0.5), the TRUE
arm, at G = 8 (DisCO's released recipe) and G = 64 (almost every group mixed). The metric is difficulty_tilt
(tabsim.sim.expected.difficulty): the exponent beta of each prompt's step along its own pass@1 gradient against
p (1 - p). Rules: grpo (z-score), disco_b (DisCO-b's +-G / n+-, arXiv 2505.12366) and rloo (beta = 0: its expected
step is the pass@1 gradient times a constant). Per G: each rule's tilt (mean, seed sd), the paired differences
against RLOO, and the power of 8 draws for the plan's rules (one-sided t and TOST, alpha 0.05 / 6).
"""
import json
import time
from pathlib import Path

from statsmodels.stats.power import TTestPower

from tabsim.studies.factorial import run_factorial

SEEDS, FIRST, N_HYP = 8, 98000, 6
t0 = time.perf_counter()
base = {"preset": "grpo", "task": {"n_answers": 2, "n_correct": 1, "format_boost": 0.0, "heterogeneity": 4.0,
                                   "prior_strength": 0.5},
        "algo": {"kl_placement": "none", "beta": 0.0, "surrogate": "reinforce"}, "arms": {"arms": ["true"]},
        "train": {"steps": 1, "seeds": SEEDS, "seed": FIRST, "dynamics": "expected",
                  "metrics": ["pass1", "grad_cosine", "difficulty_tilt"]}}
res = run_factorial(base, {"estimator": {"algo.estimator": ["grpo", "disco_b", "rloo"]},
                           "group_size": {"train.group_size": [8, 64]}}, progress=False)
wall = time.perf_counter() - t0
f = res.frame[res.frame["step"] == 1]


def power(d, bound, side):
    """One-sided t power for mean(d) on the ``side`` (+1: above, -1: below) of ``bound``."""
    sd = float(d.std(ddof=1))
    eff = side * (float(d.mean()) - bound) / sd
    return float(TTestPower().power(effect_size=eff, nobs=SEEDS, alpha=0.05 / N_HYP, alternative="larger"))


cells = []
for g, h in f.groupby("group_size", observed=True):
    tilt = {e: x.set_index("seed")["difficulty_tilt"] for e, x in h.groupby("estimator", observed=True)}
    cos = {e: x.set_index("seed")["grad_cosine"] for e, x in h.groupby("estimator", observed=True)}
    grpo, disco = tilt["grpo"] - tilt["rloo"], tilt["disco_b"] - tilt["rloo"]
    cells.append({"group_size": int(g), **{f"{e}_tilt": float(v.mean()) for e, v in tilt.items()},
                  **{f"{e}_tilt_sd": float(v.std(ddof=1)) for e, v in tilt.items()},
                  **{f"{e}_cosine": float(v.mean()) for e, v in cos.items()},
                  "grpo_minus_rloo": float(grpo.mean()), "grpo_minus_rloo_sd": float(grpo.std(ddof=1)),
                  "disco_b_minus_rloo": float(disco.mean()), "disco_b_minus_rloo_sd": float(disco.std(ddof=1)),
                  "power_grpo_above_-0.8": power(grpo, -0.8, 1),
                  "power_tost_disco_b_-1_0.2": min(power(disco, -1.2, 1), power(disco, -0.8, -1)),
                  "power_tost_disco_b_0_0.2": min(power(disco, -0.2, 1), power(disco, 0.2, -1))})
Path(__file__).with_name("pilot.json").write_text(json.dumps(
    {"pilot_seeds": SEEDS, "first_seed": FIRST, "wall_seconds": round(wall, 1), "cells": cells}, indent=2) + "\n")
print(json.dumps(cells, indent=1), f"\n{wall:.0f} s")
