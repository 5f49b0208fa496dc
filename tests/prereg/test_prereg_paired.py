"""The ``paired:<FACTOR>`` estimand: a two-level factor's contrast differenced within each seed.

Checked on hand-made final rows (no run): the estimate is the mean of the seeds' differences, the t interval
is the one-sample interval with ``seeds - 1`` degrees of freedom (computed here with scipy), and with shared
seed noise it is narrower than the Sum-coded coefficient's pooled OLS interval; plans naming a factor that
does not exist or has three levels are refused naming the field.
"""
from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from tabsim.prereg import analysis
from tabsim.prereg.schema import read_document, validate_document

PLAN = Path(__file__).resolve().parents[2] / "preregistration" / "claims" / "B11" / "plan.yaml"
COND = {"prior_strength": 0.2, "reward": "true"}


def _plan(estimand="paired:estimator"):
    doc = copy.deepcopy(read_document(PLAN))
    for h in doc["hypotheses"]:
        h["estimand"] = estimand
    doc["exploratory"] = []
    return doc


def _frame(sign, grpo):
    """Final rows of both estimators at COND for seeds 0..n-1, and a step-0 row that must be ignored."""
    rows = []
    for est, values in (("sign", sign), ("grpo", grpo)):
        for seed, v in enumerate(values):
            for step, x in ((0, -9.0), (200, v)):
                rows.append({"estimator": est, "reward": "true", "arm": "true", "prior_strength": 0.2,
                             "seed": seed, "step": step, "pass1": x})
    return pd.DataFrame(rows)


def test_paired_difference_is_the_seeds_one_sample_t_interval():
    plan, problems = validate_document(_plan())
    assert not problems, problems
    rng = np.random.default_rng(0)
    noise = rng.normal(0, 0.01, 8)  # the seed's shared part: both estimators see it
    sign = 0.35 + noise + rng.normal(0, 0.001, 8)
    grpo = 0.28 + noise + rng.normal(0, 0.001, 8)
    est = analysis.estimate(plan, _frame(sign, grpo), None, "paired:estimator", COND, {})
    d = sign - grpo
    assert est.estimate == pytest.approx(d.mean(), abs=1e-12) and est.n_seeds == 8
    half = sps.t.ppf(0.975, 7) * d.std(ddof=1) / np.sqrt(8)
    assert est.ci(0.95) == pytest.approx((d.mean() - half, d.mean() + half), abs=1e-12)
    # the Sum-coded coefficient is half the difference; its pooled interval ignores the shared seed noise
    coef_plan, _ = validate_document(_plan("coefficient:A"))
    coef = analysis.estimate(coef_plan, _frame(sign, grpo), None, "coefficient:A", COND, {})
    assert 2 * coef.estimate == pytest.approx(est.estimate, abs=1e-9)
    lo, hi = coef.ci(0.95)
    assert 2 * (hi - lo) > 5 * (est.ci(0.95)[1] - est.ci(0.95)[0])


def test_a_level_without_seed_noise_gets_n_minus_1_degrees_of_freedom():
    plan, _ = validate_document(_plan())
    sign = np.array([0.30, 0.32, 0.31, 0.35])
    est = analysis.estimate(plan, _frame(sign, np.full(4, 0.2)), None, "paired:estimator", COND, {})
    half = sps.t.ppf(0.975, 3) * sign.std(ddof=1) / 2
    assert est.ci(0.95) == pytest.approx((sign.mean() - 0.2 - half, sign.mean() - 0.2 + half), abs=1e-12)


def test_two_named_levels_of_a_larger_factor():
    """paired:<FACTOR>:<A>,<B> is A minus B; here the estimator factor's levels named in the other order."""
    plan, problems = validate_document(_plan("paired:estimator:grpo,sign"))
    assert not problems, problems
    sign, grpo = np.array([0.30, 0.32, 0.31]), np.array([0.2, 0.25, 0.22])
    est = analysis.estimate(plan, _frame(sign, grpo), None, "paired:estimator:grpo,sign", COND, {})
    assert est.estimate == pytest.approx((grpo - sign).mean(), abs=1e-12)


@pytest.mark.parametrize("estimand, message", [
    ("paired:nothing", "'nothing' is not a factor of the design"),
    ("paired:prior_strength", "needs a factor of 2 levels or two named levels"),
    ("paired:prior_strength:0.2,0.3", "name two different levels of 'prior_strength'"),
    ("paired:estimator:sign,sign", "name two different levels of 'estimator'"),
])
def test_a_bad_paired_estimand_is_refused_naming_the_field(estimand, message):
    _, problems = validate_document(_plan(estimand))
    assert any(p.startswith("hypotheses[H1].estimand: " + estimand) and message in p for p in problems), problems


def test_runs_left_unpaired_by_the_condition_are_refused():
    """Two runs of one seed and level (an arm the condition leaves free) are not silently reduced to one."""
    plan, _ = validate_document(_plan())
    frame = _frame(np.array([0.3, 0.31]), np.array([0.2, 0.21]))
    twice = pd.concat([frame, frame.assign(arm="frozen", pass1=0.1)], ignore_index=True)
    with pytest.raises(ValueError, match="several runs per seed and level"):
        analysis.estimate(plan, twice, None, "paired:estimator", {"prior_strength": 0.2}, {})
