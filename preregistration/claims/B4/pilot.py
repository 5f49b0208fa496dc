"""Pilot for claim study B4 (run before the plan was locked; writes pilot.json).

The plan's design on pilot seeds 93000-93007, disjoint from the confirmatory seeds: GRPO (the grpo preset) with
Guide's adaptive hints (arXiv 2506.13923) on the reference bandit: a group whose 8 answers drawn from the policy
are all wrong is redrawn from mu = (1 - hint_lambda) pi + hint_lambda u* (u* uniform over the correct answers),
and the PPO ratio of every answer is pi / mu (algo.behaviour_old = behaviour: the policy without the hint over
the policy that drew it, Guide's correction), at hint_lambda 0.5 against 0 (the failed group redrawn from the
policy itself: the same rollouts, no hint), TRUE arm, 200 steps, at p_s 0.05 and 0.2. Per cell: final pass@1,
pass@8 and pass@64 (mean, seed sd), the paired difference of pass@1 (hint 0.5 - 0) and the power of 8 seeds to
put its 95% interval on the side of the rule's boundary 0.01 where the pilot's mean lies (one-sided t, alpha
0.05 / 2). Disclosed beside it, not part of the plan: the same cells with logp_old from the policy (no
correction of the hinted draws: their ratio is 1 at the first update).
"""
import json
from pathlib import Path

from statsmodels.stats.power import TTestPower

import tabsim as ts

PILOT_SEEDS, FIRST, STEPS, PRIORS, GAIN = 8, 93000, 200, [0.05, 0.2], 0.01


def run(old: str):
    return ts.run({"preset": "grpo", "arms": {"arms": ["frozen", "true"]},
                   "algo": {"behaviour": "hint", "hint_when": "all_wrong", "behaviour_old": old},
                   "train": {"seeds": PILOT_SEEDS, "seed": FIRST, "steps": STEPS, "eval_every": STEPS,
                             "pass_k": [8, 64]},
                   "sweep": {"prior_strength": PRIORS, "hint_lambda": [0.0, 0.5]}}, progress=False).final()


out = {}
for old in ("behaviour", "policy"):
    fin = run(old)
    cells = []
    for ps, f in fin.groupby("prior_strength", observed=True):
        base = f[f["arm"] == "frozen"].iloc[0]
        true = {lam: g.set_index("seed") for lam, g in f[f["arm"] == "true"].groupby("hint_lambda", observed=True)}
        d = true[0.5]["pass1"] - true[0.0]["pass1"]
        sd = float(d.std(ddof=1))
        cell = {"prior_strength": float(ps), **{f"base_{m}": float(base[m]) for m in ("pass1", "pass@8", "pass@64")},
                **{f"hint{lam}_{m}": float(g[m].mean()) for lam, g in true.items() for m in ("pass1", "pass@8", "pass@64")},
                **{f"hint{lam}_pass1_sd": float(g["pass1"].std(ddof=1)) for lam, g in true.items()},
                "diff_hint_mean": float(d.mean()), "diff_hint_sd": sd,
                "power_8_seeds": float(TTestPower().power(effect_size=abs(float(d.mean()) - GAIN) / sd, nobs=PILOT_SEEDS,
                                                          alpha=0.05 / len(PRIORS), alternative="larger"))}
        cells.append(cell)
    out["design" if old == "behaviour" else "disclosed_logp_old_policy"] = cells
Path(__file__).with_name("pilot.json").write_text(json.dumps(
    {"pilot_seeds": PILOT_SEEDS, "first_seed": FIRST, "steps": STEPS, "gain": GAIN, **out}, indent=2) + "\n")
print(json.dumps(out, indent=1))
