"""`tabsim reproduce`: a reduced run end to end, every promised file, the summary schema, safe writes."""
import json
import re
import threading

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from tabsim.cli import main
from tabsim.studies.reference import run
from tabsim.studies.reference.design import SWEEP_PRIORS, build_designs, settings
from tabsim.studies.reference.run import reproduce

SEEDS, STEPS = 3, 10  # reduced size: the five studies in a few seconds
SWEEP_KEYS = {"prior_strength", "acc_frozen", "acc_random", "acc_majority", "acc_true", "d_null", "d_elicit", "d_rd",
              "d_naive", "rd_fraction"}
FIGURES = ("prior_sweep", "factorial", "power")
DATA = ("prior_sweep", "crossover_grid", "factorial", "gate_strong", "gate_uniform", "families", "power")


@pytest.fixture(scope="module")
def reduced(tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce")
    with pytest.MonkeyPatch.context() as mp:  # the figures drawn by the helper process, as a user's run draws them
        mp.setenv("TABSIM_FIGURE_PROCESS", "1")
        r = CliRunner().invoke(main, ["reproduce", "--out", str(out), "--seeds", str(SEEDS), "--steps", str(STEPS), "-q",
                                      "--pdf"])
    assert r.exit_code == 0, r.output + repr(r.exception)
    return out


def test_reduced_reproduce_writes_every_promised_file(reduced):
    for stem in FIGURES:
        for ext in ("png", "pdf"):
            assert (reduced / "figures" / f"{stem}.{ext}").stat().st_size > 1000
    for name in DATA:
        frame = pd.read_parquet(reduced / "data" / f"{name}.parquet")
        assert {"seed", "arm", "step", "pass1"} <= set(frame.columns) and len(frame) > 0
    for name in ("partition_summary", "factorial_coefficients", "factorial_anova", "gate_pilot", "gate_stability",
                 "verdicts", "power_curve", "paper_comparison"):
        assert len(pd.read_csv(reduced / "tables" / f"{name}.csv")) > 0
    seeds = pd.read_csv(reduced / "tables" / "partition_seeds.csv")  # written as soon as the prior sweep is computed
    assert len(seeds) == SEEDS * len(SWEEP_PRIORS)
    assert {"prior_strength", "seed", "d_null", "d_elicit", "d_rd"} <= set(seeds.columns)
    prov = json.loads((reduced / "provenance.json").read_text())
    assert prov["n_programs"] == 1 and prov["config_hash"] and "jax" in prov
    assert prov["device"] == "cpu:0" and prov["devices"] == ["cpu:0"]  # every device its chunks computed on
    assert json.loads((reduced / "config.json").read_text())["settings"]["seeds"] == SEEDS
    # report.md is written last: nothing in the folder is newer
    from tabsim.runtime.store import MARKER

    # report.md is the last output written; the run store's completion marker follows it
    newest = max(p.stat().st_mtime_ns for p in reduced.rglob("*") if p.is_file() and p.name != MARKER)
    assert (reduced / "report.md").stat().st_mtime_ns == newest
    assert (reduced / MARKER).stat().st_mtime_ns >= newest
    assert not list(reduced.rglob("*.tmp"))


def test_summary_schema_and_identity(reduced):
    s = json.loads((reduced / "summary.json").read_text())
    assert [row["prior_strength"] for row in s["prior_sweep"]] == list(SWEEP_PRIORS)
    for row in s["prior_sweep"]:
        assert set(row) == SWEEP_KEYS and all(isinstance(v, float) for v in row.values())
        # the telescoping identity on the seed means
        d_total = row["acc_true"] - row["acc_frozen"]
        assert row["d_null"] + row["d_elicit"] + row["d_rd"] == pytest.approx(d_total, abs=1e-12)
        assert row["d_naive"] == pytest.approx(row["d_elicit"] + row["d_rd"], abs=1e-12)
        assert row["rd_fraction"] == pytest.approx(row["d_rd"] / row["d_naive"], rel=1e-9)
    fac = s["factorial"]
    assert set(fac["coefficients"]) == {"A", "B", "C", "AB", "AC", "BC", "ABC"}
    main_max = max(abs(fac["coefficients"][t]) for t in "ABC")
    inter_max = max(abs(fac["coefficients"][t]) for t in ("AB", "AC", "BC", "ABC"))
    assert fac["interaction_ratio"] == pytest.approx(inter_max / main_max, rel=1e-9)
    assert [f["name"] for f in s["families"]] == ["strong", "weak"]
    for f in s["families"]:
        assert set(f) == {"name", "prior_strength", "elicitation_share", "rd_share", "verdict"}
        assert f["verdict"] in ("ELICITATION_DOMINATED", "REWARD_DESIGN_DOMINATED", "MIXED", "INCONCLUSIVE")
    assert {"interaction_ratio", "families", "prior_sweep"} <= set(s["intervals"])


def test_figures_are_listed_in_the_reports_order(reduced):
    s = json.loads((reduced / "summary.json").read_text())
    assert s["figures"] == [f"figures/{stem}.{ext}" for stem in FIGURES for ext in ("png", "pdf")]


def test_the_statistics_are_the_same_whichever_thread_finishes_first(reduced, monkeypatch):
    """The factorial's statistics run in a second thread and are reported when done: before power when they
    finish first (forced by an executor that runs them at once), after the gate and the families when they
    finish last (forced by holding them until power is reported). Same mapping, same order, same numbers."""
    from concurrent.futures import Future

    from tabsim.config import resolve
    from tabsim.studies.reference import analysis
    from tabsim.studies.reference.report import summary_json

    frames = {name: pd.read_parquet(reduced / "data" / f"{name}.parquet") for name in DATA}
    s = settings(seeds=SEEDS, steps=STEPS)
    cfg = resolve(s.base(s.steps))

    class AtOnce:  # a one-thread executor that has finished each job when submit returns
        def __init__(self, *args, **kwargs):
            pass

        def submit(self, fn, *args):
            f = Future()
            f.set_result(fn(*args))
            return f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    real_factorial = analysis._factorial
    runs = {}
    for order in ("factorial first", "factorial last"):
        power_reported = threading.Event()

        def held_factorial(*args):
            assert power_reported.wait(60), "power was never reported"
            return real_factorial(*args)

        with monkeypatch.context() as mp:
            if order == "factorial first":
                mp.setattr(analysis, "ThreadPoolExecutor", AtOnce)
            else:
                mp.setattr(analysis, "_factorial", held_factorial)
            calls = []
            for name, a in analysis.sections(frames, s, cfg):
                calls.append(name)
                assert {"prior_sweep": "fieller", "factorial": "ratio", "power": "power_mde", "all": "verdicts"}[name] in a
                if name == "power":
                    power_reported.set()
            assert calls.pop() == "all"
        runs[order] = a, calls
    (first, first_calls), (last, last_calls) = runs["factorial first"], runs["factorial last"]
    assert first_calls == ["prior_sweep", "factorial", "power"]
    assert last_calls == ["prior_sweep", "power", "factorial"]
    assert list(first) == list(last)
    assert list(first).index("fit") < list(first).index("power_curve") < list(first).index("verdicts")
    for key in first:
        if isinstance(first[key], pd.DataFrame):
            pd.testing.assert_frame_equal(first[key], last[key], check_exact=True)
    cmp = run.compare_with_paper(first, s)
    assert summary_json(first, cmp, s) == summary_json(last, cmp, s)


def test_the_per_seed_table_is_written_when_the_sweep_is_never_reported(reduced, tmp_path, monkeypatch):
    """The per-seed partition is written when the prior sweep's section is reported; an analysis that reports
    no section still gets it, with the other tables, and the same bytes."""
    from tabsim.studies.reference import analysis

    monkeypatch.setattr(run, "sections", lambda frames, s, cfg: [("all", analysis.analyze(frames, s, cfg))])
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["reproduce", "--out", str(out), "--seeds", str(SEEDS), "--steps", str(STEPS), "-q",
                                  "--no-figure"])
    assert r.exit_code == 0, r.output + repr(r.exception)
    name = "tables/partition_seeds.csv"
    assert (out / name).read_bytes() == (reduced / name).read_bytes()


