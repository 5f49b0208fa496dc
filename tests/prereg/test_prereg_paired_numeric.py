"""``paired:<FACTOR>`` over a static integer factor (algo.epochs): the run frame holds its levels as floats
(4.0, 1.0) while the plan names them 4 and 1; the levels are matched by value, as conditions are."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tabsim.prereg import analysis
from tabsim.prereg.schema import read_document, validate_document

PLAN = Path(__file__).resolve().parents[2] / "preregistration" / "claims" / "B3" / "plan.yaml"
COND = {"prior_strength": 0.2, "unlikeliness": 0.0, "reward": "true"}


def _frame(four, one):
    rows = [{"epochs": float(ep), "unlikeliness": 0.0, "reward": "true", "arm": "true", "prior_strength": 0.2,
             "seed": seed, "step": 1000, "correct_entropy": v}
            for ep, values in ((4, four), (1, one)) for seed, v in enumerate(values)]
    return pd.DataFrame(rows)


def test_paired_levels_of_a_float_column_match_the_plans_integers():
    plan, problems = validate_document(read_document(PLAN))
    assert not problems, problems
    four, one = np.array([0.03, 0.028, 0.027, 0.029]), np.array([0.05, 0.054, 0.052, 0.053])
    for estimand, sign in (("paired:epochs", 1), ("paired:epochs:1,4", -1)):
        est = analysis.estimate(plan, _frame(four, one), None, estimand, COND, {})
        assert est.estimate == pytest.approx(sign * (four - one).mean(), abs=1e-12) and est.n_seeds == 4
    # a condition naming the level as text selects the same rows
    assert len(analysis._select(_frame(four, one), {"epochs": "4"})) == 4
