"""Claim study B18, the backward correction of an imperfect verifier (arXiv 2510.00915): in the committed run
GRPO's z-score cancels the correction on both arms, and each region's recorded verdict is where its interval
lies against the plan's boundary."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tabsim.prereg import claims

FOLDER = Path(__file__).resolve().parents[2] / "preregistration" / "claims" / "B18"


def test_grpo_cancels_the_correction_and_dr_grpo_does_not():
    """r' = (r - fpr) / (1 - fpr - fnr) is increasing and affine: under the z-score every cell with the term
    ends where the one without it does (to float32 and std_eps), under Dr. GRPO's mean-centring it does not."""
    data = pd.read_parquet(FOLDER / "results" / "data.parquet")
    final = data[data["step"] == data["step"].max()]
    wide = final.pivot_table(index=["advantage", "prior_strength", "arm", "seed"], columns="terms", values="pass1",
                             observed=True)
    gap = (wide["backward"] - wide["none"]).abs()
    assert gap.loc["grpo"].max() < 1e-5 and len(gap.loc["grpo"]) == 2 * 2 * 8
    assert gap.loc["dr_grpo"].min() > 0.01


def test_recorded_verdicts_follow_their_intervals():
    run = claims.read_claim_run(claims.load_claim(FOLDER))
    assert run is not None, "B18: no complete confirmatory run"
    bounds = {"H1": (0.0, np.inf), "H2": (0.0, np.inf), "H3": (-0.005, 0.005), "H4": (-0.005, 0.005),
              "H5": (-0.001, 0.001)}
    flips = {"H5": {"holds": "fails", "fails": "holds", "unsettled": "unsettled"}}
    for r in run.verdict.regions:
        lo, hi = bounds[r.hypothesis]
        inside, outside = lo < r.ci_low and r.ci_high < hi, r.ci_high <= lo or r.ci_low >= hi
        said = "holds" if inside else "fails" if outside else "unsettled"
        assert r.claim == flips.get(r.hypothesis, {}).get(said, said), r
    assert [r.hypothesis for r in run.verdict.regions] == ["H1", "H2", "H3", "H4", "H5"]
