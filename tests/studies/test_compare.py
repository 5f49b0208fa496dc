"""`tabsim compare` and `ts.compare`: a run folder's frame into score matrices per group, the tidy
outputs, and the refusals (synthetic run folders: no engine runs)."""
from __future__ import annotations

import json
import os
import re

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
    f["pass1"] = (base + rng.normal(0, 0.05, len(f))).round(3).clip(0, 1)  # rounded: ties between groups
    f["reward_mean"] = np.where(f["step"] == 10, np.nan, 0.5)
    return f


@pytest.fixture
def run_dir(tmp_path):
    from tabsim.runtime.run import Result

    folder = tmp_path / "sweep"
    Result(frame=_frame(), config={"preset": "paper"}, provenance={}).save(folder, "csv")
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
    assert summary["groups"] == ESTIMATORS and summary["n_conditions"] == 3
    assert summary["n_seeds"] == dict.fromkeys(ESTIMATORS, SEEDS)
    assert {p.name for p in out.iterdir()} >= {"compare.csv", "profile.csv", "scores.csv", "curves.csv",
                                               "provenance.json", "profile.png", "intervals.png", "improvement.png",
                                               "curves.png"}
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
    (tmp_path / "empty").mkdir()
    got = CliRunner().invoke(main, ["compare", str(tmp_path / "empty"), "--by", "arm", "--out", str(tmp_path / "o")])
    assert got.exit_code == 1 and "not a folder published by tabsim" in got.output
    got = CliRunner().invoke(main, ["compare", str(tmp_path), "--by", "arm", "--ci", "1.5"])
    assert got.exit_code == 2 and "--ci: 1.5 must be in (0, 1)" in got.output


def _published(tmp_path, frame, name="run"):
    from tabsim.runtime.run import Result

    Result(frame=frame, config={"preset": "paper"}, provenance={}).save(tmp_path / name)
    return tmp_path / name


def _one_line_error(got, code=1):
    lines = got.output.strip().splitlines()
    assert got.exit_code == code and len(lines) == 1 and lines[0].startswith("Error: "), got.output
    return lines[0]


def test_levels_that_print_alike_stay_distinct_groups(tmp_path):
    """A sweep over prior_strength=0.3000001,0.3000002,0.5 compared as two groups: keyed by ``f"{v:g}"``."""
    frame = _frame()
    frame["prior_strength"] = frame["prior_strength"].map({0.2: 0.3000001, 0.5: 0.3000002, 0.8: 0.5})
    cmp = ts.compare(frame, by="prior_strength", n_resamples=100)
    assert cmp.settings["groups"] == ["0.3000001", "0.3000002", "0.5"]
    means = cmp.frame.query("statistic == 'mean'").set_index("group")["estimate"]
    for value, label in [(0.3000001, "0.3000001"), (0.3000002, "0.3000002")]:
        rows = frame[(frame["prior_strength"] == value) & (frame["arm"] == "true") & (frame["step"] == 10)]
        m = rows.pivot(index="seed", columns="algo.estimator", values="pass1").to_numpy()
        assert means[label] == pytest.approx(agg.aggregate_mean(m))
    assert set(cmp.scores["group"]) == set(cmp.settings["groups"])
    # conditions too are keyed by value: two priors that print alike are two conditions
    by_est = ts.compare(frame, by="algo.estimator", n_resamples=100)
    assert by_est.settings["n_conditions"] == 3


def test_labels_print_more_digits_only_where_needed():
    from tabsim.studies.compare import labels

    assert list(labels([0.2, 1.0, 1e-3]).values()) == ["0.2", "1", "0.001"]
    assert list(labels([0.3000001, 0.3000002]).values()) == ["0.3000001", "0.3000002"]
    x = 0.1 + 0.2
    assert len(set(labels([x, 0.3]).values())) == 2  # 17 digits where 16 print alike
    assert list(labels(["grpo", "rloo"]).values()) == ["grpo", "rloo"]


