"""Sweeps as a Hydra user writes them: dotted names, KEY=VALUE arguments, ranges and globs, unknown fields
named as unknown, a sweep's config.json resolved and read back to itself, completion of names, and the
curves' default evaluation cadence. Nothing here trains (no JAX program is compiled)."""
from __future__ import annotations

import json

import pytest
from click.shell_completion import BashComplete
from click.testing import CliRunner

from tabsim.cli import main
from tabsim.cli.study import build_config, parse_vary
from tabsim.config import read_config_file, resolve
from tabsim.files.atomic import write_json


def cli(*args):
    return CliRunner().invoke(main, list(args))


# -- dotted names, unknown fields ----------------------------------------------------------------------------
@pytest.mark.parametrize("spec, name", [("algo.lr=0.05,0.1", "lr"), ("arms.gamma=0.3,0.5", "gamma"),
                                        ("task.prior_strength=0.3,0.5", "prior_strength"), ("lr=0.05,0.1", "lr")])
def test_vary_takes_a_numeric_field_bare_or_dotted(spec, name):
    sweep = parse_vary([spec])
    assert list(sweep) == [name] and len(sweep[name]) == 2
    # a config file may name it dotted too, or in a table per section
    section = spec.partition(".")[0] if "." in spec.partition("=")[0] else "algo"
    field = spec.partition("=")[0].rpartition(".")[2]
    for given in ({spec.partition("=")[0]: sweep[name]}, {section: {field: sweep[name]}}):
        assert list(resolve({"preset": "paper", "sweep": given}).sweep) == [name]


@pytest.mark.parametrize("args, near", [
    (["--vary", "algo.estimatr=grpo,rloo"], "algo.estimator"),
    (["--vary", "lrr=0.1,0.2"], "lr"),
    (["lrr=0.1"], "lr"),
])
def test_an_unknown_field_is_named_unknown_with_the_closest(args, near):
    res = cli("sweep", *args, "--dry-run")
    assert res.exit_code == 2, res.output
    line = res.output.strip().splitlines()[-1]
    assert "unknown field" in line and f"did you mean `{near}`" in line and "plain number" not in line, line


def test_a_config_file_with_an_unknown_sweep_field_is_named_unknown():
    from tabsim.config import ConfigError

    with pytest.raises(ConfigError, match=r"sweep\.lrr: unknown field \(did you mean `lr`\?\)"):
        resolve({"preset": "paper", "sweep": {"lrr": [0.1]}})


# -- Hydra's syntax --------------------------------------------------------------------------------------------
def test_ranges_and_globs():
    assert parse_vary(["task.n_prompts=range(20,41,10)"]) == {"task.n_prompts": [20, 30, 40]}
    assert parse_vary(["lr=range(0.1,0.5,0.1)"]) == {"lr": [0.1, 0.2, 0.3, 0.4]}  # exact decimal steps
    assert parse_vary(["train.steps=range(1,4)"]) == {"train.steps": [1, 2, 3]}
    grpos = parse_vary(["algo.estimator=glob(*grpo*)"])["algo.estimator"]  # the matches, in the registry's order
    assert grpos[:2] == ["grpo", "dr_grpo"] and all("grpo" in n for n in grpos) and "rloo" not in grpos
    assert parse_vary(["preset=glob(dr_*)"])["preset"] == ["dr_grpo"]
    assert {"dapo", "dr_grpo"} <= set(parse_vary(["preset=glob(d*)"])["preset"])


@pytest.mark.parametrize("spec, words", [
    ("lr=glob(*)", ("glob() chooses among names",)),
    ("algo.estimator=glob(zz*)", ("matches none", "grpo")),
    ("task.n_prompts=range(5,1)", ("holds no level",)),
    ("task.n_prompts=range(a,b)", ("range(start, stop[, step])",)),
])
def test_bad_ranges_and_globs_are_one_line(spec, words):
    res = cli("sweep", "--vary", spec, "--dry-run")
    assert res.exit_code == 2 and all(w in res.output for w in words), res.output
    assert "Traceback" not in res.output


def test_key_value_arguments_set_and_sweep():
    cfg = build_config({}, overrides=("algo.lr=0.05,0.1", "train.steps=40", "prior_strength=0.3"), multirun=True,
                       default_preset="paper")
    assert cfg.sweep == {"lr": [0.05, 0.1]} and cfg.train.steps == 40 and cfg.task.prior_strength == 0.3
    grouped = build_config({}, overrides=("algo.estimator=grpo,rloo",), multirun=True, default_preset="paper")
    assert [g.values for g in grouped.groups] == [{"algo.estimator": "grpo"}, {"algo.estimator": "rloo"}]
    # --set sweep.SECTION.FIELD names a numeric field dotted too
    assert build_config({}, sets=("sweep.algo.lr=[0.1,0.2]",), default_preset="paper").sweep == {"lr": [0.1, 0.2]}
    # a list value is one value, not a sweep
    cfg = build_config({}, overrides=("arms.arms=[frozen,true]",), default_preset="paper")
    assert cfg.arms.arms == ["frozen", "true"] and not cfg.sweep


