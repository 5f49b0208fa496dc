"""Chunks are sized for the device they run on, and the numbers do not depend on the chunking.

On the CPU a factorial program's chunk holds about 4e6 sampled answers (small chunks run fastest there);
on an accelerator it holds as many units as half the device's free memory takes, up to
:data:`tabsim.runtime.planning.ACCELERATOR_ANSWERS`. The accelerator here is a stand-in with JAX's
``memory_stats()`` figures: what the plan reads of a device.

The bytes are the same for chunks of 32 units (a sweep: 32 seeds a condition) and more. Smaller
chunks may differ in the last bit of float32 evaluation sums on the CPU (measured: 1-16 units against
64), which is why the CPU keeps its chunk sizes.
"""
from __future__ import annotations

import hashlib
import io
import json
import types

import jax
import pandas as pd
import pytest

import tabsim as ts
from tabsim.runtime import planning, store
from tabsim.runtime.executors import LocalExecutor
from tabsim.studies.factorial import make_design, plan_units
from tabsim.studies.reference.design import build_designs, settings

BASE = {"preset": "paper", "task": {"n_prompts": 16}, "train": {"steps": 4, "eval_every": 2}}
FACTORS = {"prior": {"prior_strength": [0.3, 0.7]}, "reward": {"arm": ["true", "majority"]}}


def parquet_bytes(frame: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    frame.to_parquet(buf, index=False)
    return buf.getvalue()


def test_a_factorial_gives_the_same_bytes_in_small_chunks_and_in_one():
    """40 units: 32-unit chunks (the last one padded) against one chunk of 64."""
    small = ts.run_factorial(BASE, FACTORS, seeds=20, units_per_chunk=32, progress=False)
    one = ts.run_factorial(BASE, FACTORS, seeds=20, units_per_chunk=64, progress=False)
    assert small.provenance["n_chunks_job"] == 2 * one.provenance["n_chunks_job"]
    assert parquet_bytes(small.frame) == parquet_bytes(one.frame)


def test_a_sweep_gives_the_same_bytes_in_small_chunks_and_in_one():
    """32 seeds a condition: 1-condition chunks against one of 3."""
    cfg = {**BASE, "train": {**BASE["train"], "seeds": 32}, "sweep": {"prior_strength": [0.3, 0.45, 0.6]}}
    small = ts.run({**cfg, "train": {**cfg["train"], "chunk_conditions": 1}}, progress=False)
    one = ts.run({**cfg, "train": {**cfg["train"], "chunk_conditions": 3}}, progress=False)
    assert (small.provenance["n_chunks"], one.provenance["n_chunks"]) == (3, 1)
    assert parquet_bytes(small.frame) == parquet_bytes(one.frame)


def accelerator(free: float, used: float = 0):
    return types.SimpleNamespace(platform="gpu", memory_stats=lambda: {"bytes_limit": int(free + used),
                                                                       "bytes_in_use": int(used)})


def packed(designs, device=None, monkeypatch=None) -> tuple:
    """The planner's ``(ids, Chunk)`` pairs of ``designs`` and their programs' configs, on ``device`` (a
    ``jax.Device`` or a stand-in accelerator; default: the planner's own pick)."""
    work, _ = plan_units(designs)
    if device is not None:
        monkeypatch.setattr(planning.device_mod, "pick", lambda choice, work=None: device)
    plan = planning.plan(work, executor=LocalExecutor(threads=1))
    return plan.parts, work.configs


def reference_programs(seeds: int):
    designs = list(build_designs(settings(seeds=seeds)).values())
    chunks, programs = packed(designs)
    return designs, chunks, programs


def test_an_accelerator_takes_a_4096_seed_study_in_a_few_chunks(monkeypatch):
    designs, cpu, programs = reference_programs(4096)
    gpu, _ = packed(designs, accelerator(139e9), monkeypatch)
    assert len(cpu) > 2000  # 32-unit chunks on the CPU, as before
    assert len(gpu) <= 4 * len(programs)
    assert sum(len(ids) for ids, _ in gpu) == sum(len(ids) for ids, _ in cpu)
    same, _ = packed(designs, jax.devices("cpu")[0], monkeypatch)  # the CPU, named: as before
    assert [len(ids) for ids, _ in same] == [len(ids) for ids, _ in cpu]


@pytest.mark.parametrize("free", [2e9, 20e9, 139e9])
def test_an_accelerators_chunk_fits_half_its_free_memory(free):
    _, _, programs = reference_programs(4096)
    for cfg in programs:
        u = planning.units_per_chunk(cfg, 1 << 16, device=accelerator(free, used=5e9))
        assert planning.estimate_bytes(cfg, u, 1) <= planning.MEMORY_FRACTION * free
        assert planning.estimate_bytes(cfg, 2 * u, 1) > planning.MEMORY_FRACTION * free or u == 1 << 16 or (
            u * 2 * cfg.train.steps * cfg.train.batch_size * cfg.train.group_size * len(cfg.arms.arms)
            > planning.ACCELERATOR_ANSWERS)


def test_a_sweep_chunk_on_an_accelerator_is_larger_and_fits():
    cfg = ts.resolve({"preset": "paper", "train": {"seeds": 64}})
    cpu = planning.conditions_per_chunk(cfg, 4096, 64)
    gpu = planning.conditions_per_chunk(cfg, 4096, 64, device=accelerator(80e9))
    assert gpu > cpu and planning.estimate_bytes(cfg, gpu, 64) <= planning.MEMORY_FRACTION * 80e9
    with pytest.raises(ts.ConfigError, match="train.chunk_conditions"):  # asked for more than the device holds
        planning.conditions_per_chunk(cfg.model_copy(update={"train": cfg.train.model_copy(
            update={"chunk_conditions": 4096})}), 4096, 64, device=accelerator(1e8))


def test_a_jobs_key_is_the_digest_of_its_chunks_json():
    """The key names the work: every unit's hyperparameters and seed, written once per shared mapping."""
    _, chunks, _ = reference_programs(64)
    parts = ("designs", [(c.config, c.hypers, c.seeds, c.n_real) for _, c in chunks])
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"))
    assert store.job_key(*parts) == hashlib.sha256(blob.encode()).hexdigest()[:16]
    hypers = list(chunks[0][1].hypers)
    hypers[-1] = {**hypers[-1], "lr": hypers[-1]["lr"] * 2}  # one unit's value changed: another job
    changed = [(c.config, tuple(hypers) if i == 0 else c.hypers, c.seeds, c.n_real) for i, (_, c) in enumerate(chunks)]
    assert store.job_key("designs", changed) != store.job_key(*parts)


def test_a_short_runs_cpu_chunks_are_sized_by_their_arrays_not_only_their_answers():
    """At 2 steps the sampled answers alone would take chunks of 4096 units; their arrays cap them near the
    caches. At the paper's 200 steps the answers decide, as before (32 units)."""
    for steps, expected in ((2, None), (None, 32)):
        designs = list(build_designs(settings(seeds=4096, steps=steps)).values())
        chunks, (cfg,) = packed(designs)
        u = max(len(c.seeds) for _, c in chunks)
        assert planning.estimate_bytes(cfg, u, 1) <= planning.CPU_CHUNK_BYTES
        assert u == expected or 2 * u * planning.estimate_bytes(cfg, 1, 1) > planning.CPU_CHUNK_BYTES
