"""Claim study B23 (DRPO, arXiv 2510.04474): the committed run's clip cells do not read DRPO's lambda, and each
region's recorded verdict is where its interval lies against the plan's boundary -0.01, on the side each hypothesis
predicts (GRPO's penalty below it, DRPO's length reward above it)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tabsim.prereg import claims

FOLDER = Path(__file__).resolve().parents[2] / "preregistration" / "claims" / "B23"
BOUNDARY = -0.01


def test_the_clip_cells_repeat_across_lambda():
    """lambda is read by the drpo surrogate only: GRPO's cells are the same trajectories at lambda 0.1 and 1000
    (same seeds), while DRPO's differ."""
    data = pd.read_parquet(FOLDER / "results" / "data.parquet")
    keys = ["terms", "prior_strength", "seed", "step"]

    def at(loss, lam):
        return data[(data["loss"] == loss) & (data["lambda"] == lam)].sort_values(keys)["pass1"].to_numpy()

    np.testing.assert_array_equal(at("clip", 0.1), at("clip", 1000.0))
    assert np.abs(at("drpo", 0.1) - at("drpo", 1000.0)).max() > 0.01


def test_recorded_verdicts_follow_their_intervals():
    run = claims.read_claim_run(claims.load_claim(FOLDER))
    assert run is not None, "B23: no complete confirmatory run"
    less = {"H1", "H2"}  # the penalty's cost: predicted below the boundary; H3, H4 above it
    for r in run.verdict.regions:
        if r.hypothesis in less:
            inside, outside = r.ci_high < BOUNDARY, r.ci_low >= BOUNDARY
        else:
            inside, outside = r.ci_low > BOUNDARY, r.ci_high <= BOUNDARY
        assert r.claim == ("holds" if inside else "fails" if outside else "unsettled"), r
    assert {r.hypothesis for r in run.verdict.regions} == {"H1", "H2", "H3", "H4"}
