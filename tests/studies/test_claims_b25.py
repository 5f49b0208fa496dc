"""Claim study B25, lambda-GRPO (arXiv 2509.21154): the committed run applied the contrast (the two weights differ on
every seed, the design's rare first step is the better one) and each region's recorded verdict is where its
interval lies against 0.01."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from claim_checks import regions_follow_their_intervals

FOLDER = Path(__file__).resolve().parents[2] / "preregistration" / "claims" / "B25"


def test_the_two_weights_ran_and_the_rare_step_is_the_better_one():
    """lambda-GRPO and GRPO end apart on every seed (a run that ignored the factor gives equal cells), and on the
    base the rare root step's style (token 2) is right more often than the frequent one's, at both p_s."""
    data = pd.read_parquet(FOLDER / "results" / "data.parquet")
    end = data[(data["arm"] == "true") & (data["step"] == data["step"].max())]
    wide = end.pivot_table(index=["prior_strength", "seed"], columns="weights", values="pass1", observed=True)
    assert ((wide["lambda_grpo"] - wide["none"]).abs() > 1e-4).all()
    base = data[(data["arm"] == "frozen") & (data["step"] == 0)]
    assert (base["style1_acc"] > base["style0_acc"] + 0.1).all() and (base["root2_mass"] < 0.15).all()


def test_recorded_verdicts_follow_their_intervals():
    run = regions_follow_their_intervals(FOLDER, 0.01)
    assert {r.region for r in run.verdict.regions} == {"rare good step, p_s 0.6", "rare good step, p_s 0.3"}
