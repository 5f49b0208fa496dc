"""A plan may analyse a metric the environment records only on request (choices.OPTIONAL_METRICS, e.g. filtered_kl),
provided its design asks for it in train.metrics; otherwise one line says where to add it."""
from __future__ import annotations

import pytest

from tabsim.prereg.schema import validate_document
from tests.prereg.tiny_plan import tiny_plan


def _doc(metric, named):
    doc = tiny_plan("optional metric")
    doc["analysis"]["metric"] = metric
    if named is not None:
        doc["design"]["config"]["train"]["metrics"] = named
    return doc


@pytest.mark.parametrize("metric", ["filtered_kl", "correct_entropy"])
def test_an_optional_metric_named_in_train_metrics_is_accepted(metric):
    plan, problems = validate_document(_doc(metric, ["pass1", metric]))
    assert plan is not None and problems == []


def test_an_optional_metric_not_asked_for_is_refused_in_one_line():
    _, problems = validate_document(_doc("filtered_kl", None))
    assert problems == ["analysis.metric: 'filtered_kl' is recorded only when design.config.train.metrics names it "
                        "(got None); add it there"]
    _, problems = validate_document(_doc("filtered_kl", ["pass1"]))
    assert len(problems) == 1 and "(got ['pass1'])" in problems[0]


def test_an_unknown_metric_is_still_refused():
    _, problems = validate_document(_doc("filtered_kll", ["pass1"]))
    assert len(problems) == 1 and problems[0].startswith("analysis.metric: unknown metric 'filtered_kll'")
    assert "correct_entropy" in problems[0]  # the allowed list names the optional metrics


def test_one_root_action_of_root_mass_is_accepted_when_the_family_is_named():
    """root{a}_mass (the root's mass on action a) is a member of the optional family root_mass."""
    plan, problems = validate_document(_doc("root1_mass", ["pass1", "root_mass"]))
    assert plan is not None and problems == []
    _, problems = validate_document(_doc("root1_mass", ["pass1"]))
    assert problems == ["analysis.metric: 'root1_mass' is recorded only when design.config.train.metrics names it "
                        "('root_mass') (got ['pass1']); add it there"]
    _, problems = validate_document(_doc("rootx_mass", ["root_mass"]))
    assert len(problems) == 1 and problems[0].startswith("analysis.metric: unknown metric 'rootx_mass'")
