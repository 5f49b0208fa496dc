"""Claim study B32, NGRPO's half (arXiv 2509.18851): the committed run's base fails all 8 draws as often as the
claim file says, and each region's recorded verdict is where its interval lies against 0.01."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from claim_checks import regions_follow_their_intervals

FOLDER = Path(__file__).resolve().parents[2] / "preregistration" / "claims" / "B32"


def test_the_base_fails_every_draw_as_stated():
    """Alike prompts: the base's pass@8 is 1 - (1 - pass@1)^8, 0.278 at p_s 0.05 and 0.763 at 0.2 (the share of
    groups with a correct answer; GRPO's advantage is 0 on the rest)."""
    data = pd.read_parquet(FOLDER / "results" / "data.parquet")
    base = data[(data["arm"] == "frozen") & (data["step"] == data["step"].max())]
    np.testing.assert_allclose(base["pass@8"], 1 - (1 - base["pass1"]) ** 8, atol=1e-5)
    by_ps = base.groupby("prior_strength")["pass@8"].mean()
    assert by_ps[0.05] == pytest.approx(0.278, abs=5e-4) and by_ps[0.2] == pytest.approx(0.763, abs=5e-4)


def test_recorded_verdicts_follow_their_intervals():
    run = regions_follow_their_intervals(FOLDER, 0.01)
    assert {r.region for r in run.verdict.regions} == {"p_s 0.05", "p_s 0.20"}