def test_report_sets_tabsim_beside_the_paper(reduced):
    text = (reduced / "report.md").read_text()
    cmp = pd.read_csv(reduced / "tables" / "paper_comparison.csv")
    assert list(cmp["paper"]) == [1.39, 0.05, 0.385, -0.089, 0.98, 1.18]
    for value in ("1.390", "0.050", "0.385", "-0.089", "0.980", "1.180"):
        assert value in text
    # at 10 steps the settings differ from the paper's: every flagged difference says so
    for row in cmp[cmp["beyond_seed_noise"]].itertuples():
        assert f"**{row.label} differs**" in text
    assert "**This run changes the paper's settings** (steps 10 instead of 200" in text
    assert text.count("Reason: the settings differ from the paper's") == int(cmp["beyond_seed_noise"].sum())
    assert not re.search(r"\{[A-Za-z_.]+\}", text), "a placeholder left unformatted"
    for section in ("## 1. Prior sweep", "## 2. The 2x2x2 factorial", "## 3. Points-vs-bounds pilot gate",
                    "## 4. Simulated families", "## 5. Power"):
        assert section in text


def test_no_figure_writes_the_report_without_figures(reduced, tmp_path):
    """`--no-figure`: no figures/ folder (and no figure helper), the rest as without it, and a report that points
    to no figure (after `reduced`, whose program this process has compiled: seconds)."""
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["reproduce", "--out", str(out), "--seeds", str(SEEDS), "--steps", str(STEPS), "-q",
                                  "--no-figure"])
    assert r.exit_code == 0, r.output + repr(r.exception)
    assert not (out / "figures").exists()
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "config.json", "data", "provenance.json", "report.md", "summary.json", "tables"]
    assert json.loads((out / "summary.json").read_text())["figures"] == []
    text = (out / "report.md").read_text()
    assert "figures/" not in text and "and figures included" not in text and "no figures (`--no-figure`)" in text
    # the same report otherwise: the figures' mentions are the only difference in wording
    assert "figures/" in (reduced / "report.md").read_text()
    assert sorted(p.name for p in (out / "tables").iterdir()) == sorted(p.name for p in (reduced / "tables").iterdir())