def test_a_changed_published_run_is_refused_naming_the_file(run_dir, tmp_path):
    """compare read a results file that `tabsim verify` reported as changed and published its numbers."""
    table = run_dir / "results.csv"
    table.write_text(table.read_text().replace("0.5", "0.9", 1))
    with pytest.raises(CompareError, match=r"differs from the run published .*: changed results.csv"):
        ts.compare(run_dir, by="algo.estimator", n_resamples=100)
    got = CliRunner().invoke(main, ["compare", str(run_dir), "--by", "algo.estimator", "--out", str(tmp_path / "o")])
    assert "changed results.csv" in _one_line_error(got) and not (tmp_path / "o").exists()
    (run_dir / "results.csv").unlink()
    got = CliRunner().invoke(main, ["compare", str(run_dir), "--by", "algo.estimator", "--out", str(tmp_path / "o")])
    assert "missing results.csv" in _one_line_error(got)


def _garbage(folder):
    (folder / "results.parquet").write_bytes(b"not parquet at all")


def _empty(folder):
    (folder / "results.parquet").write_bytes(b"")


def _no_rows(folder):
    pd.read_parquet(folder / "results.parquet").iloc[:0].to_parquet(folder / "results.parquet")


def _bad_config(folder):
    (folder / "config.json").write_text("{")


def _list_provenance(folder):
    (folder / "provenance.json").write_text("[1, 2]")


def _no_provenance(folder):
    (folder / "provenance.json").unlink()


def _drop(column):
    def edit(folder):
        pd.read_parquet(folder / "results.parquet").drop(columns=[column]).to_parquet(folder / "results.parquet")
    return edit


@pytest.mark.parametrize("edit, says", [
    (_garbage, "results.parquet: not a readable results table"),
    (_empty, "results.parquet: not a readable results table"),
    (_no_rows, "results.parquet: holds no rows"),
    (_bad_config, "config.json is unreadable (JSONDecodeError)"),
    (_list_provenance, "provenance.json is not a JSON object"),
    (_no_provenance, "no provenance.json"),
    (_drop("seed"), "results.parquet: no seed column"),
    (_drop("step"), "results.parquet: no step column"),
    (_drop("arm"), "results.parquet: no arm column"),
])
def test_a_corrupt_or_incomplete_folder_is_refused_in_one_line(tmp_path, edit, says):
    """Each of these was a traceback (ArrowInvalid, JSONDecodeError, KeyError, ...)."""
    from tabsim.runtime.loading import ResultFolderError
    from tabsim.runtime.manifest import MARKER

    folder = _published(tmp_path, _frame())
    edit(folder)
    with pytest.raises(ResultFolderError, match=r"differs from the run published"):  # verify's check comes first
        ts.Result.load(folder)
    with pytest.raises(ResultFolderError, match=re.escape(says)):
        ts.Result.load(folder, verify=False)
    (folder / MARKER).unlink()  # no manifest: not a published folder; the command refuses it in one line
    got = CliRunner().invoke(main, ["compare", str(folder), "--by", "algo.estimator", "--out", str(tmp_path / "o")])
    assert "not a folder published by tabsim" in _one_line_error(got)


def test_a_frame_without_its_key_columns_and_a_by_that_is_a_metric_are_refused():
    """``--by pass1`` ended in pandas' "truth value of a Series is ambiguous"."""
    with pytest.raises(CompareError, match=r"by: 'pass1' is not a swept field of the run; allowed: algo.estimator, "
                                           r"prior_strength, arm"):
        ts.compare(_frame(), by="pass1")
    with pytest.raises(CompareError, match="source: the frame has no step column"):
        ts.compare(_frame().drop(columns="step"), by="algo.estimator")
    with pytest.raises(CompareError, match="1 run.s. appear more than once"):
        ts.compare(pd.concat([_frame(), _frame().iloc[-2:]]), by="algo.estimator")


