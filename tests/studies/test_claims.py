"""Published claims as pre-registered studies (tabsim.prereg.claims, `tabsim claims`).

Every claim study's reduced version runs here end to end, in one command (a compiled program per static
cell, about 2-4 s of CPU a study; every reduced plan is checked to be its design at a small size); the
full designs rerun are behind `heavy`. The verdict logic is checked on hand-made analyses, and the
docs page is checked to be what the generator writes from the committed runs.
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from tabsim.cli import main
from tabsim.prereg import claims
from tabsim.prereg.errors import PreregError

from reduced_runs import reduced_ids, run_reduced

REPO = Path(__file__).resolve().parents[2]
ROOT = REPO / "preregistration" / "claims"
PAGE = REPO / "docs" / "claims.md"


def _analysis(*rows):
    return {"hypotheses": [{"id": hid, "verdict": verdict, "estimate": est, "ci_low": lo, "ci_high": hi}
                           for hid, verdict, est, lo, hi in rows]}


def _claim(bearing):
    base = claims.load_claim(ROOT / "B17")
    return base.model_copy(update={"bearing": {k: claims.catalog.Bearing(region=k, if_supported=v)
                                               for k, v in bearing.items()}})


@pytest.mark.parametrize("verdicts, bearing, expected, holds, fails", [
    (("SUPPORTED", "SUPPORTED"), ("holds", "holds"), "SUPPORTED", ["H1", "H2"], []),
    (("SUPPORTED", "NOT SUPPORTED"), ("fails", "holds"), "NOT SUPPORTED", [], ["H1", "H2"]),
    (("SUPPORTED", "SUPPORTED"), ("holds", "fails"), "DEPENDS", ["H1"], ["H2"]),
    (("INCONCLUSIVE", "INCONCLUSIVE"), ("holds", "holds"), "INCONCLUSIVE", [], []),
    (("INCONCLUSIVE", "NOT SUPPORTED"), ("fails", "fails"), "SUPPORTED", ["H2"], []),
])
def test_claim_verdict_from_hypotheses(verdicts, bearing, expected, holds, fails):
    claim = _claim(dict(zip(("H1", "H2"), bearing)))
    v = claims.claim_verdict(claim, _analysis(("H1", verdicts[0], 0.01, 0.005, 0.015),
                                              ("H2", verdicts[1], -0.02, -0.03, -0.01)))
    assert v.verdict == expected and v.where("holds") == holds and v.where("fails") == fails
    # an unsettled region is named, so the verdict says no more than its intervals
    assert [r.region for r in v.regions if r.claim == "unsettled"] == \
        [h for h, x in zip(("H1", "H2"), verdicts) if x == "INCONCLUSIVE"]


def test_headline_scale_turns_a_coefficient_into_a_difference():
    analysis = _analysis(("H1", "SUPPORTED", 0.01, 0.004, 0.016))
    analysis["hypotheses"][0]["region"] = [0.01, float("inf")]  # the rule ci_lower_gt: 0.01
    v = claims.claim_verdict(_claim({"H1": "holds"}), analysis)
    assert claims.load_claim(ROOT / "B17").headline.scale == 2.0
    r = v.regions[0]
    assert (r.estimate, r.ci_low, r.ci_high) == pytest.approx((0.02, 0.008, 0.032))
    assert r.predicted == "> +0.0200"


def test_a_tost_interval_is_labelled_with_its_level():
    """A TOST rule is judged on the 1 - 2 alpha interval: the page and summary say 90%, not the column's 95%."""
    analysis = _analysis(("H1", "SUPPORTED", 0.001, -0.004, 0.006), ("H2", "SUPPORTED", 0.02, 0.01, 0.03))
    analysis["hypotheses"][0]["ci_level"] = 0.9
    run = claims.ClaimRun(_claim({"H1": "holds", "H2": "holds"}), {}, ROOT, claims.claim_verdict(
        _claim({"H1": "holds", "H2": "holds"}), analysis), None, False)
    assert [r.level for r in run.verdict.regions] == [0.9, 0.95]
    assert "[-0.0080, +0.0120] (90%) |" in claims.page.claim_section(run, "x.png")
    assert claims.summary_table([run])["tabsim_estimate"][0] == \
        "H1: +0.002 [-0.008, +0.012] (90%); H2: +0.040 [+0.020, +0.060]"


