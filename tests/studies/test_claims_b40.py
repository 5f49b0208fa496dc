"""Claim study B40, off-policy group-relative REINFORCE (arXiv 2509.24203): the committed run manipulated what
the plan assumes (plain REINFORCE never clips, the REC losses do at both lags, every cell on the same seeds), and
each region's recorded verdict is where its interval lies against the plan's boundaries (TOST within 0.01 for
removing the importance weight, 0 for the clip against REINFORCE)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tabsim.prereg import claims

FOLDER = Path(__file__).resolve().parents[2] / "preregistration" / "claims" / "B40"
MARGIN = 0.01  # the plan's is_margin


def test_the_clip_engages_only_where_the_loss_has_one():
    data = pd.read_parquet(FOLDER / "results" / "data.parquet")
    trained = data[data["step"] > 0]
    by_loss = trained.groupby(["surrogate", "lag"], observed=True)["clip_frac"]
    assert by_loss.max()["reinforce"].eq(0.0).all()
    for loss in ("rec_oneside_nois", "clip"):
        assert (by_loss.mean()[loss] > 0.005).all(), loss
    seeds = data.groupby(["surrogate", "lag"], observed=True)["seed"].unique()
    assert all(sorted(s) == list(range(9400, 9408)) for s in seeds)


def test_recorded_verdicts_follow_their_intervals():
    run = claims.read_claim_run(claims.load_claim(FOLDER))
    assert run is not None, "B40: no complete confirmatory run"
    for r in run.verdict.regions:
        if r.hypothesis in ("H1", "H2"):  # removing the weight: within +-0.01 (TOST, the 90% interval)
            inside = -MARGIN < r.ci_low and r.ci_high < MARGIN
            outside = r.ci_high <= -MARGIN or r.ci_low >= MARGIN
        else:  # the clip without the weight above REINFORCE
            inside, outside = r.ci_low > 0, r.ci_high <= 0
        assert r.claim == ("holds" if inside else "fails" if outside else "unsettled"), r
    assert {r.hypothesis for r in run.verdict.regions} == {"H1", "H2", "H3", "H4"}
    if {r.claim for r in run.verdict.regions} - {"unsettled"} == {"holds", "fails"}:
        assert run.verdict.verdict == claims.DEPENDS
