"""The ``cells:<A>-<B>`` estimand: two named cells of a design that differ in several factors, paired by seed.

Checked on hand-made final rows (no run): the estimate is the mean of the seeds' differences, its t interval
and the p of a ``ci_lower_gt: 0`` rule are scipy's paired t test (``scipy.stats.ttest_rel``); two cells that
differ in one factor give ``paired:<FACTOR>``'s numbers. A plan naming an unknown cell, factor or level, or
cells that leave a factor free or fixed twice, is refused naming the field; rows where a cell matches no run,
several runs of a seed, or other seeds than the other cell are refused in one line.
"""
from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from tabsim.prereg import analysis
from tabsim.prereg.schema import read_document, validate_document

PLAN = Path(__file__).resolve().parents[2] / "preregistration" / "claims" / "B11" / "plan.yaml"
CELLS = {"sign_true": {"estimator": "sign", "reward": "true"},
         "grpo_frozen": {"estimator": "grpo", "reward": "frozen"},
         "grpo_true": {"estimator": "grpo", "reward": "true"}}
COND = {"prior_strength": 0.2}


def _plan(estimand="cells:sign_true-grpo_frozen", condition=COND, cells=CELLS):
    doc = copy.deepcopy(read_document(PLAN))
    doc["analysis"]["cells"] = copy.deepcopy(cells)
    for h in doc["hypotheses"]:
        h["estimand"], h["condition"] = estimand, dict(condition)
        h["prediction"], h["rule"] = "greater", {"ci_lower_gt": 0}
    doc["exploratory"] = []
    return doc


def _frame(values: dict) -> pd.DataFrame:
    """Final rows of each (estimator, reward) cell at p_s 0.2 for seeds 0..n-1, plus rows that must be
    ignored: step 0, and another prior strength."""
    rows = []
    for (est, arm), xs in values.items():
        for seed, v in enumerate(xs):
            for step, ps, x in ((0, 0.2, -9.0), (200, 0.2, v), (200, 0.5, 9.0)):
                rows.append({"estimator": est, "reward": arm, "arm": arm, "prior_strength": ps, "seed": seed,
                             "step": step, "pass1": x})
    return pd.DataFrame(rows)


def _values(n=8):
    rng = np.random.default_rng(1)
    shared = rng.normal(0, 0.01, n)
    return {("sign", "true"): 0.33 + shared + rng.normal(0, 0.03, n),
            ("grpo", "true"): 0.30 + shared + rng.normal(0, 0.03, n),
            ("sign", "frozen"): np.full(n, 0.2), ("grpo", "frozen"): np.full(n, 0.2)}


def test_two_cells_differing_in_two_factors_are_scipys_paired_t_test():
    plan, problems = validate_document(_plan())
    assert not problems, problems
    v = _values()
    est = analysis.estimate(plan, _frame(v), None, "cells:sign_true-grpo_frozen", COND, {})
    a, b = v[("sign", "true")], v[("grpo", "frozen")]
    test = sps.ttest_rel(a, b)
    assert est.estimate == pytest.approx((a - b).mean(), abs=1e-12) and est.n_seeds == 8
    assert est.ci(0.95) == pytest.approx(tuple(test.confidence_interval(0.95)), abs=1e-12)
    assert est.detail["levels"] == ["sign_true", "grpo_frozen"]


def test_cells_differing_in_one_factor_give_the_paired_estimand():
    plan, problems = validate_document(_plan("cells:sign_true-grpo_true"))
    assert not problems, problems
    v = _values()
    frame = _frame(v)
    cells = analysis.estimate(plan, frame, None, "cells:sign_true-grpo_true", COND, {})
    test = sps.ttest_rel(v[("sign", "true")], v[("grpo", "true")])
    assert 0.001 < test.pvalue < 0.5  # a p the rule's bisection resolves
    assert analysis.rule_p(cells, (0.0, math.inf), "ci_lower_gt") == pytest.approx(test.pvalue, rel=1e-4)
    paired = analysis.estimate(plan, frame, None, "paired:estimator", {**COND, "reward": "true"}, {})
    assert cells.estimate == pytest.approx(paired.estimate, abs=1e-12)
    assert cells.ci(0.9) == pytest.approx(paired.ci(0.9), abs=1e-12)