def test_paired_estimates_are_the_seeds_differences():
    """Every recorded paired: estimate (B7, B12, ...) recomputed from its study's data with NumPy and scipy's t: the
    mean of the seeds' differences between the two named cells, with the one-sample t interval at its level."""
    from scipy import stats as sps

    from tabsim.prereg.schema import load_plan, paired_levels

    checked = 0
    for c in claims.load_claims(ROOT):
        rec = claims.read_claim_run(c, verify=False)
        if rec is None:
            continue
        plan, _ = load_plan(c.plan_path)
        data = rec.data()
        final = data[data["step"] == data["step"].max()]
        analysis = rec.results["analysis"]
        for h in analysis["hypotheses"] + analysis["exploratory"]:
            if not h["estimand"].startswith("paired:"):
                continue
            factor, (a, b), _ = paired_levels(plan, h["estimand"])
            rows = final
            for key, level in h["condition"].items():
                rows = rows[rows[key].astype(str) == str(level)] if isinstance(level, str) else \
                    rows[np.isclose(rows[key], level)]
            # a level by value (a numeric factor's column is float: epochs 4 is 4.0), the plan's metric
            numeric = rows[factor].dtype.kind in "fi"
            same = (lambda lv: np.isclose(rows[factor], float(lv))) if numeric else \
                (lambda lv: rows[factor].astype(str) == lv)
            by = {lv: rows[same(lv)].set_index("seed")[plan.analysis.metric] for lv in (a, b)}
            d = (by[a] - by[b]).dropna().to_numpy()
            half = sps.t.ppf(0.5 + h["ci_level"] / 2, d.size - 1) * d.std(ddof=1) / np.sqrt(d.size)
            assert h["estimate"] == pytest.approx(d.mean(), abs=1e-12), (c.id, h["id"])
            assert (h["ci_low"], h["ci_high"]) == pytest.approx((d.mean() - half, d.mean() + half), abs=1e-9)
            checked += 1
    assert checked >= 12  # B12's nine and B7's three confirmatory ones at least


def test_bearing_on_a_missing_hypothesis_is_refused():
    with pytest.raises(PreregError, match="bearing names hypothesis 'H9'"):
        claims.claim_verdict(_claim({"H9": "holds"}), _analysis(("H1", "SUPPORTED", 0.0, 0.0, 0.0)))


def test_a_bad_claim_file_is_refused_in_one_line(tmp_path):
    folder = tmp_path / "claims" / "B17"
    folder.mkdir(parents=True)
    text = (ROOT / "B17" / "claim.yaml").read_text().replace('arxiv: "2508.05928"', 'arxiv: "soon"')
    (folder / "claim.yaml").write_text(text)
    (folder / "plan.yaml").write_text((ROOT / "B17" / "plan.yaml").read_text())
    r = CliRunner().invoke(main, ["claims", "--root", str(folder.parent)])
    assert r.exit_code == 1 and "Traceback" not in r.output
    (line,) = r.output.strip().splitlines()
    assert "claim.yaml: paper.arxiv" in line and "'soon'" in line and r"\d{4}" in line


def test_an_unknown_claim_id_names_the_allowed_ones(tmp_path):
    r = CliRunner().invoke(main, ["claims", "--root", str(ROOT), "run", "B99", "--quick", "--out", str(tmp_path)])
    assert r.exit_code == 1 and "claim 'B99'" in r.output and "B11" in r.output and "B17" in r.output


def _flow_run(claim_id: str, rows: list[dict]) -> claims.ClaimRun:
    c = claims.load_claim(ROOT / claim_id)
    verdict = claims.claim_verdict(c, _analysis(*((h, "INCONCLUSIVE", 0.0, -1.0, 1.0) for h in c.bearing)))
    flow = pd.DataFrame(rows).assign(seed=-1, step=200)
    return claims.ClaimRun(c, {}, ROOT / claim_id / "results", verdict, flow, False)


def test_each_hypothesis_is_read_on_the_exact_expected_flow():
    """The region table gives each hypothesis's estimand on the exact expected flow beside the seeds' estimate."""
    priors = (0.05, 0.2, 0.5, 0.8)
    rows = [{"prior_strength": p, "estimator": e, "arm": a,
             "pass1": p if a == "frozen" else 0.1 + p - (0.01 * (i + 1) if e == "grpo" else 0.0)}
            for i, p in enumerate(priors) for e in ("sign", "grpo") for a in ("frozen", "true")]
    run = _flow_run("B11", rows)
    exact = claims.expected_estimates(run)  # sign minus grpo on the TRUE arm: 0.01, 0.02, 0.03, 0.04
    assert exact == pytest.approx({"H1": 0.01, "H2": 0.02, "H3": 0.03, "H4": 0.04}, abs=1e-9)
    section = claims.page.claim_section(run, "B11.png")
    header = next(line for line in section.splitlines() if line.startswith("| hypothesis |"))
    assert claims.page.EXACT in header
    assert "| H3 | p_s 0.50 | +0.0000 | [-2.0000, +2.0000] | +0.0300 |" in section
    # a flow without one of the design's factors gives no column rather than a wrong number
    assert claims.expected_estimates(_flow_run("B11", [{k: v for k, v in r.items() if k != "estimator"}
                                                       for r in rows])) == {}


