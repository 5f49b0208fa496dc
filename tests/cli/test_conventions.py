"""Command-line conventions and reruns: usage errors exit 2, ``--json`` prints one
object on stdout, ``run`` reads a run's own ``config.json``, ``--set`` overrides, ``run`` and ``sweep`` share
their options, a static field in ``--vary`` says how to vary it, ``presets`` and ``config show``."""
from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from tabsim.cli import main

SMALL = 'preset = "paper"\n[task]\nn_prompts = 8\n[train]\nsteps = 2\nseeds = 2\nbatch_size = 4\ngroup_size = 2\n'


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def small(tmp_path):
    path = tmp_path / "small.toml"
    path.write_text(SMALL)
    return path


def one_object(res) -> dict:
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)  # the whole of stdout is one object


# -- usage errors exit 2 ---------------------------------------------------------------------------------
@pytest.mark.parametrize("args, words", [
    (["run", "{d}/missing.toml"], ("config file not found",)),
    (["sweep", "--config", "{d}/missing.toml"], ("--config", "not found")),
    (["sweep", "--vary", "lr"], ("--vary", "FIELD=v1,v2")),
    (["sweep", "--vary", "lr=0.1,abc"], ("--vary", "not a plain number")),
    (["sweep", "--vary", "lr=0.1,,0.2"], ("--vary", "empty level")),
    (["sweep", "--arms", "frozen,,true"], ("--arms", "empty arm")),
    (["sweep", "--preset", "papr"], ("--preset", "did you mean `paper`")),
    (["run", "{d}/small.toml", "--set", "algo.learning_rate=0.1"], ("algo.learning_rate", "allowed in algo", "lr")),
    (["run", "{d}/small.toml", "--set", "algos.lr=0.1"], ("algos", "task, arms, algo, train")),
    (["run", "{d}/small.toml", "--set", "lr"], ("--set", "KEY=VALUE")),
    (["run", "{d}/small.toml", "--set", "task.tree.dept=3"], ("task.tree", "depth")),
    (["sweep", "--vary", "seeds=2,4"], ("--vary seeds", "train.seeds", "replication axis")),
    (["sweep", "--vary", "algo.estimator=grpo,,rloo"], ("--vary", "empty level")),
])
def test_usage_errors_exit_2(args, words, small, tmp_path):
    res = cli(*[a.format(d=tmp_path) for a in args], "--out", tmp_path / "o", "-q")
    assert res.exit_code == 2, res.output
    for w in words:
        assert w in res.output, res.output
    assert not (tmp_path / "o").exists()


def test_a_bad_set_value_names_the_field(small, tmp_path):
    res = cli("run", small, "--set", "algo.lr=-1", "--out", tmp_path / "o", "-q")
    assert res.exit_code == 1 and "algo.lr" in res.output, res.output


def test_a_static_field_in_a_file_sweep_says_how_to_vary_it():
    import tabsim as ts

    with pytest.raises(ts.ConfigError, match="static field.*factorial"):
        ts.resolve({"preset": "paper", "sweep": {"group_size": [4, 8]}})


# -- run and sweep share their options; --set; a run's config.json -----------------------------------------
def test_run_and_sweep_share_their_options():
    from tabsim.cli.run import run_cmd, sweep_cmd

    shared = {"preset", "vary", "arms", "sets", "seeds", "steps", "out", "fmt", "quiet", "as_json", "overwrite",
              "resume", "executor", "workers", "scheduler"}
    for cmd in (run_cmd, sweep_cmd):
        assert shared <= {p.name for p in cmd.params}, cmd.name


def test_run_with_overrides_then_rerun_its_config_json(small, tmp_path):
    """``--preset``, ``--set``, ``--vary`` and ``--arms`` on ``run``; its ``config.json`` reruns the same config."""
    first = one_object(cli("run", small, "--preset", "grpo", "--set", "algo.lr=0.1", "--set", "train.eval_every=1",
                           "--vary", "prior_strength=0.3,0.6", "--arms", "frozen,true", "--out", tmp_path / "o",
                           "-q", "--json", "--no-figure"))  # (a figure costs more than the run)
    cfg = json.loads((tmp_path / "o" / "config.json").read_text())
    assert cfg["preset"] == "grpo" and cfg["algo"]["lr"] == 0.1 and cfg["train"]["eval_every"] == 1
    assert cfg["sweep"] == {"prior_strength": [0.3, 0.6]} and cfg["arms"]["arms"] == ["frozen", "true"]
    assert first["factors"] == ["prior_strength"] and len(first["final"]) == 4
    assert {"prior_strength", "arm", "mean", "sem", "n"} <= set(first["final"][0])
    again = one_object(cli("run", tmp_path / "o" / "config.json", "--out", tmp_path / "o2", "-q", "--json",
                           "--no-figure"))
    assert again["config_digest"] == first["config_digest"]
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "o" / "results.parquet"),
                                  pd.read_parquet(tmp_path / "o2" / "results.parquet"))


def test_set_lists_hold_names_and_numbers():
    """In a list, ``true`` is the TRUE arm (it was read as a boolean and refused as a YAML mistake)."""
    from tabsim.cli.study import parse_set

    assert parse_set(["arms.arms=[frozen,random,majority,true]", "train.metrics=[pass1,null]",
                      "sweep.lr=[0.05,1e-1]", "algo.filter=true"]) == {
        "arms": {"arms": ["frozen", "random", "majority", "true"]}, "train": {"metrics": ["pass1", "null"]},
        "sweep": {"lr": [0.05, 0.1]}, "algo": {"filter": True}}


