"""Claim study B6, a format-only reward against ground truth (arXiv 2505.19439): the committed run's gains split into
their habit and knowledge parts as decomposition.json records (the format-only gain is the habit's, ground truth's
is not only), and each region's recorded verdict is where its 90% interval lies against the 0.05 margin."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pandas as pd

from tabsim.prereg import claims

FOLDER = Path(__file__).resolve().parents[2] / "preregistration" / "claims" / "B6"


def _split():
    spec = importlib.util.spec_from_file_location("b6_decompose", FOLDER / "decompose.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.split


def test_the_format_only_gain_is_the_habit_and_the_record_holds_it():
    data = pd.read_parquet(FOLDER / "results" / "data.parquet")
    recorded = json.loads((FOLDER / "decomposition.json").read_text())
    split, last = _split(), int(data["step"].max())
    assert last == recorded["step"] == 20
    for ps, g in data.groupby("prior_strength", observed=True):
        parts = split(g, last)
        assert parts == recorded["by_prior_strength"][f"{float(ps):g}"]
        for p in parts.values():  # the means over prompts leave a small cross-prompt residual
            assert abs(p["residual"]) < 0.01
    by = recorded["by_prior_strength"]
    for ps in ("0.4", "0.8"):  # where the habit carries knowledge the format-only reward moves only the habit
        assert by[ps]["format"]["habit_share"] > 0.9
    assert by["0.8"]["truth"]["knowledge"] > 0.05  # ground truth also teaches within each style
    assert abs(by["0.15"]["format"]["gain"]) < 0.01  # no knowledge behind the habit: nothing to elicit


def test_recorded_verdicts_follow_their_intervals():
    run = claims.read_claim_run(claims.load_claim(FOLDER))
    assert run is not None, "B6: no complete confirmatory run"
    for r in run.verdict.regions:
        inside, outside = -0.05 < r.ci_low and r.ci_high < 0.05, r.ci_high <= -0.05 or r.ci_low >= 0.05
        assert r.claim == ("holds" if inside else "fails" if outside else "unsettled"), r
    assert [r.hypothesis for r in run.verdict.regions] == ["H1", "H2", "H3"]
    assert run.verdict.verdict == "DEPENDS"