def test_by_a_metric_is_refused_in_one_line(run_dir, tmp_path):
    got = CliRunner().invoke(main, ["compare", str(run_dir), "--by", "pass1", "--out", str(tmp_path / "o")])
    assert "by: 'pass1' is not a swept field of the run" in _one_line_error(got)


def test_resamples_are_bounded_and_their_progress_said(run_dir, tmp_path, monkeypatch):
    """``--reps 1000000000`` ran with no bound and no word."""
    from tabsim.cli import compare as cli_compare
    from tabsim.studies import compare as C

    assert (cli_compare.MIN_RESAMPLES, cli_compare.MAX_RESAMPLES) == (C.MIN_RESAMPLES, C.MAX_RESAMPLES)
    got = CliRunner().invoke(main, ["compare", str(run_dir), "--by", "arm", "--reps", "1000000000"])
    assert got.exit_code == 2 and "--reps: 1000000000 must be an integer in [100, 100000]" in got.output
    with pytest.raises(CompareError, match=r"n_resamples: 100001 must be an integer in \[100, 100000\]"):
        ts.compare(run_dir, by="arm", n_resamples=100_001)
    monkeypatch.setattr(C, "MAX_RESAMPLE_BYTES", 16 * 18 * 150)  # 18 runs a group: 150 resamples fit
    with pytest.raises(CompareError, match="n_resamples: 200 resamples of 18 runs a group would hold .* at most 150"):
        ts.compare(run_dir, by="algo.estimator", n_resamples=200)
    monkeypatch.undo()
    monkeypatch.setattr(C, "PROGRESS_SECONDS", 0.0)  # every statistic's line, as a long resampling says them
    lines = []
    ts.compare(run_dir, by="algo.estimator", n_resamples=100, log=lines.append)
    assert lines[0] == "resampling: 100 resamples of 3 groups and 6 pairs, IQM at 2 steps"
    assert re.fullmatch(r"resampling: 2 of 14 statistics done in \d+ s; about \d+ s left", lines[1])
    assert len(lines) == 13  # after each statistic (the curves' steps counted) but the first and the last


def test_groups_with_unequal_seeds_report_their_own_n(tmp_path):
    """Groups of 6 and 3 seeds were both reported as 6; each is resampled on its own."""
    frame = _frame()
    fewer = frame[~((frame["algo.estimator"] == "rloo") & (frame["seed"] >= 3))]
    cmp = ts.compare(fewer, by="algo.estimator", n_resamples=200)
    assert cmp.settings["n_seeds"] == {"grpo": SEEDS, "dr_grpo": SEEDS, "rloo": 3}
    rows = cmp.frame.set_index(["statistic", "group", "versus"])
    assert rows.loc[("mean", "rloo", ""), "n_seeds"] == 3 and rows.loc[("mean", "grpo", ""), "n_seeds"] == SEEDS
    poi = rows.loc[("probability_of_improvement", "grpo", "rloo")]
    assert (poi["n_seeds"], poi["n_seeds_versus"]) == (SEEDS, 3)
    m = _matrix(fewer, "rloo")
    assert rows.loc[("mean", "rloo", ""), "estimate"] == pytest.approx(agg.aggregate_mean(m))
    assert poi["estimate"] == pytest.approx(agg.probability_of_improvement(_matrix(fewer, "grpo"), m))
    # the statistics of the groups with all their seeds are those of a comparison without the short group
    full = ts.compare(fewer[fewer["algo.estimator"] != "rloo"], by="algo.estimator", n_resamples=200)
    key = ["statistic", "group", "versus"]
    both = full.frame.merge(cmp.frame, on=key, suffixes=("", "_with"))
    assert len(both) == 4 * 2 + 2
    folder = _published(tmp_path, fewer)
    got = CliRunner().invoke(main, ["compare", str(folder), "--by", "algo.estimator", "--reps", "100", "--no-figure",
                                    "--out", str(tmp_path / "o")])
    assert got.exit_code == 0, got.output
    assert "3 condition(s) x seeds grpo 6, dr_grpo 6, rloo 3" in got.output


