"""`tabsim compare` and `ts.compare`: a run folder's frame into score matrices per group, the tidy
outputs, and the refusals (synthetic run folders: no engine runs)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import tabsim as ts
from tabsim.cli import main
from tabsim.stats import aggregate as agg
from tabsim.studies.compare import CompareError

ESTIMATORS, PRIORS, SEEDS, ARMS = ["grpo", "dr_grpo", "rloo"], [0.2, 0.5, 0.8], 6, ["frozen", "random", "majority", "true"]


def _frame(seed: int = 0) -> pd.DataFrame:
    """A sweep's tidy frame: estimator x prior x seed x arm x step (0 and 10), pass1 random per run."""
    rng = np.random.default_rng(seed)
    idx = pd.MultiIndex.from_product([ESTIMATORS, PRIORS, range(SEEDS), ARMS, [0, 10]],
                                     names=["algo.estimator", "prior_strength", "seed", "arm", "step"])
    f = idx.to_frame(index=False)
    f["algo.estimator"] = pd.Categorical(f["algo.estimator"], categories=ESTIMATORS, ordered=True)
    f["arm"] = pd.Categorical(f["arm"], categories=ARMS)
    base = f["prior_strength"] + 0.05 * f["algo.estimator"].cat.codes + 0.1 * f["arm"].cat.codes
    f["pass1"] = (base + rng.normal(0, 0.05, len(f))).round(3)  # rounded: ties between groups
    f["reward_mean"] = np.where(f["step"] == 10, np.nan, 0.5)
    return f


@pytest.fixture
def run_dir(tmp_path):
    from tabsim.runtime.run import Result

    folder = tmp_path / "sweep"
    folder.mkdir()
    Result(frame=_frame(), config={"preset": "paper"}, provenance={}).write(folder, "csv")
    return folder


def _matrix(frame, level, arm="true", metric="pass1"):
    rows = frame[(frame["algo.estimator"] == level) & (frame["arm"] == arm) & (frame["step"] == 10)]
    return rows.pivot(index="seed", columns="prior_strength", values=metric).to_numpy()


def test_command_writes_the_aggregates_of_each_group(run_dir, tmp_path):
    out = tmp_path / "cmp"
    got = CliRunner().invoke(main, ["compare", str(run_dir), "--by", "algo.estimator", "--out", str(out), "--json",
                                    "--reps", "200"])
    assert got.exit_code == 0, got.output
    summary = json.loads(got.stdout)
    assert summary["groups"] == ESTIMATORS and summary["n_conditions"] == 3 and summary["n_seeds"] == SEEDS
    assert {p.name for p in out.iterdir()} >= {"compare.csv", "profile.csv", "scores.csv", "provenance.json",
                                               "profile.png"}
    table = pd.read_csv(out / "compare.csv", keep_default_na=False)
    frame = _frame()
    est = table.set_index(["statistic", "group", "versus"])["estimate"]
    for level in ESTIMATORS:
        m = _matrix(frame, level)
        assert est["mean", level, ""] == pytest.approx(agg.aggregate_mean(m))
        assert est["iqm", level, ""] == pytest.approx(agg.aggregate_iqm(m))
        assert est["optimality_gap", level, ""] == pytest.approx(1.0 - np.mean(np.minimum(m, 1.0)))
    assert est["probability_of_improvement", "rloo", "grpo"] == pytest.approx(
        agg.probability_of_improvement(_matrix(frame, "rloo"), _matrix(frame, "grpo")))
    assert (table["low"] <= table["estimate"] + 1e-12).all() and (table["estimate"] <= table["high"] + 1e-12).all()
    profile = pd.read_csv(out / "profile.csv")
    assert set(profile["group"]) == set(ESTIMATORS) and profile["fraction"].between(0, 1).all()


def test_partition_term_and_arms_as_groups(run_dir):
    frame = _frame()
    cmp = ts.compare(run_dir, by="algo.estimator", metric="d_rd", n_resamples=200)
    d_rd = _matrix(frame, "dr_grpo") - _matrix(frame, "dr_grpo", arm="majority")
    mean = cmp.frame.query("statistic == 'mean' and group == 'dr_grpo'")["estimate"].item()
    assert mean == pytest.approx(d_rd.mean())
    by_arm = ts.compare(frame, by="arm", n_resamples=200)
    assert by_arm.settings["groups"] == ARMS and by_arm.settings["n_conditions"] == len(ESTIMATORS) * len(PRIORS)
    assert isinstance(by_arm, ts.Comparison)


@pytest.mark.parametrize("args, message", [
    (["--by", "lr"], "by: 'lr' is not a swept field of the run; allowed: algo.estimator, prior_strength, arm"),
    (["--by", "algo.estimator", "--metric", "acc"], "metric: 'acc' is not a metric of the run; allowed: pass1"),
    (["--by", "algo.estimator", "--metric", "reward_mean"], "metric: 'reward_mean' has no value"),
    (["--by", "algo.estimator", "--arm", "noisy"], "arm: 'noisy' is not in the run; allowed: frozen, random"),
    (["--by", "algo.estimator", "--metric", "d_rd", "--arm", "true"], "arm: 'd_rd' is a partition term"),
    (["--by", "arm", "--metric", "d_elicit"], "metric: 'd_elicit' is a partition term"),
])
def test_bad_options_are_refused_in_one_line(run_dir, tmp_path, args, message):
    got = CliRunner().invoke(main, ["compare", str(run_dir), "--out", str(tmp_path / "o"), *args])
    assert got.exit_code == 1 and message in got.output, got.output
    assert not (tmp_path / "o").exists()


def test_groups_must_share_conditions_and_be_two(tmp_path):
    frame = _frame()
    ragged = frame[~((frame["algo.estimator"] == "rloo") & (frame["prior_strength"] == 0.8))]
    with pytest.raises(CompareError, match="group 'rloo' lacks some conditions"):
        ts.compare(ragged, by="algo.estimator")
    with pytest.raises(ValueError, match="has one level"):
        ts.compare(frame[frame["algo.estimator"] == "grpo"], by="algo.estimator")
    got = CliRunner().invoke(main, ["compare", str(tmp_path), "--by", "arm", "--out", str(tmp_path / "o")])
    assert got.exit_code == 1 and "not a run or sweep folder" in got.output
    got = CliRunner().invoke(main, ["compare", str(tmp_path), "--by", "arm", "--ci", "1.5"])
    assert got.exit_code == 2 and "--ci: 1.5 must be in (0, 1)" in got.output
