"""Plans say what each factor is meant to move, and the report flags a factor that did not move it;
integer fields of a plan refuse floats; factor levels print as written; counts read as English; and
``--strict`` refuses a run whose plan commit could not be checked (a plan in no git repository)."""
import copy

import pytest
import yaml
from click.testing import CliRunner

from tabsim import prereg
from tabsim.cli.prereg import command as prereg_command
from tabsim.prereg.schema import load_plan, validate_document

PLAN = {
    "schema": "tabsim.prereg/1",
    "title": "A clip that never engages",
    "authors": ["tabsim tests"],
    "rationale": "At this learning rate the ratio stays near 1, so the clip never fires.",
    "design": {
        "preset": "paper",
        "arms": ["frozen", "random"],
        "config": {"task": {"n_prompts": 4, "n_answers": 4, "n_correct": 1},
                   "train": {"batch_size": 4, "group_size": 4},
                   "algo": {"surrogate": "clip", "ratio": "token", "minibatches": 1, "lr": 0.001}},
        "seeds": 3,
        "first_seed": 300,
        "steps": 4,
        "factors": [
            {"name": "epochs", "field": "algo.epochs", "levels": [1, 2]},
            {"name": "eps_high", "field": "eps_high", "levels": [0.2, 0.3], "moves": "clip_frac"},
            {"name": "prior_strength", "field": "prior_strength", "levels": [0.35, 0.8],
             "moves": {"metric": "pass1", "arm": "random"}},
        ],
    },
    "analysis": {"n_resamples": 200},
    "stopping_rule": {"kind": "fixed", "description": "every seed runs"},
    "hypotheses": [{"id": "H1", "statement": "random reward helps at the strong prior", "estimand": "d_null",
                    "condition": {"epochs": 2, "eps_high": 0.2, "prior_strength": 0.8}, "prediction": "greater",
                    "rule": {"ci_lower_gt": 0}}],
    "exploratory": [{"id": "E1", "estimand": "d_null", "condition": {"epochs": 1, "eps_high": 0.2,
                                                                     "prior_strength": 0.35}}],
}


@pytest.mark.parametrize("field, value", [("seeds", 4.0), ("steps", 4.0), ("first_seed", 300.0)])
def test_integer_fields_refuse_floats(field, value):
    doc = copy.deepcopy(PLAN)
    doc["design"][field] = value
    plan, problems = validate_document(doc)
    assert plan is None and any(p.startswith(f"design.{field}:") and "integer" in p for p in problems), problems


def test_counts_read_as_english(tmp_path):
    from tabsim.prereg.summary import count, plan_summary

    assert [count(n, "exploratory hypothesis") for n in (0, 1, 2)] == [
        "no exploratory hypotheses", "1 exploratory hypothesis", "2 exploratory hypotheses"]
    assert count(1, "exploratory analysis") == "1 exploratory analysis"
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(PLAN, sort_keys=False))
    text = plan_summary(load_plan(path)[0])
    assert text == "1 confirmatory hypothesis, no exploratory hypotheses, 1 exploratory analysis"
    r = CliRunner().invoke(prereg_command, ["validate", str(path)])
    assert r.exit_code == 0 and text in r.output, r.output


def test_a_factor_moves_needs_two_levels():
    doc = copy.deepcopy(PLAN)
    doc["design"]["factors"][1]["levels"] = [0.2]
    doc["hypotheses"][0]["condition"]["eps_high"] = 0.2
    _, problems = validate_document(doc)
    assert any("design.factors[eps_high].moves" in p for p in problems), problems


@pytest.fixture(scope="module")
def clip_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("moves")  # under the system's temporary folder: in no git repository
    path = tmp / "plan.yaml"
    path.write_text(yaml.safe_dump(PLAN, sort_keys=False))
    prereg.lock(path)
    out = tmp / "results"
    # the code may differ from the lock in a working checkout; that deviation is recorded, not refused
    results = prereg.run_study(path, out, allow_code_change=True)
    return out, results


def test_a_factor_that_did_not_move_its_mechanism_is_flagged(clip_run):
    out, results = clip_run
    checks = {c["id"]: c for c in results["analysis"]["checks"]}
    clip = checks["eps_high.moves.clip_frac"]
    assert not clip["passed"] and clip["value"] == 0.0 and set(clip["level_means"]) == {"0.2", "0.3"}
    assert checks["prior_strength.moves.pass1"]["passed"]  # the prior does move accuracy
    h1 = results["analysis"]["hypotheses"][0]
    assert "the factor eps_high did not move clip_frac" in h1["reason"]
    report = (out / "report.md").read_text()
    assert "| eps_high.moves.clip_frac |" in report and "**NO**" in report
    assert "manipulation check eps_high.moves.clip_frac failed" in report  # a deviation from the plan


def test_integer_levels_print_as_integers(clip_run):
    out, _ = clip_run
    report = (out / "report.md").read_text()
    table = report[report.index("## Descriptive"):]
    rows = [ln.split(" | ")[0].lstrip("| ") for ln in table.splitlines() if ln.startswith("| ") and "frozen" in ln]
    assert rows and set(rows) == {"1", "2"}, rows
    assert "epochs=2, eps_high=0.2, prior_strength=0.8" in report


def test_strict_fails_when_the_plan_is_in_no_git_repository(clip_run):
    out, _ = clip_run
    r = CliRunner().invoke(prereg_command, ["report", str(out), "--strict"])
    assert r.exit_code == 1
    assert "commit not checked" in r.output and "not in a git repository" in r.output, r.output
