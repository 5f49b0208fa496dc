"""Tests of pre-registration: schema, normalised hashing, locks, tampering, amendments, run protocol, report."""
import copy
import json
import math

import numpy as np
import pytest
import yaml
from click.testing import CliRunner
from scipy import stats as sps

import tabsim as ts
from tabsim import prereg
from tabsim.cli.prereg import command as prereg_command
from tabsim.prereg import analysis, hashing, locking
from tabsim.prereg.schema import PreregError, validate_document

TINY = {
    "schema": "tabsim.prereg/1",
    "title": "Tiny study",
    "authors": ["tabsim tests"],
    "rationale": "A tiny design that compiles and runs in seconds.",
    "design": {
        "preset": "paper",
        "config": {"task": {"n_prompts": 4, "n_answers": 4, "n_correct": 1},
                   "train": {"batch_size": 4, "group_size": 4}},
        "seeds": 3,
        "first_seed": 100,
        "steps": 5,
        "factors": [
            {"name": "reward", "field": "arm", "levels": ["true", "majority"]},
            {"name": "prior_strength", "field": "prior_strength", "levels": [0.8, 0.35]},
        ],
        "checks": [{"id": "mode_ok", "metric": "mode_correct", "arm": "frozen", "condition": {"prior_strength": 0.8},
                    "reduce": "min", "op": "eq", "value": 1}],
    },
    "analysis": {"alpha": 0.05, "correction": "holm", "ci_method": "percentile", "n_resamples": 200,
                 "factorial": {"factors": ["reward", "prior_strength"]},
                 "thresholds": {"interaction_ratio": 0.2}},
    "stopping_rule": {"kind": "fixed", "description": "every seed runs; no interim looks"},
    "hypotheses": [
        {"id": "H1", "statement": "TRUE beats FROZEN at the strong prior", "estimand": "d_total",
         "condition": {"prior_strength": 0.8}, "prediction": "greater", "rule": {"ci_lower_gt": 0},
         "requires": ["mode_ok"]},
        {"id": "H2", "statement": "the reference's point rule", "estimand": "interaction_ratio",
         "prediction": "greater", "rule": {"point_gt": "interaction_ratio"}},
        {"id": "H3", "statement": "RANDOM does nothing", "estimand": "d_null", "condition": {"prior_strength": 0.35},
         "prediction": "equivalent", "rule": {"tost": {"margin": 0.05}}},
        {"id": "H4", "statement": "an exploratory sign", "kind": "exploratory", "estimand": "coefficient:AB",
         "prediction": "less", "rule": {"ci_upper_lt": 0}},
    ],
    "exploratory": [{"id": "E1", "estimand": "d_elicit", "condition": {"prior_strength": 0.35},
                     "description": "elicitation at the weak prior"}],
}

YAML_TEXT = """\
# a comment that must not change the hash
schema: tabsim.prereg/1
title: Tiny study
authors: [tabsim tests]
rationale: A tiny design that compiles and runs in seconds.
"""


