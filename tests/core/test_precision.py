"""Precision of the compiled programs: every matrix product at full float32 precision, set per program.

On NVIDIA GPUs XLA computes a float32 ``dot_general`` whose precision is ``DEFAULT`` at a reduced
(TF32-class) precision, so each program must ask for ``HIGHEST`` itself. The request is visible in the
lowered StableHLO on any backend: one program of each family is lowered here on the CPU and every
``dot_general`` of its text must carry ``precision = [HIGHEST, HIGHEST]`` (or an explicit ``algorithm``).
"""
from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tabsim as ts
from tabsim.base import precision as precision_mod
from tabsim.config import resolve
from tabsim.sim.engine import make_segments
from tabsim.sim.params import HYPER_FIELDS, stack_hypers
from tabsim.sim.rng import seed_array
from tabsim.runtime.run import compiled_train

SMALL = {"train": {"steps": 2, "seeds": 1, "batch_size": 2, "group_size": 3, "pass_k": [1], "maj_k": [3]},
         "task": {"n_prompts": 3, "n_answers": 3, "n_correct": 1}}
FAMILIES = {  # one program of each family: (config, program builder)
    "bandit": {"preset": "paper", **SMALL},
    "tree": {"preset": "paper", **SMALL, "task": {**SMALL["task"], "env": "tree", "n_answers": 4,
                                                  "tree": {"depth": 2, "branching": 3}}},
    "expected": {"preset": "paper", **SMALL, "train": {**SMALL["train"], "dynamics": "expected"}},
    "batch-level": {"preset": "paper", **SMALL, "algo": {"estimator": "gpg", "aggregation": "token-mean"},
                    "train": {**SMALL["train"], "dynamics": "expected"}},
}
DOT = re.compile(r"stablehlo\.dot_general\b[^\n]*")


def dot_generals(text: str) -> list[str]:
    return DOT.findall(text)


def full_precision(line: str) -> bool:
    return "precision = [HIGHEST, HIGHEST]" in line or "algorithm = " in line


def lowered_text(cfg, program=None):
    program = program or compiled_train(cfg)
    hp = stack_hypers([cfg.hyper_values(g) for g in cfg.grid()], shared=HYPER_FIELDS)
    return program.lower(seed_array([0]), hp).as_text()


def check_text(text: str, *, products: bool = True):
    dots = dot_generals(text)
    assert dots or not products, "no dot_general in the program: the check would be empty"
    reduced = [d for d in dots if not full_precision(d)]
    assert not reduced, f"{len(reduced)} of {len(dots)} products below full precision, e.g. {reduced[0][:200]}"


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_product_of_each_program_family_is_at_full_precision(family):
    check_text(lowered_text(resolve(FAMILIES[family])))


def test_segment_programs_and_the_audit_calibration_program_are_at_full_precision():
    """The segments of a long run, and the program of the audit's calibration sweeps (its own config)."""
    from tabsim.audit.calibrate import CalibrationGrid
    from tabsim.runtime.run import algo_spec, make_env, schedule

    cfg = resolve(FAMILIES["tree"])
    seg = make_segments(make_env(cfg), algo_spec(cfg), schedule(cfg), tuple(cfg.arms.arms))
    check_text(lowered_text(cfg, seg.program("init")))
    _, _, raw = CalibrationGrid().configs()[0]
    calib = resolve(raw, train={"steps": 2, "seeds": 1}, sweep={"lr": [0.1, 0.3]})
    # the bandit's update needs no matrix product; its evaluation has one only for maj@k, which the
    # calibration does not ask for: whatever products the program gets must be at full precision
    check_text(lowered_text(calib), products=False)
    check_text(lowered_text(resolve(raw, train={"steps": 2, "seeds": 1, "maj_k": [3]}, sweep={"lr": [0.1, 0.3]})))


def test_the_setting_is_the_programs_not_the_process():
    """Tracing tabsim's programs leaves a user's own products at their default precision."""
    lowered_text(resolve(FAMILIES["bandit"]))
    x = jnp.ones((3, 3))
    user = jax.jit(lambda a, b: a @ b).lower(x, x).as_text()
    assert all("DEFAULT" in d for d in dot_generals(user))
    assert jax.dtypes.canonicalize_dtype(np.float64) == np.float32  # float64 only inside a scope


def test_precision_is_checked_at_the_edge_and_recorded_in_provenance():
    with pytest.raises(ValueError, match=r"precision: unknown precision 'float16'; allowed: float32, float64"):
        ts.run(FAMILIES["bandit"], precision="float16", progress=False)
    res = ts.run(FAMILIES["bandit"], precision="float64", progress=False)
    assert res.provenance["precision"] == "float64" and res.provenance["matmul_precision"] == "highest"
    assert ts.run(FAMILIES["bandit"], progress=False).provenance["precision"] == "float32"
