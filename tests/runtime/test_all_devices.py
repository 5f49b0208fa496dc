"""Checked here: a run spreads its chunks over every device of its platform (chunk i on device i mod n, one chunk
per device at a time), provenance lists the devices used, and the results are the same bits as on one device.

A machine with several accelerators is imitated on the CPU with ``XLA_FLAGS=--xla_force_host_platform_device_count=4``
in a fresh process (the flag is read when JAX starts)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import pandas as pd
import pytest

from tabsim.runtime import device, executors, planning
from tabsim.runtime.run import plan_of

TINY = {"task": {"n_prompts": 4}, "train": {"steps": 2, "batch_size": 2, "seeds": 1, "eval_every": 2}}


def test_each_chunk_computes_on_the_device_of_its_position():
    # two "devices" JAX tells apart as defaults: a platform name and a device (one CPU device here)
    devs = ("cpu", jax.devices("cpu")[0])
    seen = {}

    def chunk(i):
        seen[i] = jax.config.jax_default_device
        return i * 10

    ex = executors.LocalExecutor(threads=2, devices=devs)
    assert list(ex.map(chunk, range(5))) == [0, 10, 20, 30, 40]
    assert seen == {i: devs[i % 2] for i in range(5)}
    assert ex.used(5) == devs and ex.used(1) == devs[:1]
    assert jax.config.jax_default_device is None  # the workers' setting stayed in their threads
    assert executors.LocalExecutor(threads=2, devices=devs[1:]).devices is None  # one device: as before


def test_one_device_is_the_run_as_before_and_provenance_lists_it():
    cpu = jax.devices("cpu")[0]
    assert device.pool(cpu) == (cpu,)
    ex = planning.local_executor(None, (cpu,))
    assert ex.devices is None and ex.threads == executors.local_threads()
    plan = plan_of(TINY, device="cpu")
    assert plan.as_dict()["devices"] == ["cpu:0"] and plan.used_devices == (cpu,)
    assert device.describe(cpu, "cpu")["devices"] == ["cpu:0"]
    assert device.describe(cpu, "cpu", (cpu, cpu))["devices"] == ["cpu:0", "cpu:0"]


SCRIPT = r"""
import json, sys
import tabsim as ts
from tabsim.runtime import executables
cfg = {"task": {"n_prompts": 4}, "train": {"steps": 4, "batch_size": 2, "seeds": 2, "eval_every": 2,
       "chunk_conditions": 1}, "sweep": {"algo.lr": [0.05, 0.1, 0.2, 0.4, 0.8]}}
res = ts.run(cfg, progress=False, device="cpu")
fac = ts.run_factorial({"task": {"n_prompts": 4}, "train": {"steps": 2, "batch_size": 2, "eval_every": 2}},
                       {"lr": {"algo.lr": [0.1, 0.3]}}, seeds=3, units_per_chunk=1, progress=False, device="cpu")
res.frame.to_parquet(sys.argv[1] + "/run.parquet")
fac.frame.to_parquet(sys.argv[1] + "/factorial.parquet")
print(json.dumps({"run": res.provenance["devices"], "factorial": fac.provenance["devices"],
                  "plan": res.provenance["plan"]["devices"], "computed_on": sorted({s[1] for s in executables._LOADED})}))
"""


def _run_in(tmp, n_devices: int) -> dict:
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if "xla_force_host_platform_device_count" not in f]
    env = dict(os.environ, XLA_FLAGS=" ".join(flags + [f"--xla_force_host_platform_device_count={n_devices}"]),
               JAX_PLATFORMS="cpu")
    out = tmp / str(n_devices)
    out.mkdir()
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(out)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return {"where": out, **json.loads(done.stdout.strip().splitlines()[-1])}


@pytest.mark.heavy
def test_four_devices_compute_the_bits_of_one(tmp_path):
    four, one = _run_in(tmp_path, 4), _run_in(tmp_path, 1)
    names = ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]
    assert four["run"] == four["plan"] == four["factorial"] == names and four["computed_on"] == [0, 1, 2, 3]
    assert one["run"] == one["factorial"] == ["cpu:0"] and one["computed_on"] == [0]
    for name in ("run.parquet", "factorial.parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(four["where"] / name), pd.read_parquet(one["where"] / name),
                                      check_exact=True)