# -- --json ------------------------------------------------------------------------------------------------
def test_sweep_and_verify_print_one_json_object(tmp_path):
    res = cli("sweep", "--vary", "prior_strength=0.3", "--seeds", "2", "--steps", "2", "--set", "task.n_prompts=8",
              "--set", "train.batch_size=4", "--out", tmp_path / "o", "--json")
    got = one_object(res)
    assert got["command"] == "tabsim sweep" and got["complete"] and "pass1.png" in got["files"]
    assert "final pass1" in res.stderr  # the human summary moved to stderr
    ok = one_object(cli("verify", tmp_path / "o", "--json"))
    assert ok["ok"] and ok["n_files"] >= 4 and ok["changed"] == []
    (tmp_path / "o" / "config.json").write_text("{}")
    res = cli("verify", tmp_path / "o", "--json")
    assert res.exit_code == 1 and json.loads(res.stdout)["changed"] == ["config.json"]


def test_reproduce_and_prereg_run_print_one_json_object(tmp_path, monkeypatch):
    """The commands' own work is stood in for: what is tested is the object they print."""
    import tabsim.prereg.runner as runner
    import tabsim.studies.reference as reference

    monkeypatch.setattr(reference, "reproduce", lambda out, **kw: {"wall_seconds": 1.0, "verdicts": {"a": 1}})
    got = one_object(cli("reproduce", "--out", tmp_path / "r", "-q", "--json"))
    assert got["command"] == "tabsim reproduce" and got["summary"]["verdicts"] == {"a": 1}
    hyp = {"id": "H1", "kind": "confirmatory", "verdict": "SUPPORTED", "estimand": "d_elicit", "estimate": 0.1,
           "ci_low": 0.05, "ci_high": 0.15, "rule_text": "ci_lower_gt 0"}
    monkeypatch.setattr(runner, "run_study", lambda *a, **k: {"analysis": {"hypotheses": [hyp]}, "wall_seconds": 2})
    plan = tmp_path / "plan.yaml"
    plan.write_text("schema: tabsim.prereg/1\n")
    res = cli("prereg", "run", plan, "--exploratory", "--out", tmp_path / "p", "--json")
    got = one_object(res)
    assert got["hypotheses"][0]["verdict"] == "SUPPORTED" and "SUPPORTED" in res.stderr


def test_prereg_validate_and_audit_print_one_json_object(tmp_path):
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    got = one_object(cli("prereg", "validate", root / "preregistration" / "clipping_null" / "plan.yaml", "--json"))
    assert got["valid"] and len(got["sha256"]) == 64 and got["lock"] in ("matches", "none")
    got = one_object(cli("audit", root / "experiments" / "audits" / "ttrl.yaml", "--no-calibration", "--out",
                         tmp_path / "a", "-q", "--json"))
    assert got["command"] == "tabsim audit" and got["entries"] and "verdict" in got["entries"][0]


def test_audit_summary_says_which_verdicts_are_model_based_or_fragile(tmp_path, monkeypatch):
    """One line per row: a verdict a simulator bound decides, and one that a point of seed spread reverses,
    are marked there too (as in report.md, audit.csv and the figure)."""
    from pathlib import Path

    import tabsim.audit.core as core

    real = core.audit

    def audit(entries, **kw):  # the simulator's calibration stood in for: one verdict marked as resting on it
        res = real(entries, **kw)
        res.audit["verdict_model_based"] = res.audit["model"] == "OLMo2-7B"
        return res

    monkeypatch.setattr(core, "audit", audit)
    table = Path(__file__).resolve().parents[2] / "experiments" / "audits" / "spurious_rewards.yaml"
    res = cli("audit", table, "--no-calibration", "--out", tmp_path / "a")
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    header = next(ln for ln in lines if ln.lstrip().startswith("source"))
    assert header.split()[-2:] == ["model_based", "fragile"]
    flags = {ln.split()[1]: ln.split()[-2:] for ln in lines if ln.startswith("spurious-rewards")}
    assert flags["Qwen2.5-7B"] == ["False", "True"]  # fragile (tests/audit/test_model_based.py)
    assert flags["OLMo2-7B"] == ["True", "False"] and flags["Qwen2.5-Math-7B"] == ["False", "False"]
    got = one_object(cli("audit", table, "--no-calibration", "--out", tmp_path / "b", "-q", "--json"))
    rows = {r["model"]: r for r in got["entries"]}
    assert rows["Qwen2.5-7B"]["fragile"] is True and rows["OLMo2-7B"]["verdict_model_based"] is True


# -- presets and config show -----------------------------------------------------------------------------------
def test_presets_and_config_show(tmp_path):
    import tabsim as ts
    from tabsim.config.presets import PRESETS

    res = cli("presets")
    assert res.exit_code == 0 and all(name in res.stdout for name in PRESETS), res.output
    assert set(one_object(cli("presets", "--json"))["presets"]) == set(PRESETS)
    from tabsim.config.models import default_eval_every

    shown = json.loads(cli("config", "show", "dapo", "--format", "json").stdout)
    # what tabsim run runs: the preset with the command line's evaluation cadence filled in
    every = default_eval_every(PRESETS["dapo"].get("train", {}).get("steps", 200))
    assert shown == ts.resolve({"preset": "dapo", "train": {"eval_every": every}}).model_dump(mode="json")
    res = cli("config", "show", "dapo", "--set", "train.steps=100")
    assert res.exit_code == 0, res.output
    (tmp_path / "dapo.toml").write_text(res.stdout)  # the TOML is a config file that resolves to the same
    from tabsim.config import load_config

    assert load_config(tmp_path / "dapo.toml").digest() == ts.resolve(
        {"preset": "dapo", "train": {"steps": 100, "eval_every": default_eval_every(100)}}).digest()
    res = cli("config", "show", "nope")
    assert res.exit_code == 2 and "paper" in res.output
