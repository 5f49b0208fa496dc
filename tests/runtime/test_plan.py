"""A run's plan: one frozen object that decides chunks, segments, executor, device and memory, that a run
follows and records, and that ``--dry-run`` prints without running or writing anything."""
from __future__ import annotations

import dataclasses
import json

import pytest
from click.testing import CliRunner

import tabsim as ts
from tabsim.cli import main
from tabsim.runtime import planning
from tabsim.runtime.run import plan_of

SMALL = {"preset": "paper", "task": {"n_prompts": 8}, "train": {"seeds": 2, "steps": 4, "batch_size": 4,
                                                                "group_size": 2, "chunk_conditions": 2},
         "sweep": {"lr": [0.05, 0.1, 0.2]}}


def test_the_plan_is_frozen_and_the_run_follows_and_records_it():
    plan = plan_of(SMALL, progress=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.chunks = 1
    assert (plan.conditions, plan.seeds, plan.per_chunk, plan.chunks) == (3, 2, 2, 2)  # 3 conditions, 2 a chunk
    assert plan.executor_kind == "local" and plan.device.platform == "cpu"
    assert plan.chunk_bytes == planning.estimate_bytes(ts.resolve(SMALL), 2, 2)
    res = ts.run(SMALL, progress=False)
    assert res.provenance["plan"] == plan.as_dict()
    assert res.provenance["n_chunks"] == plan.chunks
    json.dumps(plan.as_dict())  # provenance is JSON


def test_a_packed_job_is_planned_once_with_its_device_and_chunks():
    from tabsim.studies import factorial

    design = factorial.make_design(ts.resolve({"preset": "paper", "task": {"n_prompts": 8},
                                               "train": {"steps": 2, "batch_size": 4, "group_size": 2}}),
                                   [factorial.Factor("prior_strength", "prior_strength", (0.3, 0.6))], seeds=3)
    work, _ = factorial.plan_units([design], units_per_chunk=4)
    plan = planning.plan(work)  # data in (no callable), chunks out
    assert plan.kind == "designs" and plan.conditions == 6 and plan.chunks == len(plan.parts) == 2
    assert plan.per_chunk == 4 and plan.programs == len(work.configs) == 1
    (res,) = factorial.run_designs([design], units_per_chunk=4, progress=False)
    assert res.provenance["plan"] == plan.as_dict()


def test_reproduce_dry_run_prints_the_plan_and_writes_nothing(tmp_path):
    out = tmp_path / "r"
    r = CliRunner().invoke(main, ["reproduce", "--dry-run", "--json", "-q", "--out", str(out)])
    assert r.exit_code == 0, r.output
    plan = json.loads(r.stdout.strip().splitlines()[-1])["plan"]
    assert plan["kind"] == "designs" and plan["chunks"] >= 1 and plan["device"] == "cpu:0"
    assert not out.exists()
    r = CliRunner().invoke(main, ["reproduce", "--dry-run", "-q", "--out", str(out)])
    assert r.exit_code == 0 and "chunks:" in r.output and "nothing run, nothing written" in r.output
    assert not out.exists()


def test_sweep_dry_run_prints_each_groups_plan(tmp_path):
    r = CliRunner().invoke(main, ["sweep", "--dry-run", "--json", "--vary", "prior_strength=0.2,0.5",
                                  "--vary", "algo.estimator=grpo,rloo", "--seeds", "2", "--steps", "2",
                                  "--out", str(tmp_path / "s")])
    assert r.exit_code == 0, r.output
    groups = json.loads(r.stdout.strip().splitlines()[-1])["groups"]
    assert len(groups) == 2 and all(g["plan"]["conditions"] == 2 and g["plan"]["seeds"] == 2 for g in groups)
    assert not (tmp_path / "s").exists()