def test_a_sweep_argument_to_run_asks_for_multirun(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('preset = "paper"\n')
    res = cli("run", str(path), "algo.lr=0.05,0.1", "--dry-run")
    assert res.exit_code == 2 and "--multirun" in res.output and "--vary algo.lr=0.05,0.1" in res.output, res.output


def test_a_list_given_to_set_points_to_vary():
    res = cli("sweep", "--set", "algo.lr=0.05,0.1", "--dry-run")
    assert res.exit_code == 2 and "--vary algo.lr=0.05,0.1" in res.output, res.output


# -- a sweep's config.json -----------------------------------------------------------------------------------
@pytest.mark.parametrize("vary", [
    ("algo.estimator=grpo,rloo", "prior_strength=0.3,0.5"),  # static and traced
    ("prior_strength=0.3,0.5", "lr=0.05,0.1"),  # traced, not in the order config.json writes them
    ("preset=paper,dapo",),
])
def test_a_sweeps_config_json_is_resolved_and_reads_back_to_itself(tmp_path, vary):
    first = build_config({}, vary=vary, seeds=2, steps=4, default_preset="paper")
    written = first.data if hasattr(first, "groups") else first.model_dump(mode="json")
    write_json(tmp_path / "config.json", written)
    if "preset=paper,dapo" not in vary:  # every field the groups share, resolved (not 5 of them)
        assert written["algo"]["lr"] == 0.05 or "lr" in written["sweep"]
        assert {"task", "arms", "algo", "train"} <= set(written) and len(written["train"]) >= 10
    again = build_config(read_config_file(tmp_path / "config.json"))
    rewritten = again.data if hasattr(again, "groups") else again.model_dump(mode="json")
    write_json(tmp_path / "again.json", rewritten)
    assert (tmp_path / "again.json").read_bytes() == (tmp_path / "config.json").read_bytes()
    # the same factors in the same order: the same columns and rows
    factors = first.factors if hasattr(first, "groups") else list(first.sweep)
    assert factors == (again.factors if hasattr(again, "groups") else list(again.sweep))
    if hasattr(first, "groups"):
        assert [g.config.digest() for g in first.groups] == [g.config.digest() for g in again.groups]
        assert first.digest() == again.digest()
    else:
        assert first.grid() == again.grid()


# -- completion ----------------------------------------------------------------------------------------------
def _complete(args, incomplete):
    return [c.value for c in BashComplete(main, {}, "tabsim", "_TABSIM_COMPLETE").get_completions(args, incomplete)]


def test_completion_of_fields_presets_and_levels():
    assert "algo.estimator=" in _complete(["sweep", "--vary"], "algo.est")
    assert "algo.lr=" in _complete(["sweep", "--set"], "algo.l")
    assert "task.n_prompts=" in _complete(["sweep"], "task.n_p")
    assert _complete(["sweep", "--vary"], "algo.estimator=dr") == ["algo.estimator=dr_grpo"]
    assert "dapo" in _complete(["sweep", "--preset"], "da")
    assert "preset=dapo" in _complete(["run", "c.toml"], "preset=d")


# -- the curves' evaluation cadence ----------------------------------------------------------------------------
@pytest.mark.parametrize("steps", [1, 4, 20, 40, 100, 200, 300, 500, 1000, 4096, 10_000])
def test_default_eval_every_gives_20_to_50_intervals(steps):
    from tabsim.config.models import default_eval_every

    every = default_eval_every(steps)
    assert steps % every == 0 and (steps // every == steps if steps <= 20 else 20 <= steps // every <= 50)


def test_run_and_sweep_fill_in_eval_every_unless_it_is_set():
    from tabsim.config.models import default_eval_every

    assert build_config({}, default_preset="paper").train.eval_every == default_eval_every(200) == 10
    assert build_config({}, sets=("train.eval_every=200",), default_preset="paper").train.eval_every == 200
    assert build_config({"preset": "paper", "train": {"eval_every": 50}}).train.eval_every == 50
    assert build_config({}, steps=7, default_preset="paper").train.eval_every == 1
    # a sweep over the steps: each group keeps its own (start and end)
    grouped = build_config({}, vary=("train.steps=4,6",), default_preset="paper")
    assert [g.config.train.eval_every for g in grouped.groups] == [None, None]


# -- the figure's title ----------------------------------------------------------------------------------------
def test_the_figure_title_says_what_was_run():
    from tabsim.cli.run import figure_title

    title = figure_title(build_config({}, vary=("prior_strength=0.3,0.5", "algo.lr=0.05,0.1"), seeds=3, steps=40,
                                      default_preset="dapo"), "pass1")
    assert title == "pass1 per arm: dapo, 3 seeds x 40 steps (every 2), varying lr, prior_strength", title
    grouped = build_config({}, vary=("preset=paper,dapo",), seeds=2, steps=4)
    assert figure_title(grouped, "pass1").startswith("pass1 per arm: presets paper, dapo, 2 seeds x 4 steps")
