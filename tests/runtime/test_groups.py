"""Sweeps over static fields: groups of one compiled shape, one frame out, the same as the groups run one by one."""
from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

import tabsim as ts
from tabsim.config import Config
from tabsim.runtime.run import group_frame
from tabsim.runtime.sweeps import split

# small and quick: two programs per test, a few seconds each to compile
BASE = {"preset": "paper", "task": {"n_prompts": 8}, "arms": {"arms": ["frozen", "random", "majority", "true"]},
        "train": {"steps": 4, "eval_every": 2, "seeds": 2, "batch_size": 4, "group_size": 4}}
TRACED = {"prior_strength": [0.3, 0.6]}


def one_by_one(field: str, levels: list) -> pd.DataFrame:
    """Each level run alone (``--set FIELD=LEVEL``), its column added, the frames concatenated."""
    p = split({**BASE, "sweep": {field: levels, **TRACED}})
    frames = []
    for group, level in zip(p.groups, levels):
        section, _, name = field.partition(".")
        alone = ts.run({**BASE, section: {**BASE.get(section, {}), name: level}, "sweep": TRACED}, progress=False)
        frames.append(group_frame(p, group, alone.frame))
    return pd.concat(frames, ignore_index=True)


@pytest.mark.parametrize("field, levels", [("task.n_prompts", [8, 12]), ("algo.estimator", ["grpo", "rloo"])])
def test_a_static_sweep_is_one_frame_equal_to_its_groups_run_one_by_one(field, levels):
    res = ts.run({**BASE, "sweep": {field: levels, **TRACED}}, progress=False)
    assert list(res.frame.columns[:2]) == [field, "prior_strength"] and res.factors == [field, "prior_strength"]
    assert list(res.frame[field].unique()) == levels
    assert len(res.frame) == len(levels) * 2 * 2 * 4 * 3  # levels x conditions x seeds x arms x eval points
    assert [g["values"] for g in res.provenance["groups"]] == [{field: v} for v in levels]
    pd.testing.assert_frame_equal(res.frame, one_by_one(field, levels), check_exact=True)


class Counting:
    """An executor that records the programs of the chunks it is given, call by call, and computes them here."""

    def __init__(self):
        self.calls = []

    def map(self, fn, items):
        items = list(items)
        self.calls.append([c.program for c in items])
        return map(fn, items)


def test_a_static_sweep_is_planned_once_and_computed_in_one_pass():
    """One plan holds every group's chunks, each naming its program; the executor is handed them all at once
    (the groups were planned and mapped one after another), and the frame is the same."""
    from tabsim.runtime.run import plan_of

    cfg = {**BASE, "sweep": {"algo.estimator": ["grpo", "rloo"], **TRACED}}
    plan = plan_of(cfg, progress=False)
    assert plan.programs == 2 and plan.conditions == 4
    assert [(c.program, c.index, Config.model_validate(c.config).algo.estimator) for _, c in plan.parts] == [
        (0, 0, "grpo"), (1, 1, "rloo")]
    views = plan.by_program()  # what --dry-run shows group by group: the one plan's chunks, not plans of their own
    assert [(v.conditions, v.chunks, [c.index for _, c in v.parts]) for v in views] == [(2, 1, [0]), (2, 1, [1])]
    assert all(v.device is plan.device and v.executor is plan.executor for v in views)
    ex = Counting()
    res = ts.run(cfg, progress=False, executor=ex)
    assert ex.calls == [[0, 1]]
    assert res.provenance["n_chunks"] == 2 and res.provenance["plan"]["programs"] == 2
    pd.testing.assert_frame_equal(res.frame, ts.run(cfg, progress=False).frame, check_exact=True)


def test_an_interrupted_static_sweep_resumes_with_its_chunks(tmp_path):
    """Chunks kept by a sweep's run store are reused when it resumes: only the missing group's chunk runs."""
    from tabsim.runtime.store import RunStore

    cfg = {**BASE, "sweep": {"algo.estimator": ["grpo", "rloo"], **TRACED}}
    out = tmp_path / "o"
    with pytest.raises(KeyboardInterrupt):
        with RunStore(out, key="k") as store:
            ts.run(cfg, progress=False, store=store, executor=Interrupting())
    ex = Counting()
    with RunStore(out, key="k", resume=True) as store:
        res = ts.run(cfg, progress=False, store=store, executor=ex)
        assert store.reused_chunks == 1
    assert ex.calls == [[1]]
    pd.testing.assert_frame_equal(res.frame, ts.run(cfg, progress=False).frame, check_exact=True)


def test_a_sweep_resumes_its_chunks_whatever_their_cut_in_segments(tmp_path, monkeypatch):
    """The cut of a chunk into segments changes no number, so a sweep interrupted while cut (a watched bar,
    a long chunk) resumes with its kept chunks when it is not cut."""
    import dataclasses

    from tabsim.runtime import planning
    from tabsim.runtime import run as run_mod
    from tabsim.runtime.store import RunStore

    whole = run_mod.run_chunk
    monkeypatch.setattr(run_mod, "run_chunk", lambda c, hooks=None: whole(dataclasses.replace(c, segment=None)))
    cfg = {**BASE, "sweep": {"algo.estimator": ["grpo", "rloo"], **TRACED}}
    out = tmp_path / "o"
    with monkeypatch.context() as cut:
        cut.setattr(planning, "SEGMENT_UNITS", 100)
        cut.setattr(planning, "SEGMENTED_ABOVE", 400)
        assert run_mod.plan_of(cfg, progress=False).sizes[0][2]  # cut into segments
        with pytest.raises(KeyboardInterrupt):
            with RunStore(out, key="k") as store:
                ts.run(cfg, progress=False, store=store, executor=Interrupting())
    with RunStore(out, key="k", resume=True) as store:
        ts.run(cfg, progress=False, store=store, executor=Counting())
        assert store.reused_chunks == 1


