"""Claim study B8 (TTRV's frequency reward, arXiv 2510.06783): the committed run's regions are what the claim
file says (the base's likeliest answer wrong on every prompt at p_s 0.2, right at 0.5 and 0.8), each region's
recorded verdict is where its interval lies against 0.01, and the sign of the gain follows the base's mode."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from claim_checks import regions_follow_their_intervals

FOLDER = Path(__file__).resolve().parents[2] / "preregistration" / "claims" / "B8"
MODE_RIGHT = {0.2: False, 0.5: True, 0.8: True}


def _final() -> pd.DataFrame:
    data = pd.read_parquet(FOLDER / "results" / "data.parquet")
    return data[data["step"] == data["step"].max()]


def test_the_regions_are_the_stated_ones():
    """mode_correct is the share of prompts whose argmax answer is correct: 0 at p_s 0.2, 1 at 0.5 and 0.8 on
    every confirmatory seed (8 seeds, 40 prompts each)."""
    base = _final().query("arm == 'frozen'")
    for ps, right in MODE_RIGHT.items():
        cell = base[np.isclose(base["prior_strength"], ps)]
        assert len(cell) == 8
        np.testing.assert_array_equal(cell["mode_correct"], 1.0 if right else 0.0)


def test_the_gain_has_the_sign_of_the_base_mode():
    """Each seed's frequency - frozen final pass@1 is negative where the base's mode is wrong and positive where it
    is right (a consensus reward can only push toward the base's mode)."""
    final = _final()
    for ps, right in MODE_RIGHT.items():
        cell = final[np.isclose(final["prior_strength"], ps)]
        wide = cell.pivot(index="seed", columns="arm", values="pass1")
        d = (wide["frequency"] - wide["frozen"]).to_numpy()
        assert (d > 0).all() if right else (d < 0).all(), (ps, d)


def test_recorded_verdicts_follow_their_intervals():
    run = regions_follow_their_intervals(FOLDER, 0.01)
    for r in run.verdict.regions:
        assert r.claim == ("holds" if "mode right" in r.region else "fails"), r
    assert run.verdict.verdict == "DEPENDS"