@pytest.mark.parametrize("estimand, condition, cells, field, message", [
    ("cells:sign_true-nothing", COND, CELLS, "hypotheses[H1].estimand", "name two different cells"),
    ("cells:sign_true-sign_true", COND, CELLS, "hypotheses[H1].estimand", "name two different cells"),
    ("cells:sign_true", COND, CELLS, "hypotheses[H1].estimand", "name two different cells"),
    ("cells:a-b", COND, {"a": {"estimator": "sign", "reward": "true"}, "b": {"reward": "true", "estimator": "sign"}},
     "hypotheses[H1].estimand", "name the same levels"),
    ("cells:a-grpo_true", COND, {**CELLS, "a": {"estimator": "sgn", "reward": "true"}},
     "analysis.cells.a.estimator", "level 'sgn' is not among the factor's levels"),
    ("cells:a-grpo_true", COND, {**CELLS, "a": {"estimatr": "sign", "reward": "true"}},
     "analysis.cells.a.estimatr", "not a factor of the design"),
    ("cells:a-grpo_true", COND, {**CELLS, "a": {"estimator": "sign"}},
     "hypotheses[H1].estimand", "cell 'a' with the condition leaves ['reward'] free"),
    ("cells:sign_true-grpo_true", {}, CELLS, "hypotheses[H1].estimand", "leaves ['prior_strength'] free"),
    ("cells:sign_true-grpo_true", {**COND, "reward": "true"}, CELLS, "hypotheses[H1].condition.reward",
     "an axis of the estimand"),
])
def test_a_bad_cells_estimand_is_refused_naming_the_field(estimand, condition, cells, field, message):
    _, problems = validate_document(_plan(estimand, condition, cells))
    assert any(p.startswith(field + ":") and message in p for p in problems), problems


def test_rows_a_cell_cannot_pair_are_refused_in_one_line():
    plan, _ = validate_document(_plan())
    v = _values(4)
    frame = _frame(v)
    twice = pd.concat([frame, frame[frame["reward"] == "frozen"]], ignore_index=True)
    with pytest.raises(ValueError, match="cell 'grpo_frozen' .* matches several runs per seed"):
        analysis.estimate(plan, twice, None, "cells:sign_true-grpo_frozen", COND, {})
    with pytest.raises(ValueError, match="cell 'grpo_frozen' .* matches no run"):
        analysis.estimate(plan, frame[frame["reward"] != "frozen"], None, "cells:sign_true-grpo_frozen", COND, {})
    with pytest.raises(ValueError, match="ran on different seeds"):
        analysis.estimate(plan, frame[(frame["reward"] == "true") | (frame["seed"] > 0)], None,
                          "cells:sign_true-grpo_frozen", COND, {})


def _terms_plan(levels=([], ["backward"]), field="algo.reward_terms"):
    return {"schema": "tabsim.prereg/1", "title": "terms", "authors": ["tabsim tests"], "rationale": "list levels",
            "design": {"preset": "dr_grpo", "config": {"arms": {"fpr": 0.1, "fnr": 0.3}}, "arms": ["true", "noisy"],
                       "seeds": 3, "steps": 5,
                       "factors": [{"name": "reward", "field": "arm", "levels": ["true", "noisy"]},
                                   {"name": "terms", "field": field, "levels": [list(x) for x in levels]}]},
            "analysis": {"ci_method": "t", "cells": {"corrected": {"reward": "noisy", "terms": "backward"},
                                                     "clean": {"reward": "true", "terms": "none"}}},
            "stopping_rule": {"kind": "fixed", "description": "once"},
            "hypotheses": [{"id": "H1", "statement": "s", "estimand": "cells:corrected-clean", "prediction": "greater",
                            "rule": {"ci_lower_gt": 0}}]}


def test_a_list_field_is_a_factor_named_by_its_label(monkeypatch):
    """algo.reward_terms varies as a factor: its levels are lists, named in the data, conditions and cells by
    their items joined with + ([] is none); the runner hands the lists to the runs and the labels to the frame."""
    plan, problems = validate_document(_terms_plan())
    assert not problems, problems
    assert plan.factor("terms").labels == ["none", "backward"]
    assert [cfg["algo"]["reward_terms"] for _, cfg in analysis_runs(plan)] == [[], ["backward"]]
    seen = {}

    def fake_run(base, factors, **kw):
        seen.update({f.name: (f.levels, f.labels) for f in factors})
        raise RuntimeError("stop")

    from tabsim.prereg import runner
    monkeypatch.setattr(runner, "run_factorial", fake_run)
    with pytest.raises(RuntimeError, match="stop"):
        runner.run_design(plan)
    assert seen == {"terms": (([], ["backward"]), ("none", "backward"))}


def analysis_runs(plan):
    from tabsim.prereg.schema import design_runs
    return design_runs(plan)


@pytest.mark.parametrize("doc, field, message", [
    (_terms_plan(levels=([], ["backward"], ["backward"])), "design.factors[terms].levels", "levels must be distinct"),
    (_terms_plan(field="prior_strength"), "design.factors[terms].levels", "list levels are for a list field"),
    (_terms_plan(levels=([], ["bakward"])), "design.config at terms=['bakward']", "algo.reward_terms"),
])
def test_bad_list_levels_are_refused_naming_the_field(doc, field, message):
    _, problems = validate_document(doc)
    assert any(p.startswith(field) and message in p for p in problems), problems
