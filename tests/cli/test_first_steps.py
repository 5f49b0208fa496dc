"""What a newcomer meets first: ``--json`` on every command, a reproduce config given to ``run``, a bad
config refused before JAX loads, ``python -m tabsim``, the license, ``--preset`` completion and the
pre-run estimate of a short run."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tabsim.cli import main, walk
from tabsim.config.presets import PRESETS

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("jax", "scipy.optimize", "pandas", "numpy")  # numpy: a third of a refusal's time


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


# -- --json on every command ---------------------------------------------------------------------------
def test_every_command_takes_json():
    """docs/cli.md: every command takes --json (each command that runs, not the groups that hold them)."""
    leaves = [(" ".join(path), cmd) for path, cmd in walk(main) if not isinstance(cmd, click.Group)]
    assert len(leaves) >= 12
    missing = [name for name, cmd in leaves if "--json" not in {o for p in cmd.params for o in p.opts}]
    assert not missing, f"commands without --json: {missing}"


def test_config_show_json_prints_one_object():
    import tabsim as ts

    res = cli("config", "show", "paper", "--json")
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)  # the whole of stdout is one object
    from tabsim.config.models import default_eval_every

    # what tabsim run runs: the preset with the command line's evaluation cadence filled in
    every = default_eval_every(ts.resolve({"preset": "paper"}).train.steps)
    assert got["config"] == ts.resolve({"preset": "paper", "train": {"eval_every": every}}).model_dump(mode="json")


# -- a reproduce run's config.json ----------------------------------------------------------------------
REPRO = {"settings": {"preset": "paper", "scale": "default", "seeds": 3, "steps": 10, "factorial_seeds": 3,
                      "factorial_steps": 10, "pilot_seeds": 4, "pilot_replicates": 2, "power_seeds": 4, "task": {},
                      "train": {}, "n_resamples": 2000, "overrides": {"algo": {"lr": 0.1}}},
         "designs": {"sweep": {"preset": "paper"}}, "constants": {"ci_level": 0.95}}


@pytest.mark.parametrize("args", [("run", "{f}"), ("sweep", "--config", "{f}")])
def test_a_reproduce_config_is_named_with_how_to_rerun_it(args, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(REPRO))
    res = cli(*(a.format(f=path) for a in args))
    assert res.exit_code == 2, res.output
    (line,) = [ln for ln in res.output.splitlines() if ln.startswith("Error:")]
    assert "unknown field" not in res.output
    assert "tabsim reproduce run" in line and "tabsim reproduce --seeds 3 --steps 10 --set algo.lr=0.1" in line


# -- a bad config is refused before JAX loads -----------------------------------------------------------
def test_validating_a_config_loads_no_jax(tmp_path):
    out = _python(f"""
        import sys
        from tabsim.config import ConfigError, resolve
        resolve({{"preset": "paper", "task": {{"env": "tree", "tree": {{"depth": 3}}}}, "sweep": {{"lr": [0.1, 0.2]}}}})
        try:
            resolve({{"preset": "dapo", "algo": {{"estimator": "grpoo"}}}})
        except ConfigError as err:
            print("refused:", err)
        print("loaded:", [m for m in {HEAVY!r} if m in sys.modules])
        """, tmp_path)
    assert out.returncode == 0, out.stderr
    assert "did you mean `grpo`" in out.stdout
    assert "loaded: []" in out.stdout, out.stdout


@pytest.mark.parametrize("args", [("run", "bad.toml"), ("sweep", "--config", "bad.toml"),
                                  ("run", "bad.toml", "--vary", "algo.estimator=grpo,rloo")])
def test_the_command_line_refuses_a_bad_config_before_jax(args, tmp_path):
    (tmp_path / "bad.toml").write_text('preset = "paper"\n[algo]\nlr = -1.0\n')
    out = _python(f"""
        import sys
        from click.testing import CliRunner
        from tabsim.cli import main
        res = CliRunner().invoke(main, {list(args)!r})
        print("exit", res.exit_code, res.output)
        print("loaded:", [m for m in {HEAVY!r} if m in sys.modules])
        """, tmp_path)
    assert out.returncode == 0, out.stderr
    assert "exit 1" in out.stdout and "algo.lr" in out.stdout and "loading the engine" not in out.stdout
    assert "loaded: []" in out.stdout, out.stdout


def test_builtin_names_are_the_registries_and_a_registered_one_is_accepted(tmp_path):
    """tabsim.base.choices lists each registry's built-in names; a component registered at run time is taken."""
    out = _python("""
        from tabsim.sim import algos, arms, envs, params, rng
        from tabsim.base import choices
        from tabsim.config import resolve
        for name in ("ESTIMATORS", "RATIOS", "SURROGATES", "AGGREGATIONS", "KL_ESTIMATORS"):
            assert tuple(getattr(algos, name)) == getattr(choices, name), name
        assert params.HYPER_FIELDS == choices.HYPER_FIELDS
        assert (arms.ARMS, envs.ANSWER_METRICS, rng.RNGS) == (choices.ARMS, choices.ANSWER_METRICS, choices.RNGS)
        algos.register_estimator("mine")(algos.ESTIMATORS["grpo"])
        print(resolve({"algo": {"estimator": "mine"}}).algo.estimator)
        """, tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "mine"


# -- python -m tabsim, the license, completion, the estimate ---------------------------------------------
def test_python_m_tabsim_is_the_command(tmp_path):
    out = subprocess.run([sys.executable, "-m", "tabsim", "presets"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert set(PRESETS) <= {line.split()[0] for line in out.stdout.splitlines() if line.strip()}


def test_the_license_is_the_mit_text_pyproject_names():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert meta["license"] == "MIT" and meta["license-files"] == ["LICENSE"]  # an SPDX expression (PEP 639)
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "Copyright (c) 2026 tabsim contributors" in text
    assert "Permission is hereby granted, free of charge" in text and 'THE SOFTWARE IS PROVIDED "AS IS"' in text


@pytest.mark.parametrize("command", ["run", "sweep", "reproduce"])
def test_preset_completes_preset_names(command):
    cmd = main.get_command(click.Context(main), command)
    (opt,) = [p for p in cmd.params if "--preset" in p.opts]
    ctx = click.Context(cmd)
    assert [c.value for c in opt.shell_complete(ctx, "d")] == sorted(n for n in PRESETS if n.startswith("d"))
    assert [c.value for c in opt.shell_complete(ctx, "")] == sorted(PRESETS)


def test_a_short_run_is_estimated_at_under_a_second(capsys):
    import tabsim as ts
    from tabsim.cli.study import announce_estimate

    cfg = ts.resolve({"preset": "paper", "task": {"n_prompts": 8}, "train": {"steps": 2, "seeds": 2, "batch_size": 4}})
    announce_estimate(cfg, "tabsim run", quiet=False)
    err = capsys.readouterr().err
    assert "under a second of training" in err and "about 0 s" not in err