def test_a_negative_seed_is_refused_naming_it(run_dir, tmp_path):
    """``--seed -1`` ended in numpy's "expected non-negative integer", naming no option."""
    got = CliRunner().invoke(main, ["compare", str(run_dir), "--by", "arm", "--seed", "-1",
                                    "--out", str(tmp_path / "o")])
    assert got.exit_code == 2 and "'--seed': -1 is not in the range x>=0" in got.output, got.output
    with pytest.raises(CompareError, match=r"random_state: -1 must be an integer >= 0"):
        ts.compare(run_dir, by="arm", random_state=-1)


def test_a_results_file_swapped_for_a_link_is_refused(run_dir, tmp_path):
    """A link in place of the published results.csv was neither changed nor missing, and was read through."""
    elsewhere = tmp_path / "edited.csv"
    elsewhere.write_text((run_dir / "results.csv").read_text().replace("0.5", "0.9", 1))
    (run_dir / "results.csv").unlink()
    os.symlink(elsewhere, run_dir / "results.csv")
    with pytest.raises(CompareError, match=r"added results.csv \(a link\)"):
        ts.compare(run_dir, by="arm", n_resamples=100)


def test_every_row_says_its_arm_method_level_and_normalization(run_dir, tmp_path):
    """compare.csv did not say which interval method gave its bounds, nor which arm was scored."""
    out = tmp_path / "cmp"
    got = CliRunner().invoke(main, ["compare", str(run_dir), "--by", "algo.estimator", "--arm", "majority", "--out",
                                    str(out), "--reps", "100", "--method", "percentile", "--no-figure"])
    assert got.exit_code == 0, got.output
    assert "method percentile (100 resamples of seeds within conditions); raw scores" in got.output
    table = pd.read_csv(out / "compare.csv", keep_default_na=False)
    assert set(table["arm"]) == {"majority"} and set(table["method"]) == {"percentile"}
    assert set(table["normalization"]) == {"none"} and set(table["ci"]) == {0.95}
    assert set(table["resampled"]) == {"seeds within conditions"}


def test_a_statistic_that_does_not_apply_is_not_reported(run_dir):
    """d_rd (TRUE - MAJORITY) had an optimality gap against 1.0, which means nothing for a difference."""
    got = CliRunner().invoke(main, ["compare", str(run_dir), "--by", "algo.estimator", "--metric", "d_rd", "--reps",
                                    "100", "--no-figure", "--out", str(run_dir.parent / "o")])
    assert got.exit_code == 0, got.output
    assert "optimality_gap not reported for d_rd: a difference of two arms has no best attainable value" in got.output
    table = pd.read_csv(run_dir.parent / "o" / "compare.csv")
    assert "optimality_gap" not in set(table["statistic"]) and {"mean", "median", "iqm"} <= set(table["statistic"])


def test_normalised_scores_per_condition(run_dir):
    frame = _frame()
    cmp = ts.compare(run_dir, by="algo.estimator", arm="majority", normalize="minmax", n_resamples=100)
    raw = {e: _matrix(frame, e, arm="majority") for e in ESTIMATORS}
    lo = np.min([m.min(axis=0) for m in raw.values()], axis=0)
    hi = np.max([m.max(axis=0) for m in raw.values()], axis=0)
    mean = cmp.frame.query("statistic == 'mean' and group == 'rloo'")["estimate"].item()
    assert mean == pytest.approx(agg.aggregate_mean((raw["rloo"] - lo) / (hi - lo)))
    assert cmp.scores["score"].min() == 0.0 and cmp.scores["score"].max() == 1.0
    cmp = ts.compare(run_dir, by="algo.estimator", arm="majority", normalize="arms", n_resamples=100)
    m = raw["grpo"]
    frozen, true = (_matrix(frame, "grpo", arm=a).mean(axis=0) for a in ("frozen", "true"))
    iqm = cmp.frame.query("statistic == 'iqm' and group == 'grpo'")["estimate"].item()
    assert iqm == pytest.approx(agg.aggregate_iqm((m - frozen) / (true - frozen)))
    assert set(cmp.frame["normalization"]) == {"arms"}
    with pytest.raises(CompareError, match="normalize: 'arms' does not apply to 'd_rd'"):
        ts.compare(run_dir, by="algo.estimator", metric="d_rd", normalize="arms", n_resamples=100)


