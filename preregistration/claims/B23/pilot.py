"""Pilot for claim study B23 (run before the plan was locked; writes pilot.json).

The plan's design (plan.yaml) on pilot seeds 93500-93507, disjoint from the confirmatory seeds: the drpo preset's
settings at SGD lr 4 on a depth-4 tree (branching 3, 32 prompts, 8 answers, 2 correct, no format boost), TRUE
arm, 100 steps, p_s 0.2 and 0.5, the loss (clip or drpo) crossed with the reward terms ([] or DAPO's overlong
penalty, L_max 4, L_cache 2) and DRPO's lambda (0.1 or 1000). Per p_s: each named cell's final pass@1 and expected
length of a correct answer (mean, seed sd), the paired differences grpo_lp - grpo, drpo - disco and disco_lp -
disco, and the power of 8 seeds to put each tested difference's 95% interval on the side of -0.01 where the
pilot's mean lies (one-sided t, alpha 0.05 / 4).
"""
import json
import time
from pathlib import Path

from statsmodels.stats.power import TTestPower

from tabsim.prereg.runner import run_design
from tabsim.prereg.schema import load_plan

PILOT_SEEDS, FIRST, MARGIN, N_HYP = 8, 93500, -0.01, 4
plan, _ = load_plan(Path(__file__).with_name("plan.yaml"))
plan = plan.model_copy(update={"design": plan.design.model_copy(update={"seeds": PILOT_SEEDS, "first_seed": FIRST})})
t0 = time.perf_counter()
frame, _ = run_design(plan)
wall = time.perf_counter() - t0
final = frame[frame["step"] == plan.design.steps]
cells = []
for ps in (0.2, 0.5):
    g = final[final["prior_strength"] == ps]
    by = {}
    for name, cell in plan.analysis.cells.items():
        sel = g
        for factor, level in cell.items():
            sel = sel[sel[factor].astype(str) == str(level)]
        by[name] = sel.set_index("seed")
    row = {"prior_strength": ps}
    for name, s in by.items():
        row[f"{name}_pass1"] = float(s["pass1"].mean())
        row[f"{name}_pass1_sd"] = float(s["pass1"].std(ddof=1))
        row[f"{name}_len_correct"] = float(s["len_correct"].mean())
    for a, b, tested in (("grpo_lp", "grpo", True), ("drpo", "disco", True), ("disco_lp", "disco", False)):
        d = by[a]["pass1"] - by[b]["pass1"]
        sd = float(d.std(ddof=1))
        row[f"{a}_minus_{b}"] = float(d.mean())
        row[f"{a}_minus_{b}_sd"] = sd
        if tested:
            row[f"{a}_minus_{b}_power"] = float(TTestPower().power(
                effect_size=abs(float(d.mean()) - MARGIN) / sd, nobs=PILOT_SEEDS, alpha=0.05 / N_HYP,
                alternative="larger"))
    cells.append(row)
Path(__file__).with_name("pilot.json").write_text(json.dumps(
    {"pilot_seeds": PILOT_SEEDS, "first_seed": FIRST, "steps": plan.design.steps, "margin": MARGIN,
     "wall_seconds": round(wall, 1), "cells": cells}, indent=2) + "\n")
print(json.dumps(cells, indent=1), f"\n{wall:.0f} s")
