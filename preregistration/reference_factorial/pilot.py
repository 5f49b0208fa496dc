"""Pilot for the seed count of the reference 2x2x2 replication (run before the plan was locked).

Seeds 90000-90007 are disjoint from the confirmatory seeds. Only the precision of the estimands is
used (interval half-widths); the plan's hypotheses are the reference study's, fixed in advance.
Writes pilot.json beside this file.
"""
import json
from pathlib import Path

import numpy as np

import tabsim as ts
from tabsim import stats

PILOT_SEEDS, FIRST = 8, 90000
res = ts.run({"preset": "paper", "train": {"seeds": PILOT_SEEDS, "seed": FIRST},
              "sweep": {"filter": [1.0, 0.0], "prior_strength": [0.8, 0.35]}})
fin = res.final()
fin = fin[fin["arm"].isin(["true", "majority"])].copy()
fin["reward"] = fin["arm"].astype(str)
fit = stats.fit_factorial(fin[["seed", "pass1", "reward", "filter", "prior_strength"]], response="pass1",
                          factors=["reward", "filter", "prior_strength"], step=None,
                          levels={"reward": ("true", "majority"), "filter": (1.0, 0.0), "prior_strength": (0.8, 0.35)})
ir = stats.interaction_ratio(fit, threshold=0.2, n_resamples=2000, random_state=0)
coefs = fit.coefficients.set_index("term")
ac_se = float(coefs.loc["AC", "std_err"])
out = {"pilot_seeds_per_cell": PILOT_SEEDS, "first_seed": FIRST,
       "interaction_ratio_ci_half_width": (ir.ci_high - ir.ci_low) / 2,
       "ac_std_err": ac_se}
# half-widths shrink like 1/sqrt(n): seeds needed for a target half-width h is n0 (h0 / h)^2
for target in (0.05, 0.03):
    out[f"seeds_for_ratio_half_width_{target}"] = int(np.ceil(PILOT_SEEDS * (out["interaction_ratio_ci_half_width"] / target) ** 2))
# AC coefficient: t interval half-width ~ 1.96 se; seeds for half-width 0.01
out["seeds_for_ac_half_width_0.01"] = int(np.ceil(PILOT_SEEDS * (1.96 * ac_se / 0.01) ** 2))
Path(__file__).with_name("pilot.json").write_text(json.dumps(out, indent=2) + "\n")
print(json.dumps(out, indent=2))