def test_pairs_thresholds_and_a_note_where_no_resample_moves_the_estimate(run_dir, tmp_path):
    cmp = ts.compare(run_dir, by="arm", pairs=[("true", "frozen")], taus=[0.3, 0.9], n_resamples=100)
    poi = cmp.frame[cmp.frame["statistic"] == "probability_of_improvement"]
    assert poi[["group", "versus"]].values.tolist() == [["true", "frozen"]]
    assert poi[["estimate", "low", "high"]].values.tolist() == [[1.0, 1.0, 1.0]]  # TRUE is 0.3 above FROZEN
    assert "the groups' runs do not overlap in any condition" in poi["note"].item()
    assert sorted(set(cmp.profile["tau"])) == [0.3, 0.9]
    got = CliRunner().invoke(main, ["compare", str(run_dir), "--by", "arm", "--pairs", "true", "noisy", "--out",
                                    str(tmp_path / "o")])
    assert got.exit_code == 1 and got.output.strip().splitlines() == [
        "Error: pairs: 'noisy' is not a group; allowed: frozen, random, majority, true"]
    got = CliRunner().invoke(main, ["compare", str(run_dir), "--by", "arm", "--taus", "0.2,x", "--out",
                                    str(tmp_path / "o")])
    assert got.exit_code == 2 and "--taus: '0.2,x' must be a number of points" in got.output


def test_bca_and_conditions_resampled_are_named_in_the_rows(run_dir):
    bca = ts.compare(run_dir, by="algo.estimator", method="bca", n_resamples=200)
    assert set(bca.frame["method"]) == {"bca"} and (bca.frame["low"] <= bca.frame["estimate"]).all()
    both = ts.compare(run_dir, by="algo.estimator", method="percentile", conditions=True, n_resamples=200)
    assert set(both.frame["resampled"]) == {"conditions, then seeds within each"}
    with pytest.raises(CompareError, match="'bca' resamples seeds within conditions only"):
        ts.compare(run_dir, by="algo.estimator", method="bca", conditions=True, n_resamples=200)


def test_sample_efficiency_curves_are_the_iqm_at_each_step(run_dir):
    frame = _frame()
    cmp = ts.compare(run_dir, by="algo.estimator", n_resamples=100)
    assert sorted(set(cmp.curves["step"])) == [0, 10]
    at0 = frame[(frame["algo.estimator"] == "rloo") & (frame["arm"] == "true") & (frame["step"] == 0)]
    m = at0.pivot(index="seed", columns="prior_strength", values="pass1").to_numpy()
    row = cmp.curves.query("step == 0 and group == 'rloo'")
    assert row["iqm"].item() == pytest.approx(agg.aggregate_iqm(m)) and row["low"].item() <= row["iqm"].item()
    assert set(cmp.figures()) == {"intervals", "improvement", "profile", "curves"}


def test_curves_keep_at_most_curve_steps_evenly_spread_with_the_last(monkeypatch):
    from tabsim.studies import compare as C

    frame = _frame()
    frame = pd.concat([frame.assign(step=frame["step"] + 20 * k) for k in range(3)], ignore_index=True)  # 6 steps
    monkeypatch.setattr(C, "CURVE_STEPS", 3)
    cmp = ts.compare(frame, by="algo.estimator", n_resamples=100)
    assert sorted(set(cmp.curves["step"])) == [0, 20, 50]  # of 0, 10, ..., 50: the first, the middle, the last
