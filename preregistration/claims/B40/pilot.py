"""Pilot for claim study B40 (run before the plan was locked; writes pilot.json).

The plan's design on pilot seeds 98400-98407, disjoint from the confirmatory seeds: the rec_oneside_nois preset
(group-relative REINFORCE, A = r - mean over the group's 8 answers, token-mean, SGD) at lr 4, its answers drawn
from the policy of k updates before (algo.behaviour = stale, behaviour_lag k = 16 and 64) with the rollout's
log-probabilities as old (algo.behaviour_old = behaviour, the authors' Trinity-RFT), and three losses (arXiv
2509.24203's names): REINFORCE (surrogate reinforce: no clip, no weight), REC-OneSide-NoIS (rec_oneside_nois: the
one-side clip mask 0.2/0.2, no weight) and REC-OneSide-IS (clip: the mask and the weight w = pi / mu), on the
reference bandit's TRUE arm, 200 steps, p_s 0.2. Per lag: final pass@1 of each loss (mean, seed sd), the share of
tokens the clip drops (mean over the run and at the last step), and the paired differences the plan tests with the
power of 8 seeds (TOST within 0.01 and one-sided t, alpha 0.05 / 4).
"""
import json
import time
from pathlib import Path

from statsmodels.stats.power import TTestPower

import tabsim as ts

PILOT_SEEDS, FIRST, STEPS, LAGS, LR, PRIOR, MARGIN = 8, 98400, 200, [16, 64], 4.0, 0.2, 0.01
SURROGATES = ["reinforce", "rec_oneside_nois", "clip"]
cfg = {"preset": "rec_oneside_nois", "arms": {"arms": ["true"]},
       "algo": {"behaviour": "stale", "behaviour_old": "behaviour", "lr": LR},
       "train": {"seeds": PILOT_SEEDS, "seed": FIRST, "steps": STEPS, "eval_every": 50},
       "sweep": {"prior_strength": [PRIOR], "algo.behaviour_lag": LAGS, "algo.surrogate": SURROGATES}}
start = time.time()
result = ts.run(cfg, progress=False)
wall = time.time() - start
frame, last = result.frame, result.final()


def power(d, margin=0.0):
    return float(TTestPower().power(effect_size=abs(float(d.mean()) - margin) / float(d.std(ddof=1)),
                                    nobs=PILOT_SEEDS, alpha=0.05 / 4, alternative="larger"))


def tost_power(d, margin):
    """Both one-sided tests at alpha 0.05 / 4 (the power of the nearer bound's test bounds the TOST's)."""
    return min(power(d, margin), power(d, -margin))


cells = []
for lag in LAGS:
    fin = {s: last[(last["algo.behaviour_lag"] == lag) & (last["algo.surrogate"] == s)].set_index("seed")
           for s in SURROGATES}
    run = {s: frame[(frame["algo.behaviour_lag"] == lag) & (frame["algo.surrogate"] == s) & (frame["step"] > 0)]
           for s in SURROGATES}
    nois_minus_is = fin["rec_oneside_nois"]["pass1"] - fin["clip"]["pass1"]
    nois_minus_reinforce = fin["rec_oneside_nois"]["pass1"] - fin["reinforce"]["pass1"]
    cells.append({"lag": lag,
                  **{f"{s}_pass1": float(fin[s]["pass1"].mean()) for s in SURROGATES},
                  **{f"{s}_pass1_sd": float(fin[s]["pass1"].std(ddof=1)) for s in SURROGATES},
                  **{f"{s}_clip_frac_run": float(run[s]["clip_frac"].mean()) for s in SURROGATES},
                  **{f"{s}_clip_frac_final_min": float(fin[s]["clip_frac"].min()) for s in SURROGATES},
                  "nois_minus_is": float(nois_minus_is.mean()), "nois_minus_is_sd": float(nois_minus_is.std(ddof=1)),
                  "nois_minus_reinforce": float(nois_minus_reinforce.mean()),
                  "nois_minus_reinforce_sd": float(nois_minus_reinforce.std(ddof=1)),
                  "power_tost_nois_is_0.01": tost_power(nois_minus_is, MARGIN),
                  "power_nois_above_reinforce": power(nois_minus_reinforce) if nois_minus_reinforce.mean() > 0 else 0.0,
                  "power_nois_below_reinforce": power(-nois_minus_reinforce)})
base = float(last["pass1"].min())
Path(__file__).with_name("pilot.json").write_text(json.dumps(
    {"pilot_seeds": PILOT_SEEDS, "first_seed": FIRST, "steps": STEPS, "lr": LR, "prior_strength": PRIOR,
     "wall_seconds": round(wall, 1), "cells": cells}, indent=2) + "\n")
print(json.dumps(cells, indent=1), f"wall {wall:.1f} s")
