"""The commands pass --device, --precision, --pdf and --compile-cache to the library as arguments: running
them in this process leaves ``os.environ`` as it was, and the options still reach what they set."""
from __future__ import annotations

import json
import os

from click.testing import CliRunner

from tabsim.cli import main
from tabsim.base import defaults

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
    # and they lasted as long as the command: the library's defaults are the user's again
    assert defaults.figure_formats() == (defaults.figure_formats() if os.environ.get(defaults.FIGURE_FORMATS)
                                         else ["png"])
    assert defaults.device_setting() == (os.environ.get(defaults.DEVICE) or None)


def test_reproduce_refuses_a_precision_its_packed_job_does_not_compute(tmp_path):
    r = CliRunner().invoke(main, ["reproduce", "--precision", "float64", "-q", "--out", str(tmp_path / "r")])
    assert r.exit_code != 0 and "precision" in r.output and "allowed: float32" in r.output
    assert not (tmp_path / "r").exists()


def test_a_user_default_is_read_from_the_environment(monkeypatch):
    monkeypatch.setenv(defaults.FIGURE_FORMATS, "png,svg")
    monkeypatch.setenv(defaults.PRECISION, "float64")
    assert defaults.figure_formats() == ["png", "svg"] and defaults.precision() == "float64"
    with defaults.given(figure_formats=("pdf",), precision="float32"):
        assert defaults.figure_formats() == ["pdf"] and defaults.precision() == "float32"
        assert defaults.precision("float64") == "float64"  # an argument wins
    assert defaults.precision() == "float64"