def test_the_flow_beside_the_seeds_matches_a_factor_named_apart_from_its_field():
    """A claim whose varied field has a factor of another name (B32: `advantage` for algo.estimator): the seeds'
    data carry the factor's column, the flow the field's; each cell's seed mean sits beside its flow value."""
    run = _flow_run("B32", [{"prior_strength": p, "estimator": e, "arm": a, "pass1": p + (0.01 if e == "ngrpo" else 0.0)}
                            for p in (0.05, 0.2, 0.5) for e in ("ngrpo", "grpo") for a in ("frozen", "true")])
    run = dataclasses.replace(run, claim=run.claim.model_copy(update={"expected": claims.catalog.Expected(
        vary={"algo.estimator": ["ngrpo", "grpo"]})}))
    both = claims.expected_beside(run)  # a KeyError ('estimator') when matched by the field's name
    assert len(both) == 12 and "advantage" in both
    data = run.data()
    final = data[(data["step"] == data["step"].max()) & (data["advantage"] == "grpo") & (data["arm"] == "true")]
    row = both[(both["advantage"] == "grpo") & (both["arm"] == "true") & (both["prior_strength"] == 0.2)].iloc[0]
    assert row["monte_carlo"] == pytest.approx(final[final["prior_strength"] == 0.2]["pass1"].mean(), abs=1e-12)
    assert row["expected"] == pytest.approx(0.2, abs=1e-12)
    assert claims.expected_estimates(run) == pytest.approx({"H1": 0.01, "H2": 0.01}, abs=1e-9)


def test_every_claim_study_is_complete_and_listed():
    studies = claims.load_claims(ROOT)
    assert len(studies) >= 2
    r = CliRunner().invoke(main, ["claims", "--root", str(ROOT)])
    assert r.exit_code == 0, r.output
    for c in studies:
        assert (c.folder / "plan.yaml.lock.json").is_file(), f"{c.id}: a claim study is locked before it runs"
        assert c.id in r.output
    for w in claims.load_waiting(ROOT):
        assert f"{w.id} " in r.output and w.waits_for in r.output


def test_every_reduced_plan_is_the_design_at_its_small_size():
    """The reduced version of each study is its plan with the claim's seeds and steps, and nothing else."""
    from tabsim.prereg.schema import read_document, validate_document

    for c in claims.load_claims(ROOT):
        doc, full = claims.quick_document(c), read_document(c.plan_path)
        plan, problems = validate_document(doc)
        assert not problems, problems
        assert (plan.design.seeds, plan.design.steps) == (c.quick.seeds, c.quick.steps)
        assert {k: v for k, v in doc["design"].items() if k not in ("seeds", "steps")} == \
            {k: v for k, v in full["design"].items() if k not in ("seeds", "steps")}
        assert doc["hypotheses"] == full["hypotheses"] and doc["analysis"] == full["analysis"]


def test_every_reduced_version_runs(tmp_path):
    """`tabsim claims run --quick` of every study on the bandit, in one command (one process, so studies whose
    static cells coincide share their compiled programs): a verdict, a summary row and a figure each. The tree
    studies run in tests/studies/test_claims_reduced_tree.py, so the suite's two workers share the work."""
    run_reduced(tmp_path, reduced_ids(tree=False))


def test_the_two_reduced_commands_cover_every_study():
    """Between them, the bandit and the tree commands run each study once."""
    bandit, tree = reduced_ids(tree=False), reduced_ids(tree=True)
    assert bandit and tree and not set(bandit) & set(tree)
    assert sorted(bandit + tree) == sorted(c.id for c in claims.load_claims(ROOT))


def test_docs_page_is_written_from_the_runs(tmp_path):
    """docs/claims.md is the generator's output from the committed confirmatory runs, not typed by hand."""
    runs = [r for r in (claims.read_claim_run(c) for c in claims.load_claims(ROOT)) if r is not None]
    assert runs, "no confirmatory claim run is committed"
    page = tmp_path / "claims.md"
    claims.write_page(runs, claims.load_waiting(ROOT), page, draw=False)
    assert PAGE.read_text() == page.read_text()
    for r in runs:
        assert (REPO / "docs" / "assets" / "claims" / f"{r.claim.id}.png").is_file()
        if r.claim.expected is not None:  # the exact expected update beside the Monte-Carlo mean
            both = claims.expected_beside(r)
            assert both is not None and len(both) > 0 and both["expected"].notna().all()
            # and every region's estimand on the flow, beside the seeds' estimate
            exact = claims.expected_estimates(r)
            assert sorted(exact) == sorted(r.claim.bearing) and all(map(math.isfinite, exact.values()))


@pytest.mark.heavy
def test_confirmatory_runs_reproduce(tmp_path):
    """Each full design rerun (exploratory, into a temporary folder) gives the recorded analysis."""
    from tabsim.prereg.runner import run_study

    for c in claims.load_claims(ROOT):
        rec = claims.read_claim_run(c)
        if rec is None:
            continue
        fresh = run_study(c.plan_path, tmp_path / c.id, confirmatory=False)
        for a, b in zip(rec.results["analysis"]["hypotheses"], fresh["analysis"]["hypotheses"]):
            assert a["verdict"] == b["verdict"] and a["estimate"] == pytest.approx(b["estimate"], abs=1e-6)
