"""The commands pass --device, --precision, --pdf and --compile-cache to the library as arguments: running
them in this process leaves ``os.environ`` as it was, and the options still reach what they set."""
from __future__ import annotations

import ast
import json
import os
from pathlib import Path

from click.testing import CliRunner

from tabsim.base import defaults
from tabsim.base.defaults import DeviceChoice
from tabsim.cli import main

SMALL = ["--vary", "prior_strength=0.5", "--seeds", "2", "--steps", "2", "--set", "task.n_prompts=8",
         "--set", "train.batch_size=4", "--set", "train.group_size=2"]


def test_commands_leave_the_environment_as_it_was(tmp_path):
    import jax

    jax.devices()  # JAX sets its own logging variables as its backends start: not the commands' doing
    before = dict(os.environ)
    runs = [
        ["--compile-cache", str(tmp_path / "cache"), "sweep", *SMALL, "--device", "cpu", "--precision", "float64",
         "--pdf", "--json", "-q", "--out", str(tmp_path / "s")],
        ["--no-compile-cache", "run", "--dry-run", "--device", "cpu", "--pdf", str(tmp_path / "c.toml")],
        ["reproduce", "--dry-run", "--device", "cpu", "--precision", "float32", "--pdf", "-q",
         "--out", str(tmp_path / "r")],
    ]
    (tmp_path / "c.toml").write_text('preset = "paper"\n[task]\nn_prompts = 8\n'
                                     '[train]\nseeds = 2\nsteps = 2\nbatch_size = 4\n')
    for args in runs:
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 0, (args, r.output)
        assert dict(os.environ) == before, args
    # the options reached the run: its figure in both formats, its programs in float64 on the CPU
    prov = json.loads((tmp_path / "s" / "provenance.json").read_text())
    assert prov["precision"] == "float64" and prov["device"].startswith("cpu") and prov["device_choice"] == "cpu"
    assert (tmp_path / "s" / "pass1.png").is_file() and (tmp_path / "s" / "pass1.pdf").is_file()


def test_reproduce_refuses_a_precision_its_packed_job_does_not_compute(tmp_path):
    r = CliRunner().invoke(main, ["reproduce", "--precision", "float64", "-q", "--out", str(tmp_path / "r")])
    assert r.exit_code != 0 and "precision" in r.output and "allowed: float32" in r.output
    assert not (tmp_path / "r").exists()


def test_a_user_default_is_read_from_the_environment(monkeypatch):
    monkeypatch.setenv(defaults.FIGURE_FORMATS, "png,svg")
    monkeypatch.setenv(defaults.PRECISION, "float64")
    assert defaults.figure_formats() == ["png", "svg"] and defaults.precision() == "float64"
    assert defaults.precision("float32") == "float32"  # an argument wins


PACKAGE = Path(__file__).resolve().parents[2] / "tabsim"
TABLE = PACKAGE.parent / "experiments" / "audits" / "ttrl.yaml"  # a shipped table of published results


def test_no_module_below_the_commands_reads_a_commands_options_from_a_context():
    """The library has no channel for a command's options but its arguments: no context of defaults in
    tabsim.base.defaults, and no module outside tabsim/cli asks click for the running command's context."""
    assert not hasattr(defaults, "given") and not hasattr(defaults, "_GIVEN")
    readers = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent.name == "cli":
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Attribute) and node.attr == "get_current_context":
                readers.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert readers == []


class _Stop(Exception):
    """Raised by a stand-in for the library call, once it has recorded its arguments."""


def _record(monkeypatch, module, name, calls: list):
    def stand_in(*args, **kwargs):
        calls.append(kwargs)
        raise _Stop

    monkeypatch.setattr(module, name, stand_in)


def test_audits_options_reach_the_calls_as_arguments(tmp_path, monkeypatch):
    """``tabsim audit --pdf --device cpu --precision float64``: the figure call is given the formats, the
    calibration its device and precision, each as an argument (the device as the process's own choice);
    ``--no-compile-cache`` is applied by the command before anything computes."""
    import tabsim.audit.core as core
    import tabsim.audit.report as report
    from tabsim.runtime import cache

    monkeypatch.delenv(defaults.FIGURE_FORMATS, raising=False)
    calls, cached = [], []
    monkeypatch.setattr(cache, "disable_compilation_cache", lambda: cached.append("off"))
    _record(monkeypatch, core, "audit", calls)
    def args(out, *more):
        return ["--no-compile-cache", "audit", str(TABLE), "--no-calibration", "--no-cache",
                "--device", "cpu", "--precision", "float64", "-q", "--out", str(tmp_path / out), *more]

    r = CliRunner().invoke(main, args("a", "--pdf"))
    assert isinstance(r.exception, _Stop), r.output
    assert calls[0]["device"] == DeviceChoice("cpu", process=True) and calls[0]["precision"] == "float64"
    assert cached == ["off"]

    calls.clear()
    monkeypatch.setattr(core, "audit", lambda *a, **k: "result")
    _record(monkeypatch, report, "write_outputs", calls)
    r = CliRunner().invoke(main, args("b", "--pdf"))
    assert isinstance(r.exception, _Stop), r.output
    assert calls[0]["formats"] == ("png", "pdf")
    monkeypatch.setenv(defaults.FIGURE_FORMATS, "svg")  # without --pdf: the user's default, read at the command
    r = CliRunner().invoke(main, args("c"))
    assert calls[1]["formats"] == ("svg",)
    monkeypatch.setenv(defaults.FIGURE_FORMATS, "jpg")  # a bad one: refused in one line before anything runs
    r = CliRunner().invoke(main, args("d"))
    assert r.exit_code == 2 and r.output.count("\n") == 1 and len(calls) == 2, r.output
    assert "$TABSIM_FIGURE_FORMATS: figure format 'jpg': allowed: png, pdf, svg" in r.output


def test_prereg_and_claims_runs_take_the_commands_device_as_an_argument(tmp_path, monkeypatch):
    import tabsim.prereg.claims as claims
    import tabsim.prereg.runner as runner

    monkeypatch.setenv(defaults.DEVICE, "cpu")  # the user's default, resolved at the command
    calls = []
    _record(monkeypatch, runner, "run_study", calls)
    plan = tmp_path / "plan.yaml"
    plan.write_text("title: x\n")
    r = CliRunner().invoke(main, ["prereg", "run", str(plan), "--exploratory", "-q", "--out", str(tmp_path / "p")])
    assert isinstance(r.exception, _Stop), r.output
    assert calls[0]["device"] == DeviceChoice("cpu", process=True)

    monkeypatch.setattr(claims, "load_claims", lambda root, ids: ["a claim"])
    _record(monkeypatch, claims, "run_claim", calls)
    r = CliRunner().invoke(main, ["claims", "run", "--quick", "--device", "auto", "--precision", "float64", "-q",
                                  "--out", str(tmp_path / "c")])
    assert isinstance(r.exception, _Stop), r.output
    assert calls[1]["device"] == DeviceChoice("auto", process=True) and calls[1]["precision"] == "float64"
