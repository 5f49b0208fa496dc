"""Claim study B20, GSPO against GRPO (arXiv 2507.18071; counter-claim arXiv 2511.04256): in the committed run GSPO's
clip holds far more tokens than GRPO's, the report's differences are the seeds', and each region's recorded verdict
is where its interval lies against 0 (the claim holds above 0, fails at or below)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from claim_checks import regions_follow_their_intervals

FOLDER = Path(__file__).resolve().parents[2] / "preregistration" / "claims" / "B20"


def final(data, ratio, lr, sigma, metric):
    rows = data[(data["step"] == data["step"].max()) & (data["ratio"] == ratio) & (data["lr"] == lr)
                & (data["mismatch_sigma"] == sigma)]
    rows = rows[(rows["eps_low"] < 0.01) == (ratio == "sequence")]
    rows = rows[(rows["eps_high"] < 0.01) == (ratio == "sequence")]
    return rows.set_index("seed")[metric].sort_index()


def test_gspo_clips_more_and_ends_lower_at_lr_8():
    """lr 8, sigma 4: GSPO - GRPO -0.2821 in final pass@1 (H2); GSPO's clip holds several times GRPO's share of the
    tokens in the last evaluation interval."""
    data = pd.read_parquet(FOLDER / "results" / "data.parquet")
    d = final(data, "sequence", 8.0, 4.0, "pass1") - final(data, "token", 8.0, 4.0, "pass1")
    assert len(d) == 8 and d.mean() == pytest.approx(-0.2821, abs=5e-5)
    assert final(data, "sequence", 8.0, 4.0, "clip_frac").mean() > 3 * final(data, "token", 8.0, 4.0,
                                                                              "clip_frac").mean()


def test_recorded_verdicts_follow_their_intervals():
    run = regions_follow_their_intervals(FOLDER, 0.0)
    assert run.verdict.verdict == "NOT SUPPORTED" and len(run.verdict.regions) == 4