def test_interrupted_run_leaves_the_earlier_output_untouched(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").write_text("# an earlier, complete report\n")
    (out / "summary.json").write_text("{}")

    def broken(*args, **kwargs):
        raise RuntimeError("interrupted while drawing")

    monkeypatch.setattr(run, "figures", broken)
    with pytest.raises(RuntimeError, match="interrupted"):
        reproduce(out, seeds=SEEDS, steps=STEPS, progress=False, overwrite=True)
    assert sorted(p.name for p in out.iterdir()) == ["report.md", "summary.json"]
    assert (out / "report.md").read_text() == "# an earlier, complete report\n"
    from tabsim.runtime.store import staging_path

    assert not (staging_path(out) / "report.md").exists()  # the interrupted run never looks complete


@pytest.mark.parametrize("args, words", [
    (["--seeds", "1"], ["--seeds", "1"]),
    (["--steps", "0"], ["--steps", "0"]),
    (["--scale", "huge"], ["--scale", "huge", "heavy"]),
    (["--preset", "nope"], ["--preset", "nope", "paper"]),
    (["--format", "xlsx"], ["--format", "xlsx"]),
    # --set: the parser of run and sweep; an unknown key names the allowed ones
    (["--set", "algo.learning_rate=0.1"], ["algo.learning_rate", "allowed in algo", "lr", "eps_high"]),
    (["--set", "algos.lr=0.1"], ["algos", "task, arms, algo, train"]),
    (["--set", "lr"], ["--set", "KEY=VALUE"]),
    # values the studies set themselves, or reproduce's own options, would be replaced without a word
    (["--set", "task.prior_strength=0.3"], ["task.prior_strength", "every study sets the prior strength"]),
    (["--set", "train.steps=50"], ["train.steps", "--steps"]),
    (["--set", "train.seeds=4"], ["train.seeds", "--seeds"]),
    (["--set", "sweep.lr=[0.1,0.2]"], ["--set sweep", "their own factors"]),
    (["--set", "preset=dapo"], ["--set preset", "--preset"]),
])
def test_bad_options_are_refused_before_anything_runs(tmp_path, args, words):
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["reproduce", "--out", str(out), *args])
    assert r.exit_code == 2, r.output
    for w in words:
        assert w in r.output
    assert not out.exists()


def test_settings_refuse_bad_values():
    with pytest.raises(ValueError, match="seeds"):
        settings(seeds=1)
    with pytest.raises(ValueError, match="scale"):
        settings(scale="big")
    s = settings(scale="heavy")
    assert (s.seeds, s.steps, s.factorial_seeds, s.factorial_steps) == (50, 400, 100, 500)
    assert settings(scale="heavy", seeds=4).factorial_seeds == 4


