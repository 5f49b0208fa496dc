"""Claim study B16, Knapsack RL (arXiv 2509.25849): the committed run's paired differences of the effective-gradient
ratio are the recorded estimates, the rise is relative as the claim states, and each region's recorded verdict is
where its interval lies against its boundary (20% of the pilot's uniform ratio: 0.05 at p_s 0.2, 0.08 at 0.5)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tabsim.prereg import claims

FOLDER = Path(__file__).resolve().parents[2] / "preregistration" / "claims" / "B16"
BOUNDARY = {"p_s 0.2": 0.05, "p_s 0.5": 0.08}


def final_true():
    data = pd.read_parquet(FOLDER / "results" / "data.parquet")
    return data[(data["arm"] == "true") & (data["step"] == data["step"].max())]


def test_recorded_verdicts_follow_their_intervals():
    run = claims.read_claim_run(claims.load_claim(FOLDER))
    assert run is not None, "B16: no complete confirmatory run"
    assert {r.region for r in run.verdict.regions} == set(BOUNDARY)
    for r in run.verdict.regions:
        inside, outside = r.ci_low > BOUNDARY[r.region], r.ci_high <= BOUNDARY[r.region]
        assert r.claim == ("holds" if inside else "fails" if outside else "unsettled"), r


def test_the_rise_is_the_paired_difference_and_relative():
    """Knapsack minus uniform per seed, averaged: the estimates of the report (0.2467, 0.3003); relative to the
    uniform allocation's ratio, above the claim's 20% in both regions."""
    fin = final_true()
    wide = fin.pivot_table(index=["prior_strength", "seed"], columns="allocation", values="effective_ratio")
    diff = (wide["knapsack"] - wide["uniform"]).groupby(level="prior_strength").mean()
    assert diff[0.2] == pytest.approx(0.2467, abs=5e-5) and diff[0.5] == pytest.approx(0.3003, abs=5e-5)
    means = wide.groupby(level="prior_strength").mean()
    assert ((means["knapsack"] / means["uniform"] - 1) > 0.2).all()
    assert (means["uniform"] <= 0.8).all()  # zero gradients are common under the uniform allocation
