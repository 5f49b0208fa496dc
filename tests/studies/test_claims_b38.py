"""Claim study B38 (KL control and the filtered base model, arXiv 2605.02375): the committed run used the
unequal masses the claim file states, and each region's recorded verdict is where its interval lies."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tabsim.prereg import claims

FOLDER = Path(__file__).resolve().parents[2] / "preregistration" / "claims" / "B38"


def test_the_base_given_a_correct_answer_is_the_stated_one():
    """Masses 1 : 0.3 : 0.09 among the 3 correct answers: entropy -sum q log q = 0.7451 (log 3 = 1.0986 if equal),
    and the base is its own filtered model (KL 0)."""
    q = np.array([1.0, 0.3, 0.09]) / 1.39
    data = pd.read_parquet(FOLDER / "results" / "data.parquet")
    base = data[data["arm"] == "frozen"]
    np.testing.assert_allclose(base["correct_entropy"], -(q * np.log(q)).sum(), atol=1e-6)
    assert base["correct_entropy"].iloc[0] == pytest.approx(0.7451, abs=1e-4)
    np.testing.assert_allclose(base["filtered_kl"], 0.0, atol=1e-6)


def test_recorded_verdicts_follow_their_intervals():
    run = claims.read_claim_run(claims.load_claim(FOLDER))
    assert run is not None, "B38: no complete confirmatory run"
    for r in run.verdict.regions:
        far = r.predicted.startswith(">")  # beta 0 predicts far from the filtered base, the others near it
        inside = r.ci_low > 0.02 if far else r.ci_high < 0.02
        outside = r.ci_high <= 0.02 if far else r.ci_low >= 0.02
        assert r.claim == ("holds" if inside else "fails" if outside else "unsettled"), r
    assert {r.region for r in run.verdict.regions} == {"beta 0 (no KL)", "beta 0.05", "beta 0.2", "beta 1"}