class Interrupting(Counting):
    """Computes the first chunk it is given, then stops as Ctrl-C would."""

    def map(self, fn, items):
        items = list(items)
        yield fn(items[0])
        raise KeyboardInterrupt


def test_groups_of_one_shape_share_their_seeds_randomness():
    """Estimators compile to programs of the same shapes: a seed gives every group the same task, so the
    untrained policy's evaluation (step 0) is the same bits in both groups, and training then differs."""
    res = ts.run({**BASE, "sweep": {"algo.estimator": ["grpo", "rloo"]}}, progress=False)
    f = res.frame.set_index(["seed", "arm", "step"])
    grpo, rloo = (f[f["algo.estimator"] == e]["pass1"] for e in ("grpo", "rloo"))
    assert (grpo.xs(0, level="step") == rloo.xs(0, level="step")).all()
    assert (grpo.xs(4, level="step") != rloo.xs(4, level="step")).any()


def test_a_preset_sweep_runs_each_preset_under_the_same_overrides():
    p = split({**BASE, "sweep": {"preset": ["grpo", "dapo"]}})
    assert [g.config.preset for g in p.groups] == ["grpo", "dapo"]
    assert all(g.config.task.n_prompts == 8 and g.config.train.steps == 4 for g in p.groups)
    assert p.groups[1].config.algo.filter and not p.groups[0].config.algo.filter


@pytest.mark.parametrize("sweep, words", [
    ({"algo.estimator": ["grpo", "nope"]}, ("sweep.algo.estimator[1]", "unknown estimator 'nope'", "allowed:", "rloo")),
    ({"algo.estimator": ["grpo", "dapo"]}, ("sweep.algo.estimator[1]", "allowed:", "preset=dapo")),
    ({"preset": ["grpo", "nope"]}, ("sweep.preset[1]", "unknown preset", "allowed:", "dapo")),
    ({"task.n_prompts": [8, 0]}, ("sweep.task.n_prompts[1]",)),
    ({"n_prompts": [8, 8]}, ("sweep.task.n_prompts", "listed twice")),
    ({"train.seeds": [2, 4]}, ("sweep.train.seeds", "replication axis")),
    ({"task.n_prompts": []}, ("sweep.task.n_prompts", "non-empty list")),
    ({"train.batch_size": [4, 16]}, ("train.batch_size must be <= task.n_prompts", "group train.batch_size=16")),
])
def test_bad_static_levels_are_refused_naming_the_field(sweep, words):
    with pytest.raises(ts.ConfigError) as err:
        split({**BASE, "sweep": sweep})
    for w in words:
        assert w in str(err.value), str(err.value)


def test_a_file_sweep_table_and_the_command_line_show_the_groups(tmp_path):
    """A ``[sweep.task]`` table in a config file and ``--vary`` give the same groups; --dry-run lists them and
    writes nothing."""
    from tabsim.cli import main

    cfg = tmp_path / "s.toml"
    cfg.write_text('preset = "paper"\n[task]\nn_prompts = 8\n[train]\nsteps = 4\nseeds = 2\nbatch_size = 4\n'
                   "[sweep]\nprior_strength = [0.3, 0.6]\n[sweep.task]\nn_prompts = [8, 12]\n")
    out = CliRunner().invoke(main, ["run", str(cfg), "--dry-run", "--out", str(tmp_path / "o")])
    assert out.exit_code == 0, out.output
    assert "2 groups" in out.output and "group 2/2 (task.n_prompts=12): 2 condition(s)" in out.output
    assert not (tmp_path / "o").exists()
    js = CliRunner().invoke(main, ["sweep", "--preset", "paper", "--set", "task.n_prompts=8", "--set",
                                   "train.batch_size=4", "--vary", "n_prompts=8,12", "--vary", "prior_strength=0.3,0.6",
                                   "--dry-run", "--json"])
    assert js.exit_code == 0, js.output
    groups = json.loads(js.stdout)["groups"]
    assert [g["values"] for g in groups] == [{"task.n_prompts": 8}, {"task.n_prompts": 12}]
    assert all(g["sweep"] == TRACED for g in groups)


def test_the_command_line_refuses_a_bad_level_with_the_allowed_ones(tmp_path):
    from tabsim.cli import main

    res = CliRunner().invoke(main, ["sweep", "--vary", "algo.estimator=grpo,dr_grpo,dapo", "--out",
                                    str(tmp_path / "o"), "-q"])
    assert res.exit_code == 1 and "sweep.algo.estimator[2]" in res.output and "allowed:" in res.output, res.output
    assert not (tmp_path / "o").exists()
