"""A pre-registered run records paths relative to the repository (or the plan's folder), never the
absolute paths of the machine that ran it, and its record still verifies once the repository moves."""
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tabsim.cli.prereg import command as prereg_command
from tabsim.files.provenance import portable_argv, portable_path
from tabsim.prereg import integrity
from tabsim.prereg.results import load_run, plan_file
from tiny_plan import tiny_plan  # tests/prereg: the one-cell plan

PLAN = tiny_plan("Paths test", seeds=2, steps=3)


def cli(*args):
    res = CliRunner().invoke(prereg_command, [str(a) for a in args])
    assert res.exit_code == 0, res.output
    return res.output


def git(repo, *args):
    import subprocess

    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "commit.gpgsign=false", *args],
                   cwd=repo, env=env, check=True, capture_output=True)


def strings(value):
    """Every string in a JSON document, keys included."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)
    elif isinstance(value, str):
        yield value


def absolute_paths(folder: Path, machine: str) -> list[str]:
    """``file: text`` for each absolute path (or mention of ``machine``) in the text files under ``folder``."""
    found = []
    for p in sorted(folder.rglob("*")):
        if not p.is_file() or p.suffix not in (".json", ".md"):
            continue
        text = p.read_text()
        found += [f"{p.name}: {machine}"] if machine in text else []
        if p.suffix == ".json":
            found += [f"{p.name}: {s}" for s in strings(json.loads(text)) if os.path.isabs(s)]
    return found


@pytest.fixture
def frozen_code(tmp_path, monkeypatch):
    """The code digest read from a copy of the package: edits to the working tree while the test runs are
    no code change between the lock and the run."""
    site = tmp_path / "site"
    shutil.copytree(integrity.code_root(), site / "tabsim", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    monkeypatch.setattr(integrity, "code_root", lambda: site / "tabsim")


def test_a_fresh_run_records_no_absolute_path_and_verifies_after_the_repository_moves(tmp_path, monkeypatch,
                                                                                     frozen_code):
    repo = tmp_path / "repo"
    (repo / "studies" / "tiny").mkdir(parents=True)
    git(repo, "init", "-q")
    plan = repo / "studies" / "tiny" / "plan.yaml"
    plan.write_text(yaml.safe_dump(PLAN, sort_keys=False))
    cli("lock", plan)
    git(repo, "add", "studies")
    git(repo, "commit", "-q", "-m", "plan and lock")
    out = repo / "runs" / "tiny"  # not beside the plan: only the recorded path finds it
    # the command line as a shell gives it: the program's absolute path, absolute arguments
    monkeypatch.setattr(sys, "argv", ["/opt/venv/bin/tabsim", "prereg", "run", str(plan), f"--out={out}", "-q"])
    monkeypatch.chdir(tmp_path)
    cli("run", plan, "--out", out, "-q")
    cli("run", plan, "--exploratory", "--out", repo / "runs" / "explore", "-q")

    assert absolute_paths(repo, str(tmp_path)) == []
    results = json.loads((out / "results.json").read_text())
    assert results["prereg"]["file"] == "studies/tiny/plan.yaml"
    assert json.loads((out / "status.json").read_text())["prereg_file"] == "studies/tiny/plan.yaml"
    assert json.loads((out / "report.json").read_text())["prereg_file"] == "studies/tiny/plan.yaml"
    assert results["provenance"]["argv"] == ["tabsim", "prereg", "run", "studies/tiny/plan.yaml",
                                             "--out=runs/tiny", "-q"]
    log = json.loads((repo / "studies" / "tiny" / "plan.yaml.exploratory.json").read_text())
    assert [r["out"] for r in log["runs"]] == ["runs/explore"]

    # moved to another machine's folder, read from a third: the plan is found and the record verifies
    moved = tmp_path / "elsewhere" / "checkout"
    shutil.copytree(repo, moved, symlinks=True)
    shutil.rmtree(repo)
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    assert plan_file(results, moved / "runs" / "tiny") == moved / "studies" / "tiny" / "plan.yaml"
    load_run(moved / "runs" / "tiny")
    cli("report", moved / "runs" / "tiny", "--strict")
    rep = json.loads((moved / "runs" / "tiny" / "report.json").read_text())
    assert rep["integrity"]["plan_commit"]["state"] == "before the run"


def test_portable_paths_are_relative_to_the_first_anchor_that_holds_them_else_the_name(tmp_path):
    repo, plan_dir = tmp_path / "repo", tmp_path / "repo" / "studies" / "a"
    anchors = (repo, plan_dir)
    assert portable_path(plan_dir / "plan.yaml", anchors) == "studies/a/plan.yaml"
    assert portable_path(plan_dir / "plan.yaml", (plan_dir,)) == "plan.yaml"
    assert portable_path(tmp_path / "outside" / "run", anchors) == "run"
    assert portable_path(repo, anchors) == "."
    argv = ["/usr/local/bin/tabsim", "run", str(plan_dir / "plan.yaml"), "--out", str(tmp_path / "o"),
            f"--out={repo / 'r'}", "relative/x.yaml", "-q"]
    assert portable_argv(argv, anchors) == ["tabsim", "run", "studies/a/plan.yaml", "--out", "o", "--out=r",
                                            "relative/x.yaml", "-q"]
    assert portable_argv([], anchors) == []
