"""Claim study B26, GTPO's conflict tokens (arXiv 2508.03772): the committed run's format token is a conflict token
as the claim file says (its answers mixed, as accurate as the rest at p_s 0.3 and more at 0.5), and each region's
recorded verdict is where its interval lies against the plan's boundary (below 0 for GRPO pushing the token down,
above 0.01 for GTPO keeping it up)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tabsim.prereg import claims

FOLDER = Path(__file__).resolve().parents[2] / "preregistration" / "claims" / "B26"


def test_the_format_token_is_a_conflict_token():
    data = pd.read_parquet(FOLDER / "results" / "data.parquet")
    base = data[(data["arm"] == "frozen") & (data["step"] == 0)].groupby("prior_strength")[
        ["style1_acc", "style2_acc", "root1_mass"]].mean()
    assert ((base["style1_acc"] > 0.1) & (base["style1_acc"] < 0.9)).all()  # right and wrong answers through it
    assert base.loc[0.3, "style1_acc"] == pytest.approx(base.loc[0.3, "style2_acc"], abs=0.01)
    assert base.loc[0.5, "style1_acc"] > base.loc[0.5, "style2_acc"] + 0.1
    assert (base["root1_mass"] > 0.7).all()


def test_recorded_verdicts_follow_their_intervals():
    run = claims.read_claim_run(claims.load_claim(FOLDER))
    assert run is not None, "B26: no complete confirmatory run"
    for r in run.verdict.regions:
        below = r.region.startswith("GRPO")  # H1, H2: predicted below 0; H3, H4: above 0.01
        inside = r.ci_high < 0.0 if below else r.ci_low > 0.01
        outside = r.ci_low >= 0.0 if below else r.ci_high <= 0.01
        assert r.claim == ("holds" if inside else "fails" if outside else "unsettled"), r
    assert len(run.verdict.regions) == 4
