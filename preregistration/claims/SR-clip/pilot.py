"""Pilot for claim studies SR-clip and SR-net (run before their plans were locked; writes pilot.json in both).

The plan's design on pilot seeds 90000-90007, disjoint from the confirmatory seeds: the ``spurious_rewards``
preset with arms FROZEN and RANDOM (gamma 0.5), lr 4, each rollout batch reused for 8 updates, under the
clipped ratio (``clip``) and the unclipped one (``importance``), at prior strengths 0.2, 0.5 and 0.8. Per
prior: the mean and per-seed standard deviation of the clip's own effect (RANDOM's pass@1 under the clip
minus under the unclipped ratio, same seeds) and of the net effect (RANDOM minus FROZEN under the clip), the
share of answers on which the clip binds, and the seeds needed for power 0.9 at a distance of 0.02 from
the threshold (one-sided t test, Holm's first level 0.05 / 6).
"""
import json
import math
from pathlib import Path

import pandas as pd
from statsmodels.stats.power import TTestIndPower, TTestPower

import tabsim as ts

PILOT_SEEDS, FIRST, STEPS, PRIORS = 8, 90000, 200, [0.2, 0.5, 0.8]


def config(surrogate: str) -> dict:
    return {"preset": "spurious_rewards", "arms": {"arms": ["frozen", "random"], "gamma": 0.5},
            "algo": {"lr": 4.0, "surrogate": surrogate},
            "train": {"seeds": PILOT_SEEDS, "seed": FIRST, "steps": STEPS},
            "sweep": {"prior_strength": PRIORS}}


fin = pd.concat([ts.run(config(s), progress=False).final().assign(surrogate=s) for s in ("clip", "importance")])
wide = fin.pivot_table(index=["prior_strength", "seed"], columns=["surrogate", "arm"], values="pass1",
                       observed=True)
clip_frac = fin[(fin.arm == "random") & (fin.surrogate == "clip")].groupby("prior_strength")["clip_frac"].mean()
mode = fin[fin.arm == "frozen"].groupby("prior_strength")["mode_correct"].mean()
cells = []
for prior in PRIORS:
    w = wide.loc[prior]
    clip_effect = w[("clip", "random")] - w[("importance", "random")]
    net = w[("clip", "random")] - w[("clip", "frozen")]
    cell = {"prior_strength": prior, "base_mode_correct": float(mode[prior]),
            "base_pass1": float(w[("clip", "frozen")].iloc[0]), "clip_frac": float(clip_frac[prior])}
    for name, d in (("clip_effect", clip_effect), ("net", net)):
        sd = float(d.std(ddof=1))
        cell[f"{name}_mean"], cell[f"{name}_sd"] = float(d.mean()), sd
        for dist in (0.02, 0.03):  # a paired difference: one sample of per-seed differences
            t = TTestPower()
            n = t.solve_power(effect_size=dist / sd, alpha=0.05 / 3, power=0.9, alternative="larger")
            cell[f"{name}_seeds_for_power_0.9_at_{dist}"] = int(math.ceil(n))
            cell[f"{name}_power_64_seeds_at_{dist}"] = float(
                t.power(effect_size=dist / sd, nobs=64, alpha=0.05 / 3, alternative="larger"))
    # the plan's estimand is an OLS coefficient over the two cells, not a paired difference: its power
    # at 64 seeds per cell from the cells' own spread (the base arm has no spread: its pass@1 is the prior's)
    for name, a, b in (("clip_effect", ("clip", "random"), ("importance", "random")),
                       ("net", ("clip", "random"), ("clip", "frozen"))):
        sd = float(((w[a].var(ddof=1) + w[b].var(ddof=1)) / 2) ** 0.5)
        cell[f"{name}_cell_sd"] = sd
        for dist in (0.02, 0.03):
            cell[f"{name}_unpaired_power_64_seeds_at_{dist}"] = float(TTestIndPower().power(
                effect_size=dist / sd, nobs1=64, alpha=0.05 / 3, alternative="larger")) if sd > 0 else 1.0
    cells.append(cell)
here = Path(__file__).resolve().parent
for study, keep in (("SR-clip", "clip_effect"), ("SR-net", "net")):
    mine = [{k: v for k, v in c.items() if not k.startswith("net" if keep == "clip_effect" else "clip_effect")}
            for c in cells]
    (here.parent / study / "pilot.json").write_text(json.dumps(
        {"pilot_seeds": PILOT_SEEDS, "first_seed": FIRST, "steps": STEPS, "script": "SR-clip/pilot.py",
         "cells": mine}, indent=2) + "\n")
print(json.dumps(cells, indent=1))
