"""Claim study B3 (rank bias and its mitigations, arXiv 2506.02355): the committed run's base has the stated
masses among its correct answers, each paired estimate is the seeds' mean difference in the recorded data,
and each region's verdict is where its interval lies against 0.02."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tabsim.prereg import claims

from claim_checks import regions_follow_their_intervals

FOLDER = Path(__file__).resolve().parents[2] / "preregistration" / "claims" / "B3"


def _final():
    data = pd.read_parquet(FOLDER / "results" / "data.parquet")
    return data[data["step"] == data["step"].max()]


def test_the_base_and_the_paired_estimates_from_the_data():
    q = np.array([1.0, 0.3, 0.09]) / 1.39  # the base given a correct answer: entropy 0.7451
    fin = _final()
    np.testing.assert_allclose(fin.loc[fin["arm"] == "frozen", "correct_entropy"], -(q * np.log(q)).sum(), atol=1e-6)
    true = fin[fin["arm"] == "true"].set_index(["prior_strength", "unlikeliness", "epochs", "seed"])["correct_entropy"]
    run = claims.read_claim_run(claims.load_claim(FOLDER), verify=False)
    by_id = {h["id"]: h["estimate"] for h in run.results["analysis"]["hypotheses"]}
    for hid, p_s in (("H1", 0.2), ("H2", 0.5)):  # the unlikeliness reward minus plain GRPO, 1 update per batch
        d = true.xs((p_s, 0.25, 1.0), level=[0, 1, 2]) - true.xs((p_s, 0.0, 1.0), level=[0, 1, 2])
        assert by_id[hid] == pytest.approx(d.mean(), abs=1e-9)
    for hid, p_s in (("H3", 0.2), ("H4", 0.5)):  # 4 updates per batch minus 1, plain GRPO
        d = true.xs((p_s, 0.0, 4.0), level=[0, 1, 2]) - true.xs((p_s, 0.0, 1.0), level=[0, 1, 2])
        assert by_id[hid] == pytest.approx(d.mean(), abs=1e-9)


def test_recorded_verdicts_follow_their_intervals():
    regions_follow_their_intervals(FOLDER, 0.02)
