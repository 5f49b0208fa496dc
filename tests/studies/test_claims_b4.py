"""Claim study B4 (Guide's adaptive hints, arXiv 2506.13923): the committed run's base fails all 8 draws as often
as the claim file says, and each region's recorded verdict is where its interval lies against 0.01."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from claim_checks import regions_follow_their_intervals

FOLDER = Path(__file__).resolve().parents[2] / "preregistration" / "claims" / "B4"


def test_the_base_fails_every_draw_as_stated():
    """The reference bandit's prompts are alike, so the base's pass@k is 1 - (1 - pass@1)^k: at p_s 0.05 pass@1
    0.0399 gives pass@8 0.278 (72% of groups all wrong), at 0.2 pass@1 0.1648 gives 0.763 (24%)."""
    data = pd.read_parquet(FOLDER / "results" / "data.parquet")
    base = data[(data["arm"] == "frozen") & (data["step"] == data["step"].max())]
    for k in (8, 64):
        np.testing.assert_allclose(base[f"pass@{k}"], 1 - (1 - base["pass1"]) ** k, atol=1e-5)
    by_ps = base.groupby("prior_strength")["pass@8"].mean()
    assert by_ps[0.05] == pytest.approx(0.278, abs=5e-4) and by_ps[0.2] == pytest.approx(0.763, abs=5e-4)


def test_recorded_verdicts_follow_their_intervals():
    run = regions_follow_their_intervals(FOLDER, 0.01)
    assert {r.region for r in run.verdict.regions} == {"p_s 0.05", "p_s 0.20"}
