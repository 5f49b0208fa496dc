"""Pilot for claim study B24 (run before the plan was locked; writes pilot.json).

The plan's design (plan.yaml) on pilot seeds 24500-24507, disjoint from the confirmatory seeds: the grpo preset at
SGD lr 4 on a depth-4 tree (branching 3, 32 prompts, 8 answers, 2 correct, no format boost), TRUE and FROZEN arms,
60 steps, p_s 0.2 and 0.5, DAPO's overlong ramp (L_max 4, L_cache 2) in the reward at strengths 0, 1, 2 and 4. Per
p_s and strength: the trained arm's final pass@1 and expected length of a correct answer (mean over seeds), its
paired difference from the frozen base (mean, seed sd), and the power of 8 seeds to put that difference's 95%
interval on the side of -0.01 where the pilot's mean lies (one-sided t, alpha 0.05 / 6), and of the plan's 16.
"""
import json
import time
from pathlib import Path

from statsmodels.stats.power import TTestPower

from tabsim.prereg.runner import run_design
from tabsim.prereg.schema import load_plan

PILOT_SEEDS, FIRST, MARGIN, N_HYP, PLANNED = 8, 24500, -0.01, 6, 16
plan, _ = load_plan(Path(__file__).with_name("plan.yaml"))
plan = plan.model_copy(update={"design": plan.design.model_copy(update={"seeds": PILOT_SEEDS, "first_seed": FIRST})})
t0 = time.perf_counter()
frame, _ = run_design(plan)
wall = time.perf_counter() - t0
final = frame[frame["step"] == plan.design.steps]
cells = []
for ps in (0.2, 0.5):
    base = final[(final["prior_strength"] == ps) & (final["arm"] == "frozen") & (final["strength"] == 0.0)]
    base = base.set_index("seed")["pass1"]
    for strength in (0.0, 1.0, 2.0, 4.0):
        tr = final[(final["prior_strength"] == ps) & (final["arm"] == "true") & (final["strength"] == strength)]
        tr = tr.set_index("seed")
        d = tr["pass1"] - base
        sd = float(d.std(ddof=1))
        row = {"prior_strength": ps, "strength": strength, "pass1": float(tr["pass1"].mean()),
               "base_pass1": float(base.mean()), "len_correct": float(tr["len_correct"].mean()),
               "len_correct_max": float(tr["len_correct"].max()),
               "trained_minus_base": float(d.mean()), "trained_minus_base_sd": sd}
        if strength > 0:
            for n in (PILOT_SEEDS, PLANNED):
                row[f"power_{n}_seeds"] = float(TTestPower().power(
                    effect_size=abs(float(d.mean()) - MARGIN) / sd, nobs=n, alpha=0.05 / N_HYP, alternative="larger"))
        cells.append(row)
Path(__file__).with_name("pilot.json").write_text(json.dumps(
    {"pilot_seeds": PILOT_SEEDS, "first_seed": FIRST, "steps": plan.design.steps, "margin": MARGIN, "planned_seeds": PLANNED,
     "wall_seconds": round(wall, 1), "cells": cells}, indent=2) + "\n")
print(json.dumps(cells, indent=1), f"\n{wall:.0f} s")