def test_set_reaches_the_base_of_every_study_and_is_checked():
    s = settings(overrides={"algo": {"lr": 0.1}, "train": {"group_size": 4}})
    assert s.overrides == {"algo": {"lr": 0.1}, "train": {"group_size": 4}}
    for name, design in build_designs(s).items():
        assert design.base["algo"]["lr"] == 0.1 and design.base["train"]["group_size"] == 4, name
    assert build_designs(s)["factorial"].base["train"]["steps"] == s.factorial_steps  # --steps still wins
    heavy = settings(scale="heavy", overrides={"train": {"batch_size": 40}})
    assert heavy.base(5)["train"] == {"group_size": 10, "batch_size": 40, "steps": 5}  # over the scale's sizes
    assert settings().overrides == {} and "overrides" not in settings().base(5)
    for over, words in (({"algo": {"lr": -1}}, "algo.lr"),
                        ({"arms": {"arms": ["true", "majority"]}}, "the partition needs arms"),
                        ({"train": {"metrics": ["entropy"]}}, "lacks pass1"),
                        ({"train": {"dynamics": "expected"}}, "sampled"),
                        ({"task": {"prior_strength": 0.3}}, "task.prior_strength"),
                        ({"sweep": {"lr": [0.1]}}, "sweep")):
        with pytest.raises(ValueError, match=words):
            settings(overrides=over)


def test_set_is_passed_to_reproduce(tmp_path, monkeypatch):
    """The command's own work is stood in for: what is tested is what ``--set`` hands to it."""
    import tabsim.studies.reference as reference

    got = {}
    monkeypatch.setattr(reference, "reproduce", lambda out, **kw: got.update(kw) or {})
    r = CliRunner().invoke(main, ["reproduce", "--out", str(tmp_path / "o"), "-q", "--set", "algo.lr=0.1",
                                  "--set", "task.tree.depth=2", "--set", "arms.arms=[frozen,random,majority,true]"])
    assert r.exit_code == 0, r.output
    assert got["overrides"] == {"algo": {"lr": 0.1}, "task": {"tree": {"depth": 2}},
                                "arms": {"arms": ["frozen", "random", "majority", "true"]}}


def test_set_is_recorded_in_config_provenance_summary_and_report(tmp_path):
    out = tmp_path / "o"
    r = CliRunner().invoke(main, ["reproduce", "--out", str(out), "--seeds", "2", "--steps", "2", "-q",
                                  "--set", "algo.lr=0.1", "--set", "train.group_size=4"])
    assert r.exit_code == 0, r.output + repr(r.exception)
    want = {"algo": {"lr": 0.1}, "train": {"group_size": 4}}
    config = json.loads((out / "config.json").read_text())
    assert config["settings"]["overrides"] == want
    for name, design in config["designs"].items():
        assert design["base"]["algo"]["lr"] == 0.1 and design["base"]["train"]["group_size"] == 4, name
        assert {p["algo"]["lr"] for p in design["programs"]} == {0.1}, name  # what was trained
    assert json.loads((out / "provenance.json").read_text())["overrides"] == want
    assert json.loads((out / "summary.json").read_text())["settings"]["overrides"] == want
    text = (out / "report.md").read_text()
    assert "overrides `algo.lr=0.1`, `train.group_size=4`" in text
    assert "algo.lr 0.1 instead of 0.05" in text and "G 4 instead of 8" in text


@pytest.mark.heavy
def test_default_reproduce_matches_the_paper_within_noise(tmp_path):
    """The paper's settings: the factorial and family headline numbers agree within the seed noise (the
    command's speed is measured by experiments/bench_study.py, never asserted here)."""
    s = reproduce(tmp_path, progress=False)
    cmp = pd.DataFrame(s["paper_comparison"]).set_index("quantity")
    for q in ("interaction_ratio", "coef_AC", "elicitation_share_strong", "rd_share_weak", "rd_fraction_0.80"):
        assert not cmp.loc[q, "beyond_seed_noise"], cmp.loc[q].to_dict()
    assert np.isfinite(s["crossover"]["estimate"])
    text = (tmp_path / "report.md").read_text()
    assert "d_elicit is increasing through it" in text and not re.search(r"\{[A-Za-z_.]+\}", text)
