"""Claim study B22, training-inference mismatch (arXiv 2605.14220): the committed run's base is the same table at every
sigma and pass count, the trained runs' paired differences are the report's, and each region's recorded verdict is
where its interval lies against 0 (collapse predicted: the claim holds where the interval is below 0, fails where it
is at or above)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from claim_checks import regions_follow_their_intervals

FOLDER = Path(__file__).resolve().parents[2] / "preregistration" / "claims" / "B22"


def test_the_base_is_untouched_and_the_trained_runs_learn():
    """The FROZEN arm never updates, so its final pass@1 is the base's (0.1672 on average) in every cell; the trained
    run at sigma 4 with one pass ends 0.5002 above it (H2), the closest any region comes to a collapse."""
    data = pd.read_parquet(FOLDER / "results" / "data.parquet")
    last = data[data["step"] == data["step"].max()]
    base = last[last["arm"] == "frozen"].pivot_table(index="seed", columns=["epochs", "mismatch_sigma"], values="pass1")
    assert np.ptp(base.to_numpy(), axis=1).max() < 1e-7 and base.to_numpy().mean() == pytest.approx(0.1672, abs=5e-5)
    cell = last[(last["epochs"] == 1) & (last["mismatch_sigma"] == 4.0)].pivot(index="seed", columns="arm",
                                                                                values="pass1")
    assert (cell["true"] - cell["frozen"]).mean() == pytest.approx(0.5002, abs=5e-5)


def test_recorded_verdicts_follow_their_intervals():
    run = regions_follow_their_intervals(FOLDER, 0.0, above=False)
    assert run.verdict.verdict == "NOT SUPPORTED" and len(run.verdict.regions) == 4
