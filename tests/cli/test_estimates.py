"""What a run says before it starts, and what the process's environment may not change.

A sweep of static fields compiles one program per group before its chunks run; its estimate counts them.
``JAX_ENABLE_X64`` (or ``jax_enable_x64`` set by a notebook) made a float32 run compute in float64 while its
provenance said float32.
"""
from __future__ import annotations

import json

import jax
import numpy as np
import pytest
from click.testing import CliRunner

from tabsim.cli import main
from tabsim.cli.study import COMPILE_SECONDS
from tabsim.runtime.planning import describe_seconds

TINY = ["--seeds", "1", "--steps", "2", "--arms", "frozen,true", "--set", "train.batch_size=2",
        "--set", "train.group_size=2", "--set", "task.n_answers=3", "-q", "--no-figure", "--format", "csv"]


def test_a_sweep_of_many_static_groups_counts_their_compilation(tmp_path, monkeypatch):
    """3,000 groups of n_prompts were "about 28 s (compilation not included)": each compiles for seconds."""
    import tabsim.runtime.run as run_mod

    def stop(*a, **k):
        raise KeyboardInterrupt  # the estimate comes before anything runs

    monkeypatch.setattr(run_mod, "run", stop)
    n = 120
    levels = ",".join(str(16 + i) for i in range(n))
    res = CliRunner().invoke(main, ["sweep", "--vary", f"task.n_prompts={levels}", "--seeds", "2", "--steps", "10",
                                    "--out", str(tmp_path / "o"), "-q"])
    assert res.exit_code == 130, res.output
    line = next(ln for ln in res.stderr.splitlines() if "training runs" in ln)
    compiling = n * COMPILE_SECONDS["bandit"]
    assert f"including {describe_seconds(compiling)} of compilation for {n} programs" in line, line
    assert "not included" not in line
    total = line.split("; ", 1)[1].split(" on ", 1)[0]  # "about 14 min": compilation and training
    assert total == describe_seconds(compiling + _training(line)), line


def test_a_dry_run_counts_the_compilation_of_each_group():
    res = CliRunner().invoke(main, ["sweep", "--vary", "task.n_prompts=16,24,32", "--vary", "task.env=bandit,tree",
                                    "--seeds", "2", "--steps", "10", "--dry-run", "--json"])
    assert res.exit_code == 0, res.output
    plan = json.loads(res.stdout)
    assert plan["programs"] == 6
    assert plan["compile_seconds"] == 3 * (COMPILE_SECONDS["bandit"] + COMPILE_SECONDS["tree"])
    assert plan["estimate_seconds"] == pytest.approx(plan["compile_seconds"] + plan["training_seconds"], abs=1e-3)


def _training(line: str) -> float:
    """The training seconds the line states ("about N s of training")."""
    said = line.rsplit(" and ", 1)[1].split(" of training")[0]
    if said == "under a second":
        return 0.5
    value, unit = said.removeprefix("about ").split()
    return float(value) * {"s": 1, "min": 60, "h": 3600}[unit]


def test_a_float32_program_computes_in_float32_whatever_jax_enable_x64_says():
    """With ``jax_enable_x64`` on in the process (``JAX_ENABLE_X64=1``), a float32 run computed in float64."""
    from tabsim.base import precision

    jax.config.update("jax_enable_x64", True)  # what JAX_ENABLE_X64=1 sets when JAX loads
    try:
        with precision.scope("float32"):
            traced = precision.real()
            computed = jax.jit(lambda x: x * 2)(np.ones(2)).dtype
        with precision.scope("float64"):
            double = precision.real()
    finally:
        jax.config.update("jax_enable_x64", False)
    assert (traced, computed, double) == (np.float32, np.float32, np.float64)


@pytest.mark.heavy
def test_a_float32_run_writes_the_same_numbers_with_jax_enable_x64(tmp_path, monkeypatch):
    """The command end to end: the same bytes, and the variable on record in the provenance."""
    def run(out):
        res = CliRunner().invoke(main, ["sweep", "--vary", "prior_strength=0.3", *TINY, "--out", str(out)])
        assert res.exit_code == 0, res.output
        return (out / "results.csv").read_bytes(), json.loads((out / "provenance.json").read_text())

    plain, _ = run(tmp_path / "a")
    jax.config.update("jax_enable_x64", True)
    monkeypatch.setenv("JAX_ENABLE_X64", "1")
    try:
        x64, prov = run(tmp_path / "b")
    finally:
        jax.config.update("jax_enable_x64", False)
    assert prov["precision"] == "float32" and prov["environment"]["JAX_ENABLE_X64"] == "1"
    assert x64 == plain, "the float32 run computed other numbers with x64 switched on in the process"
