"""Claim study B14 (DisCO, arXiv 2505.12366): the committed run's seeds are distinct task draws, RLOO's difficulty tilt
is 0 (the reference) and the large-group tilts are the hand-derived ones (GRPO about -1/2, DisCO-b about -1); each
region's recorded verdict is where its interval lies against the plan's bound."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tabsim.prereg import claims

FOLDER = Path(__file__).resolve().parents[2] / "preregistration" / "claims" / "B14"


def test_seeds_are_task_draws_and_the_tilts_are_the_derived_ones():
    data = pd.read_parquet(FOLDER / "results" / "data.parquet")
    first = data[data["step"] == 1]
    assert sorted(first["seed"].unique()) == list(range(1400, 1408))
    base = data[(data["step"] == 0) & (data["estimator"] == "rloo")]
    assert base.groupby("group_size")["pass1"].nunique().min() == 8  # each seed draws its own prompts' p
    tilt = first.pivot_table(index=["group_size", "seed"], columns="estimator", values="difficulty_tilt",
                             observed=True)
    np.testing.assert_allclose(tilt["rloo"], 0.0, atol=1e-3)
    big, small = tilt.loc[64], tilt.loc[8]
    # the limits where every group is mixed, on average over draws (a draw with prompts near p = 0 or 1 sits above)
    assert abs(big["grpo"].mean() + 0.5) < 0.05 and abs(big["disco_b"].mean() + 1.0) < 0.05
    # at G = 8 the chance of a mixed group, 1 - p^G - (1 - p)^G, lifts both: hard and easy prompts move less
    assert (small["disco_b"] > big["disco_b"]).all() and (small["grpo"] > big["grpo"]).all()


def test_recorded_verdicts_follow_their_intervals():
    run = claims.read_claim_run(claims.load_claim(FOLDER))
    assert run is not None, "B14: no complete confirmatory run"
    bounds = {"H1": (-0.8, np.inf), "H2": (-0.8, np.inf), "H3": (-1.2, -0.8), "H4": (-1.2, -0.8),
              "H5": (-0.2, 0.2), "H6": (-0.2, 0.2)}
    for r in run.verdict.regions:
        lo, hi = bounds[r.hypothesis]
        inside, outside = lo < r.ci_low and r.ci_high < hi, r.ci_high <= lo or r.ci_low >= hi
        assert r.claim == ("holds" if inside else "fails" if outside else "unsettled"), r
    assert [r.hypothesis for r in run.verdict.regions] == ["H1", "H2", "H3", "H4", "H5", "H6"]
