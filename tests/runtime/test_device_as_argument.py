"""The device option is resolved once where a run starts (an argument, a command's ``--device`` among them, else
``$TABSIM_DEVICE``, else ``auto``: tabsim.base.defaults.device_choice) and travels down as an argument: the
planner and the device module read neither the command's options nor the environment, and the compute stage
takes the plan's device without planning or picking again."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import tabsim as ts
from tabsim.base import defaults
from tabsim.base.defaults import DeviceChoice, device_choice
from tabsim.cli import main
from tabsim.runtime import device as device_mod
from tabsim.runtime import planning
from tabsim.runtime import run as run_mod
from tabsim.runtime.run import plan_of

PACKAGE = Path(__file__).resolve().parents[2] / "tabsim"
# the runtime below the entry points: the plan, the device choice, the executors and what computes a chunk
BELOW = ("planning.py", "device.py", "executors.py", "programs.py", "store.py", "segments.py", "memory.py")
OPTION_READS = {"device", "device_choice"}
TINY = {"task": {"n_prompts": 4}, "train": {"steps": 2, "batch_size": 2, "seeds": 1, "eval_every": 2}}
TINY_TOML = '[task]\nn_prompts = 4\n[train]\nsteps = 2\nbatch_size = 2\nseeds = 1\neval_every = 2\n'


@pytest.fixture(autouse=True)
def _no_device_default(monkeypatch):
    monkeypatch.delenv(defaults.DEVICE, raising=False)


def _option_reads(path: Path) -> list[str]:
    """``file:line`` of each use of a device option reader of tabsim.base.defaults (``defaults.device(...)``,
    ``from tabsim.base.defaults import device_choice``, ...)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Attribute) and node.attr in OPTION_READS and getattr(node.value, "id", "") == "defaults":
            found.append(f"{path.name}:{node.lineno}")
        elif (isinstance(node, ast.ImportFrom) and (node.module or "").endswith("defaults")
              and {a.name for a in node.names} & OPTION_READS):
            found.append(f"{path.name}:{node.lineno}")
    return found


def test_the_runtime_below_the_entry_points_reads_no_device_option():
    found = [hit for name in BELOW for hit in _option_reads(PACKAGE / "runtime" / name)]
    assert found == [], f"the device arrives as an argument; these read the command's option or $TABSIM_DEVICE: {found}"
    assert _option_reads(PACKAGE / "cli" / "options.py")  # the check sees a read where there is one


def _work():
    cfg = ts.resolve(TINY)
    return planning.Work.of_grid(cfg, [cfg.hyper_values(g) for g in cfg.grid()], [0], "float32")


def test_the_plan_takes_its_device_as_an_argument_whatever_the_environment_says(monkeypatch):
    monkeypatch.setenv(defaults.DEVICE, "gpu")
    for arg, choice in ((None, "auto"), ("cpu", "cpu"), (DeviceChoice("cpu", True), "cpu")):
        plan = planning.plan(_work(), device=arg, progress=False)
        assert plan.device.platform == "cpu" and plan.device_choice == choice, arg
        assert device_mod.pick(arg, 1e3).platform == "cpu"
    # provenance records the choice it is given, not the environment's
    assert device_mod.describe(plan.device)["device_choice"] is None
    assert device_mod.describe(plan.device, "cpu")["device_choice"] == "cpu"


def test_the_entry_point_resolves_argument_then_environment_then_auto(monkeypatch):
    assert device_choice() == DeviceChoice("auto", False)
    monkeypatch.setenv(defaults.DEVICE, "cpu")
    assert device_choice() == DeviceChoice("cpu", True)  # the process's own: a CPU choice starts no accelerator
    assert device_choice("gpu") == DeviceChoice("gpu", False)  # an argument wins, and is the caller's
    resolved = DeviceChoice("gpu", True)  # a command's --device arrives so
    assert device_choice(resolved) is resolved  # a resolved value passes through every entry point unchanged
    assert plan_of(TINY).device_choice == "cpu"  # ts.run's plan: $TABSIM_DEVICE, read at the entry point


def test_compute_neither_plans_nor_picks_a_device(monkeypatch):
    plan = plan_of(TINY, device="cpu")

    def entered(*args, **kwargs):
        raise AssertionError("the compute stage entered planning or the device choice")

    for name in ("pick", "pool", "resolved", "check_choice", "describe", "devices", "available", "using"):
        monkeypatch.setattr(device_mod, name, entered, raising=False)
    monkeypatch.setattr(planning, "plan", entered)
    assert run_mod.compute(plan, "job", fn=lambda c: list(c.seeds)) == [list(run_mod.run_seeds(ts.resolve(TINY)))]


def test_the_commands_take_tabsim_device_when_device_is_not_given(tmp_path, monkeypatch):
    (tmp_path / "c.toml").write_text(TINY_TOML)
    monkeypatch.setenv(defaults.DEVICE, "cpu")
    r = CliRunner().invoke(main, ["run", "--dry-run", "--json", str(tmp_path / "c.toml")])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["groups"][0]["plan"]["device_choice"] == "cpu"
    r = CliRunner().invoke(main, ["run", "--dry-run", "--json", "--device", "auto", str(tmp_path / "c.toml")])
    assert json.loads(r.stdout)["groups"][0]["plan"]["device_choice"] == "auto"  # the option wins
    monkeypatch.setenv(defaults.DEVICE, "tpu")
    r = CliRunner().invoke(main, ["run", "--dry-run", str(tmp_path / "c.toml")])
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    assert "$TABSIM_DEVICE: 'tpu' is not a device; allowed: auto, cpu, gpu" in r.output


def test_a_commands_device_and_precision_are_its_option_else_the_users_variable(monkeypatch):
    import click

    from tabsim.cli.options import chosen, executor_options

    @click.command()
    @executor_options
    def probe(executor, workers, scheduler):
        # what the command hands on as arguments: its option, else the user's variable, resolved at the command
        click.echo(f"{chosen('device')} {chosen('precision')}")

    monkeypatch.setenv(defaults.DEVICE, "cpu")
    monkeypatch.setenv(defaults.PRECISION, "float64")
    r = CliRunner().invoke(probe, [])
    assert r.exit_code == 0 and r.output.strip() == "DeviceChoice(name='cpu', process=True) float64", r.output
    r = CliRunner().invoke(probe, ["--device", "auto", "--precision", "float32"])
    assert r.output.strip() == "DeviceChoice(name='auto', process=True) float32", r.output  # the process's own
    monkeypatch.setenv(defaults.PRECISION, "f16")
    r = CliRunner().invoke(probe, [])
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    assert "$TABSIM_PRECISION: 'f16' is not a precision; allowed: float32, float64" in r.output