def write_plan(tmp_path, doc=None, name="plan.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc or TINY, sort_keys=False))
    return path


def edit(path, fn):
    doc = yaml.safe_load(path.read_text())
    fn(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


# ----------------------------------------------------------------------------- schema


def test_tiny_plan_is_valid():
    plan, problems = validate_document(copy.deepcopy(TINY))
    assert problems == []
    assert [h.id for h in plan.confirmatory] == ["H1", "H2", "H3"]


def test_validate_reports_every_problem_naming_the_field():
    doc = copy.deepcopy(TINY)
    doc["hypotheses"][0]["condition"] = {"prior_strength": 0.5}       # not a level
    doc["hypotheses"][1]["rule"] = {"point_gt": "no_such_threshold"}
    doc["hypotheses"][2]["prediction"] = "greater"                     # tost decides 'equivalent'
    doc["hypotheses"][3]["estimand"] = "d_nul"
    doc["design"]["config"]["algo"] = {"lr": -1.0}
    doc["design"]["factors"].append({"name": "epochs", "field": "algo.nonsense", "levels": [1, 2]})
    _, problems = validate_document(doc)
    text = "\n".join(problems)
    for needle in ("hypotheses[H1].condition.prior_strength: level 0.5 is not among the factor's levels",
                   "hypotheses[H2].rule.point_gt: 'no_such_threshold' is not a number nor a name",
                   "hypotheses[H3].rule: tost decides a 'equivalent' prediction, but prediction is 'greater'",
                   "hypotheses[H4].estimand: unknown estimand 'd_nul'",
                   "design.config: algo.lr: Input should be greater than 0 (got -1.0)",
                   "design.factors[epochs].field: unknown field 'algo.nonsense'"):
        assert needle in text, text
    assert len(problems) >= 6


def test_schema_problems_name_fields_and_values():
    doc = copy.deepcopy(TINY)
    del doc["title"]
    doc["design"]["seeds"] = 1
    doc["analysis"]["alpha"] = 0.7
    doc["hypotheses"][0]["rule"] = {"ci_lower_gt": 0, "point_gt": 0}
    doc["design"]["factors"][0]["levels"] = [True, "majority"]
    _, problems = validate_document(doc)
    text = "\n".join(problems)
    assert "title: Field required" in text
    assert "design.seeds: Input should be greater than or equal to 2 (got 1)" in text
    assert "analysis.alpha: Input should be less than 0.5 (got 0.7)" in text
    assert "hypotheses[H1].rule: give exactly one rule" in text


def test_unquoted_true_arm_gets_a_hint():
    doc = copy.deepcopy(TINY)
    doc["design"]["factors"][0]["levels"] = [True, "majority"]
    _, problems = validate_document(doc)
    assert any("write 'true'" in p for p in problems), problems


def test_cli_validate_lists_problems(tmp_path):
    doc = copy.deepcopy(TINY)
    doc["hypotheses"][0]["condition"] = {}
    path = write_plan(tmp_path, doc)
    res = CliRunner().invoke(prereg_command, ["validate", str(path)])
    assert res.exit_code != 0
    assert "hypotheses[H1].condition: must fix a level of every other factor" in res.output
    ok = CliRunner().invoke(prereg_command, ["validate", str(write_plan(tmp_path, name="ok.yaml"))])
    assert ok.exit_code == 0 and "valid" in ok.output and "lock: none" in ok.output


# ----------------------------------------------------------------------------- hashing and locks


def test_hash_ignores_layout_and_comments_but_not_values(tmp_path):
    a = tmp_path / "a.yaml"
    b = tmp_path / "b.yaml"
    a.write_text(YAML_TEXT)
    # same content: keys reordered, flow style, other comments, 0.20 vs 0.2 style numbers
    b.write_text("rationale:   A tiny design that compiles and runs in seconds.\n"
                 "authors:\n  - tabsim tests   # inline comment\n"
                 "title: 'Tiny study'\nschema: tabsim.prereg/1\n")
    assert locking.document_hash(a) == locking.document_hash(b)
    b.write_text(b.read_text().replace("Tiny study", "Tiny study!"))
    assert locking.document_hash(a) != locking.document_hash(b)
    assert hashing.plan_hash({"x": 0.20}) == hashing.plan_hash({"x": 0.2})


def test_lock_records_hash_time_version_and_refuses_overwrite(tmp_path):
    path = write_plan(tmp_path)
    rec = prereg.lock(path)
    stored = json.loads(locking.lock_path(path).read_text())
    assert stored["sha256"] == locking.document_hash(path) == rec["sha256"]
    assert stored["tabsim_version"] and stored["locked_at_utc"].endswith("+00:00")
    assert "git_commit" in stored and stored["normalized"] == hashing.normalise(yaml.safe_load(path.read_text()))
    with pytest.raises(PreregError, match="already exists; a lock is never overwritten"):
        prereg.lock(path)
    assert json.loads(locking.lock_path(path).read_text()) == stored


def test_lock_refuses_an_invalid_plan(tmp_path):
    doc = copy.deepcopy(TINY)
    doc["design"]["seeds"] = 0
    path = write_plan(tmp_path, doc)
    with pytest.raises(PreregError, match=r"design\.seeds"):
        prereg.lock(path)
    assert not locking.lock_path(path).exists()


@pytest.mark.parametrize("change, field", [
    (lambda d: d["hypotheses"][0]["rule"].update(ci_lower_gt=0.01), "hypotheses[H1].rule.ci_lower_gt"),
    (lambda d: d["hypotheses"][2].update(statement="changed"), "hypotheses[H3].statement"),
    (lambda d: d["analysis"]["thresholds"].update(interaction_ratio=0.3), "analysis.thresholds.interaction_ratio"),
    (lambda d: d["design"].update(seeds=8), "design.seeds"),
    (lambda d: d["hypotheses"].pop(1), "hypotheses[H2] (removed)"),
])
def test_tampering_after_lock_refuses_confirmatory_run_naming_the_field(tmp_path, change, field):
    path = write_plan(tmp_path)
    prereg.lock(path)
    edit(path, change)
    out = tmp_path / "out"
    with pytest.raises(PreregError) as err:
        prereg.run_study(path, out)
    assert field in str(err.value) and "changed since the lock" in str(err.value)
    assert not (out / "status.json").exists()  # refused before anything ran
    res = CliRunner().invoke(prereg_command, ["run", str(path), "--out", str(out)])
    assert res.exit_code != 0 and field in res.output


def test_reordering_and_comments_after_lock_are_not_tampering(tmp_path):
    path = write_plan(tmp_path)
    prereg.lock(path)
    path.write_text("# reviewed\n" + yaml.safe_dump(yaml.safe_load(path.read_text()), sort_keys=True))
    assert prereg.verify(path)["sha256"] == json.loads(locking.lock_path(path).read_text())["sha256"]


def test_missing_lock_refuses(tmp_path):
    path = write_plan(tmp_path)
    with pytest.raises(PreregError, match="not locked"):
        prereg.run_study(path, tmp_path / "out")


@pytest.mark.parametrize("corrupt", [
    lambda t: "{ not json",
    lambda t: t.replace('"sha256": "', '"sha256": "0'),
    lambda t: t.replace('"seeds": 3', '"seeds": 4'),            # stored plan edited
    lambda t: t.replace('"locked_at_utc": "2', '"locked_at_utc": "1'),  # backdated
])
def test_corrupted_lock_is_detected(tmp_path, corrupt):
    path = write_plan(tmp_path)
    prereg.lock(path)
    lp = locking.lock_path(path)
    text = lp.read_text()
    new = corrupt(text)
    assert new != text
    lp.write_text(new)
    with pytest.raises(PreregError, match="corrupted lock"):
        prereg.verify(path)


def test_changed_fields_match_lists_by_id():
    old = {"hypotheses": [{"id": "H1", "rule": {"a": 1}}, {"id": "H2", "x": 1}], "design": {"seeds": 3}}
    new = {"hypotheses": [{"id": "H2", "x": 1}, {"id": "H1", "rule": {"a": 2}}, {"id": "H3"}], "design": {"seeds": 3}}
    assert locking.changed_fields(old, new) == ["hypotheses[H1].rule.a", "hypotheses[H3] (added)"]
    assert locking.changed_fields({"a": 1}, {"a": 1.0}) == []
    assert locking.changed_fields({"a": 1}, {"b": 1}) == ["a (removed)", "b (added)"]


# ----------------------------------------------------------------------------- analysis rules


def _estimate(x, method="t"):
    x = np.asarray(x, float)

    def ci(level):
        from tabsim import stats

        iv = stats.mean_interval(x, ci=level, method=method, n_resamples=400, random_state=0)
        return iv.low, iv.high

    return analysis.Estimate("d_null", {}, float(x.mean()), ci, method, x.size)


def test_rule_p_equals_the_t_test():
    rng = np.random.default_rng(3)
    x = rng.normal(0.02, 0.03, 12)
    est = _estimate(x)
    n, m, se = x.size, x.mean(), x.std(ddof=1) / math.sqrt(x.size)
    # ci_lower_gt 0: the (1 - p) two-sided t interval touches 0, so p = 2 * one-sided p-value
    p_one = sps.t.sf(m / se, n - 1)
    assert analysis.rule_p(est, (0.0, math.inf), "ci_lower_gt") == pytest.approx(2 * p_one, rel=1e-5)
    # TOST with margin d: p = max of the two one-sided tests
    d = 0.05
    p_tost = max(sps.t.sf((m + d) / se, n - 1), sps.t.cdf((m - d) / se, n - 1))
    assert analysis.rule_p(est, (-d, d), "tost") == pytest.approx(p_tost, rel=1e-5)
    # prediction in the wrong direction: never holds
    assert analysis.rule_p(est, (-math.inf, -0.5), "ci_upper_lt") == 1.0


def test_rule_p_with_a_bootstrap_is_consistent_with_the_interval():
    rng = np.random.default_rng(4)
    est = _estimate(rng.normal(0.01, 0.03, 16), method="percentile")
    p = analysis.rule_p(est, (0.0, math.inf), "ci_lower_gt")
    assert 0 < p < 1
    assert est.ci(1 - p * 1.01)[0] > 0 >= est.ci(1 - p * 0.99)[0]


def test_holm_matches_statsmodels():
    from statsmodels.stats.multitest import multipletests

    p = [0.01, 0.04, 0.03, 0.2]
    assert analysis.adjust(p, "holm") == pytest.approx(list(multipletests(p, method="holm")[1]))
    assert analysis.adjust(p, "none") == p


def _decided(plan_kind, lo, hi, est, p, p_adj, region, requires=(), passed=True):
    plan, _ = validate_document(copy.deepcopy(TINY))
    r = {"rule": {plan_kind: 0}, "region": list(region), "estimate": est, "ci_low": lo, "ci_high": hi,
         "ci_level": 0.95, "p_rule": p, "p_adjusted": p_adj, "family_size": 3, "requires": list(requires)}
    analysis._decide(plan, r, {"mode_ok": passed})
    return r["verdict"], r["reason"]


def test_verdict_trichotomy():
    region = (0.0, math.inf)
    assert _decided("ci_lower_gt", 0.01, 0.05, 0.03, 0.001, 0.003, region)[0] == "SUPPORTED"
    assert _decided("ci_lower_gt", -0.05, -0.01, -0.03, 1.0, 1.0, region)[0] == "NOT SUPPORTED"
    v, why = _decided("ci_lower_gt", -0.01, 0.05, 0.02, 0.2, 0.6, region)
    assert v == "INCONCLUSIVE" and "overlaps" in why
    v, why = _decided("ci_lower_gt", 0.001, 0.05, 0.02, 0.03, 0.09, region)
    assert v == "INCONCLUSIVE" and "before the correction but not after" in why
    v, why = _decided("ci_lower_gt", 0.01, 0.05, 0.03, 0.001, 0.003, region, requires=["mode_ok"], passed=False)
    assert v == "INCONCLUSIVE" and "mode_ok" in why
    assert _decided("point_gt", -1, 1, 0.3, None, None, (0.2, math.inf))[0] == "SUPPORTED"
    assert _decided("point_gt", 0.25, 1, 0.1, None, None, (0.2, math.inf))[0] == "NOT SUPPORTED"


# ----------------------------------------------------------------------------- runs


@pytest.fixture(scope="module")
def complete_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("complete")
    path = write_plan(tmp)
    prereg.lock(path)
    out = tmp / "results"
    results = prereg.run_study(path, out)
    return path, out, results


def test_complete_run_records_hash_and_reports_every_hypothesis(complete_run):
    path, out, results = complete_run
    status = json.loads((out / "status.json").read_text())
    lock = json.loads(locking.lock_path(path).read_text())
    assert status["state"] == "complete" and status["prereg_sha256"] == lock["sha256"]
    assert results["prereg"]["sha256"] == lock["sha256"]
    assert lock["locked_at_utc"] < results["started_utc"] < results["finished_utc"]
    rep = json.loads((out / "report.json").read_text())
    md = (out / "report.md").read_text()
    assert [h["id"] for h in rep["hypotheses"]] == ["H1", "H2", "H3", "H4"]
    for h in rep["hypotheses"]:
        assert h["verdict"] in ("SUPPORTED", "NOT SUPPORTED", "INCONCLUSIVE")
        assert h["ci_low"] <= h["estimate"] <= h["ci_high"] or h["estimand"] == "interaction_ratio"
        assert h["id"] in md and h["rule_text"] in md
    assert {h["id"]: h["label"] for h in rep["hypotheses"]}["H4"] == "EXPLORATORY"
    assert rep["exploratory"][0]["label"] == "EXPLORATORY" and "EXPLORATORY" in md
    assert rep["deviations"] == [] and "None: the run used the locked plan unchanged" in md
    assert rep["checks"][0]["passed"] is True


def test_estimates_match_the_data(complete_run):
    import pandas as pd

    _, out, results = complete_run
    frame = pd.read_parquet(out / "data.parquet")
    fin = frame[(frame["step"] == frame["step"].max()) & np.isclose(frame["prior_strength"], 0.8)]
    acc = fin.pivot_table(index="seed", columns="arm", values="pass1")
    h1 = results["analysis"]["hypotheses"][0]
    assert h1["estimate"] == pytest.approx((acc["true"] - acc["frozen"]).mean(), abs=1e-12)


def test_report_refuses_results_changed_after_completion(complete_run, tmp_path):
    import shutil

    _, out, _ = complete_run
    copy_dir = tmp_path / "copy"
    shutil.copytree(out, copy_dir)
    data = json.loads((copy_dir / "results.json").read_text())
    data["analysis"]["hypotheses"][0]["verdict"] = "SUPPORTED!"
    (copy_dir / "results.json").write_text(json.dumps(data))
    with pytest.raises(PreregError, match="changed after the run completed"):
        prereg.write_report(copy_dir)


def test_complete_run_is_not_overwritten(complete_run):
    from tabsim.runtime.store import OutputExistsError

    path, out, _ = complete_run
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    with pytest.raises(OutputExistsError, match="not empty .*--overwrite"):
        prereg.run_study(path, out)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


@pytest.mark.parametrize("where", ["training", "analysis"])
def test_interrupted_run_leaves_no_report_that_looks_complete(complete_run, tmp_path, monkeypatch, where):
    import shutil

    from tabsim.prereg import runner

    path, done, _ = complete_run
    # start from a folder holding an earlier complete run and its report
    out = tmp_path / "out"
    shutil.copytree(done, out)
    calls = {"n": 0}
    target, name = (runner, "run_design") if where == "training" else (runner, "analyse")
    real = getattr(target, name)

    def dying(*a, **k):
        calls["n"] += 1
        assert json.loads((staging_path(out) / "status.json").read_text())["state"] == "running"
        if where == "analysis":
            real(*a, **k)  # the data exist, the analysis is cut off
        raise KeyboardInterrupt("killed midway")

    from tabsim.runtime.store import staging_path

    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    monkeypatch.setattr(target, name, dying)
    with pytest.raises(KeyboardInterrupt):
        prereg.run_study(path, out, overwrite=True)
    assert calls["n"] == 1
    # the earlier complete run is untouched; the interrupted one stays in the hidden staging folder
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    stage = staging_path(out)
    status = json.loads((stage / "status.json").read_text())
    assert status["state"] == "failed" and "killed midway" in status["error"]
    for f in ("report.md", "report.json", "results.json"):
        assert not (stage / f).exists(), f
    assert (stage / "data.parquet").exists() == (where == "analysis")
    with pytest.raises(PreregError, match="not complete"):
        prereg.write_report(stage)
    res = CliRunner().invoke(prereg_command, ["report", str(stage)])
    assert res.exit_code != 0 and "not complete" in res.output


def test_killed_run_status_stays_running_and_report_refuses(tmp_path):
    # a hard kill cannot write 'failed': the status written first is what remains
    out = tmp_path / "out"
    out.mkdir()
    (out / "status.json").write_text(json.dumps({"state": "running", "started_utc": "2026-01-01T00:00:00+00:00"}))
    (out / "results.json").write_text("{}")
    with pytest.raises(PreregError, match="state 'running'"):
        prereg.write_report(out)


def test_amendment_lets_the_run_proceed_and_is_reported_as_deviation(complete_run, tmp_path):
    path = write_plan(tmp_path)
    prereg.lock(path)
    edit(path, lambda d: d["analysis"]["thresholds"].update(interaction_ratio=0.25))
    with pytest.raises(PreregError, match="reason"):
        prereg.amend(path, "  ")
    rec = prereg.amend(path, "the threshold was mistyped")
    assert rec["changed_fields"] == ["analysis.thresholds.interaction_ratio"]
    with pytest.raises(PreregError, match="nothing to amend"):
        prereg.amend(path, "again")
    out = tmp_path / "out"
    res = CliRunner().invoke(prereg_command, ["run", str(path), "--out", str(out), "-q"])
    assert res.exit_code == 0, res.output
    rep = json.loads((out / "report.json").read_text())
    (dev,) = rep["deviations"]
    assert dev["kind"] == "amendment" and dev["reason"] == "the threshold was mistyped"
    assert dev["changed_fields"] == ["analysis.thresholds.interaction_ratio"]
    md = (out / "report.md").read_text()
    assert "the threshold was mistyped" in md and "analysis.thresholds.interaction_ratio" in md
    # a further unrecorded change is refused again, naming the field changed since the amendment
    edit(path, lambda d: d["design"].update(seeds=4))
    with pytest.raises(PreregError, match=r"changed since amendment 1[\s\S]*design\.seeds"):
        prereg.verify(path)


def test_tampered_amendment_log_is_detected(tmp_path):
    path = write_plan(tmp_path)
    prereg.lock(path)
    edit(path, lambda d: d["design"].update(seeds=4))
    prereg.amend(path, "more seeds")
    ap = locking.amendments_path(path)
    ap.write_text(ap.read_text().replace("more seeds", "a different reason"))
    with pytest.raises(PreregError, match="amendment 1 was edited"):
        prereg.verify(path)


def test_exploratory_mode_runs_unlocked_and_says_so(complete_run, tmp_path):
    path = write_plan(tmp_path)
    out = tmp_path / "out"
    prereg.run_study(path, out, confirmatory=False)
    rep = json.loads((out / "report.json").read_text())
    assert rep["mode"] == "exploratory"
    assert all(h["label"] == "EXPLORATORY" for h in rep["hypotheses"])
    assert rep["deviations"][0]["kind"] == "unlocked run"
    assert rep["confirmatory_counts"] == {"SUPPORTED": 0, "NOT SUPPORTED": 0, "INCONCLUSIVE": 0}


def test_cli_run_says_each_phase_and_records_the_command_time(complete_run, tmp_path):
    """`tabsim prereg run` was silent but for its bar, and printed and recorded the time of the training and
    statistics alone (6.3 s against a clock's 10.0 s on the shipped clipping_null plan)."""
    import re
    import time

    from tabsim.base.host import started_at

    path = write_plan(tmp_path)
    since_start = time.perf_counter() - started_at()  # the command's clock starts with the process
    res = CliRunner().invoke(prereg_command, ["run", str(path), "--exploratory", "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    lines = [re.match(r"\[\s*([\d.]+)s\] (.*)", ln) for ln in res.stderr.splitlines()]
    lines = [(float(m.group(1)), m.group(2)) for m in lines if m]
    assert [t for t, _ in lines] == sorted(t for t, _ in lines)
    text = "\n".join(what for _, what in lines)
    for phase in ("tabsim prereg run: loading the engine", "loading the statistics", "checking the plan and the code",
                  "2 cells x 3 seeds x 2 arms, 5 steps: compiling, then training", "trained in",
                  "the statistics of 4 hypotheses and 1 exploratory analysis", "statistics done",
                  "writing report.md"):
        assert phase in text, (phase, res.stderr)
    printed = float(re.search(r"data\.parquet \(([\d.]+) s\)", res.stdout).group(1))
    results = json.loads((tmp_path / "o" / "results.json").read_text())
    assert since_start < results["wall_seconds"] <= printed + 0.05
    assert 0 < results["seconds_training"] < results["wall_seconds"]
    quiet = CliRunner().invoke(prereg_command, ["run", str(path), "--exploratory", "--out", str(tmp_path / "q"), "-q"])
    assert quiet.exit_code == 0 and quiet.stderr == "" and quiet.stdout == ""


def test_two_arm_design_with_a_static_factor_and_free_checks(tmp_path):
    doc = copy.deepcopy(TINY)
    doc["design"]["arms"] = ["frozen", "random"]
    doc["design"]["config"]["algo"] = {"surrogate": "clip", "lr": 2.0, "kl_placement": "none", "beta": 0.0}
    doc["design"]["factors"] = [
        {"name": "epochs", "field": "algo.epochs", "levels": [3, 1]},
        {"name": "prior_strength", "field": "prior_strength", "levels": [0.8, 0.35]},
    ]
    doc["design"]["checks"] = [
        {"id": "clip_inert", "metric": "clip_frac", "arm": "random", "condition": {"epochs": 1},
         "reduce": "max", "op": "eq", "value": 0},
        {"id": "clip_fires", "metric": "clip_frac", "arm": "random", "condition": {"epochs": 3},
         "reduce": "max", "op": "gt", "value": 0}]
    doc["analysis"] = {"ci_method": "t", "thresholds": {"m": 0.05}}
    doc["hypotheses"] = [
        {"id": "N1", "statement": "no reuse, no drift", "estimand": "d_null", "requires": ["clip_inert"],
         "condition": {"epochs": 1, "prior_strength": 0.8}, "prediction": "equivalent",
         "rule": {"tost": {"margin": "m"}}},
        {"id": "N2", "statement": "reuse drifts", "estimand": "d_null", "requires": ["clip_fires"],
         "condition": {"epochs": 3, "prior_strength": 0.8}, "prediction": "greater", "rule": {"ci_lower_gt": 0}}]
    doc["exploratory"] = []
    path = write_plan(tmp_path, doc)
    bad = copy.deepcopy(doc)
    bad["hypotheses"][0]["estimand"] = "d_elicit"  # needs the majority arm
    assert any("d_elicit needs the arms ['random', 'majority']" in p for p in validate_document(bad)[1])
    prereg.lock(path)
    results = prereg.run_study(path, tmp_path / "out")
    checks = {c["id"]: c for c in results["analysis"]["checks"]}
    assert checks["clip_inert"]["passed"] and checks["clip_fires"]["passed"], checks
    import pandas as pd

    frame = pd.read_parquet(tmp_path / "out" / "data.parquet")
    assert sorted(frame["epochs"].unique().tolist()) == [1, 3]
    fin = frame[(frame["step"] == frame["step"].max()) & (frame["epochs"] == 1)
                & np.isclose(frame["prior_strength"], 0.8)]
    acc = fin.pivot_table(index="seed", columns="arm", values="pass1")
    n1 = results["analysis"]["hypotheses"][0]
    assert n1["estimate"] == pytest.approx((acc["random"] - acc["frozen"]).mean(), abs=1e-12)
    # the t interval of the plan: mean -/+ t_{n-1, 0.95} s / sqrt(n) for TOST (90% level)
    d = (acc["random"] - acc["frozen"]).to_numpy()
    half = sps.t.ppf(0.95, d.size - 1) * d.std(ddof=1) / math.sqrt(d.size)
    assert (n1["ci_low"], n1["ci_high"]) == pytest.approx((d.mean() - half, d.mean() + half), abs=1e-9)


def test_factorial_runner_equals_one_run_per_cell(complete_run):
    """The confirmatory frame (one compiled program per static combination, factors vmapped) equals
    one plain ``ts.run`` per cell of the design, built here on its own."""
    import pandas as pd

    from tabsim.prereg.schema import classify_field, design_runs, load_plan

    path, out, _ = complete_run
    plan, _ = load_plan(path)
    parts = []
    for levels, cfg in design_runs(plan):
        part = ts.run(cfg).frame.copy()
        for f in plan.design.factors:
            kind, target = classify_field(f.field)
            if kind == "static":
                part[f.name] = levels[f.name]
            elif kind == "sweep" and f.name != target:
                part[f.name] = part[target]
        parts.append(part)
    frame = pd.concat(parts, ignore_index=True)
    frame["arm"] = frame["arm"].astype(str)
    frame["reward"] = frame["arm"]  # the plan's arm factor is named "reward"
    saved = pd.read_parquet(out / "data.parquet")
    keys = ["prior_strength", "seed", "arm", "step"]
    both = saved.merge(frame, on=keys, suffixes=("_a", "_b"))
    assert len(both) == len(saved) == len(frame)
    assert (both["reward_a"].astype(str) == both["reward_b"].astype(str)).all()
    # the same program on the same seeds: equal up to float32 rounding of differently batched vmaps
    np.testing.assert_allclose(both["pass1_a"], both["pass1_b"], rtol=0, atol=1e-6)


def test_cli_registers_prereg():
    from tabsim.cli import main

    assert main.get_command(None, "prereg") is prereg_command
    assert set(prereg_command.commands) == {"validate", "lock", "amend", "run", "report", "keygen"}


@pytest.mark.parametrize("study", ["reference_factorial", "clipping_null"])
def test_shipped_studies_were_locked_before_their_results(study):
    from pathlib import Path

    from tabsim.prereg.report import assess, build_report, load_run

    root = Path(__file__).resolve().parents[2] / "preregistration" / study
    plan = root / "plan.yaml"
    record = prereg.verify(plan)  # the plan matches its lock (raises naming fields otherwise)
    results, status = load_run(root / "results")  # complete, files unaltered since completion
    assert results["mode"] == "confirmatory"
    assert results["prereg"]["sha256"] == record["sha256"] == record["lock"]["sha256"]
    assert record["lock"]["locked_at_utc"] < results["started_utc"]
    # the shipped report is what the results give, and covers every hypothesis of the plan
    rep = json.loads((root / "results" / "report.json").read_text())
    assert rep == json.loads(json.dumps(build_report(results, assess(results, status, root / "results"))))
    plan_ids = [h["id"] for h in yaml.safe_load(plan.read_text())["hypotheses"]]
    assert [h["id"] for h in rep["hypotheses"]] == plan_ids
    assert all(h["verdict"] in ("SUPPORTED", "NOT SUPPORTED", "INCONCLUSIVE") for h in rep["hypotheses"])


def test_plan_text_cannot_break_the_report_tables(complete_run):
    """A ``|`` or a line break in a plan's text (a description, an id) stays inside its table cell."""
    import re

    from tabsim.prereg.report import build_report, render_markdown

    _, out, _ = complete_run
    results = json.loads((out / "results.json").read_text())
    results["analysis"]["exploratory"][0]["description"] = "a | b\nc"
    text = render_markdown(build_report(results))
    table = [ln for ln in text.splitlines() if ln.startswith("| E1 ")]
    assert len(table) == 1
    header = next(ln for ln in text.splitlines() if ln.startswith("| id | estimand | condition | estimate | interval | desc"))
    cells = lambda ln: len(re.split(r"(?<!\\)\|", ln))  # noqa: E731
    assert cells(table[0]) == cells(header) and "a \\| b c" in table[0]
