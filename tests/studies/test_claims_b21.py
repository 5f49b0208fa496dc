"""Claim study B21, GMPO's ratio range (arXiv 2507.20673): the committed run's paired differences are the ones its
report states, and each region's recorded verdict is where its interval lies against 0 (the plan predicts a
smaller range: the claim holds where the interval is below 0, fails where it is at or above)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from claim_checks import regions_follow_their_intervals

FOLDER = Path(__file__).resolve().parents[2] / "preregistration" / "claims" / "B21"


def final_range(data, surrogate, eps, lr):
    rows = data[(data["step"] == data["step"].max()) & (data["surrogate"] == surrogate) & (data["eps_low"] == eps)
                & (data["eps_high"] == eps) & (data["lr"] == lr)]
    return rows.set_index("seed")["log_ratio_range"].sort_index()


def test_the_estimates_are_the_seeds_paired_differences():
    """GMPO's geometric mean at GRPO's clip 0.2 narrows the range at lr 8 (H3: -0.0102); at its published clip
    e^+-0.4 it widens it (H1: +0.134), as GRPO's own clip widened to 0.4 does (E1: +0.163)."""
    data = pd.read_parquet(FOLDER / "results" / "data.parquet")
    grpo = final_range(data, "clip", 0.2, 8.0)
    assert len(grpo) == 12 and (grpo > 0).all()
    h3 = final_range(data, "gmpo", 0.2, 8.0) - grpo
    h1 = final_range(data, "gmpo", 0.4, 8.0) - grpo
    assert h3.mean() == pytest.approx(-0.0102, abs=5e-5) and h1.mean() == pytest.approx(0.1342, abs=5e-5)
    assert (final_range(data, "clip", 0.4, 8.0) - grpo).mean() == pytest.approx(0.1629, abs=5e-5)


def test_recorded_verdicts_follow_their_intervals():
    run = regions_follow_their_intervals(FOLDER, 0.0, above=False)
    assert run.verdict.verdict == "DEPENDS"
    assert {r.region for r in run.verdict.regions if r.claim == "holds"} == {"same clip range 0.2, lr 8"}
    assert np.isfinite([r.estimate for r in run.verdict.regions]).all()
