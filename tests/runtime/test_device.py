"""The device a run computes on (tabsim.runtime.device, ``--device``, ``ts.run(device=)``) and what
provenance records of it."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

import tabsim as ts
from tabsim.cli import main
from tabsim.runtime import device, planning

TINY = {"task": {"n_prompts": 4}, "train": {"steps": 2, "batch_size": 2, "seeds": 1, "eval_every": 2}}
TINY_TOML = '[task]\nn_prompts = 4\n[train]\nsteps = 2\nbatch_size = 2\nseeds = 1\neval_every = 2\n'


@pytest.fixture(autouse=True)
def _own_device_default(monkeypatch):
    # the commands' --device sets the process default; each test starts (and ends) without one
    monkeypatch.setenv(device.ENV, "auto")  # recorded as it was before, restored afterwards
    monkeypatch.delenv(device.ENV)


def test_a_choice_outside_the_list_is_refused_with_the_list():
    assert device.check_choice(" GPU ") == "gpu"
    with pytest.raises(device.DeviceError, match="'tpu' is not a device; allowed: auto, cpu, gpu"):
        device.check_choice("tpu")


def test_auto_keeps_small_work_on_the_cpu_and_a_missing_gpu_is_named():
    assert device.pick("auto", 1e6).platform == "cpu"
    assert device.pick("cpu").platform == "cpu"
    if device.devices("gpu"):  # pragma: no cover - a machine with a GPU
        assert device.pick("auto", 10 * device.gpu_threshold()).platform == "gpu"
        return
    assert device.pick("auto", 10 * device.gpu_threshold()).platform == "cpu"  # none here: the CPU
    with pytest.raises(device.DeviceError, match=r"no GPU is available to JAX here .*available: cpu"):
        device.pick("gpu")


def _study_work(**kw) -> float:
    from tabsim.studies.factorial import plan_units
    from tabsim.studies.reference.design import build_designs, settings

    work, _ = plan_units(list(build_designs(settings(**kw)).values()))
    return sum(planning.run_work(c, work.units_of(g).size, 1) for g, c in enumerate(work.configs))


def test_the_threshold_keeps_the_reference_study_on_the_cpu_and_sends_a_4096_seed_grid_to_the_gpu():
    """Calibrated on one H200 against its 16 cores: reproduce, --scale heavy and --seeds 1024 were faster
    on the CPU; a 4096-seed grid of 1024 prompts is 60-110x faster on the GPU."""
    limit = device.gpu_threshold(16)
    assert _study_work() < limit and _study_work(scale="heavy") < limit and _study_work(seeds=1024) < limit
    grid = ts.resolve({"task": {"n_prompts": 1024, "n_answers": 8},
                       "train": {"group_size": 8, "batch_size": 64, "steps": 50, "seeds": 4096}})
    assert planning.run_work(grid, 1, 4096) > limit
    assert _study_work() < device.gpu_threshold(2)  # on a laptop too


def test_provenance_records_the_device_versions_flags_and_command_line():
    prov = ts.run(TINY, progress=False, device="cpu").provenance
    assert prov["device"] == "cpu:0" and prov["device_kind"]
    assert prov["versions"]["jaxlib"] and prov["versions"]["numpy"] and prov["versions"]["optax"]
    assert prov["xla_flags"] == os.environ.get("XLA_FLAGS", "")
    assert prov["argv"] == sys.argv and "git_dirty" in prov


def test_provenance_outside_a_checkout_records_no_commit_as_the_users(tmp_path, monkeypatch):
    from tabsim.files.provenance import provenance

    monkeypatch.chdir(tmp_path)
    prov = provenance()
    assert prov["git_commit"] is None and prov["git_dirty"] is None


def test_an_unavailable_device_is_one_line_exit_2_and_nothing_on_disk(tmp_path, monkeypatch):
    if device.devices("gpu"):  # pragma: no cover - a machine with a GPU has one
        pytest.skip("this machine has a GPU")
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(TINY_TOML)
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["run", str(cfg), "--device", "gpu", "--out", "o", "-q"])
    assert r.exit_code == 2, r.output
    assert r.output.count("\n") == 1 and "no GPU is available" in r.output and "available: cpu" in r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.toml"]


def test_a_platform_jax_cannot_start_is_one_line_exit_2_and_nothing_on_disk(tmp_path):
    """JAX_PLATFORMS naming a platform this machine lacks: JAX itself fails with a bare AssertionError;
    the command says so in one line before it writes anything."""
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(TINY_TOML)
    env = {**os.environ, "JAX_PLATFORMS": "cuda"}
    r = subprocess.run([sys.executable, "-m", "tabsim.cli", "run", str(cfg), "--out", str(tmp_path / "o"), "-q"],
                       env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().count("\n") == 0 and "JAX_PLATFORMS='cuda'" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.toml"]


def test_version_names_jaxlib_the_backend_and_its_devices():
    r = CliRunner().invoke(main, ["--version"])
    assert r.exit_code == 0
    assert "tabsim " in r.output and "jaxlib " in r.output
    assert "default backend: cpu" in r.output and "devices: cpu" in r.output
