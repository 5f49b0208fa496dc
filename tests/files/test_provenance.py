"""Provenance read from real git repositories: file names git prints as raw bytes, the package's own
uncommitted edits, a working folder removed during the run."""
from __future__ import annotations

import os
import subprocess

import pytest

from tabsim.files import provenance as pv


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def _repo(path):
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "-q")
    _git(path, "config", "user.email", "t@example.org")
    _git(path, "config", "user.name", "t")
    _git(path, "config", "core.quotepath", "false")  # file names printed as their raw bytes
    return path


@pytest.fixture(autouse=True)
def _fresh_answers(monkeypatch):
    monkeypatch.setattr(pv, "_git_answers", {})  # git's answers are reused for a few seconds


def test_a_file_name_that_is_not_utf8_is_recorded_not_fatal(tmp_path, monkeypatch):
    repo = _repo(tmp_path / "user")
    name = os.fsencode(str(repo)) + b"/caf\xe9.txt"  # Latin-1: not UTF-8
    with open(name, "wb") as fh:
        fh.write(b"a\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "first")
    with open(name, "ab") as fh:
        fh.write(b"b\n")
    monkeypatch.chdir(repo)
    prov = pv.provenance()
    assert prov["git_dirty"] is True and len(prov["git_commit"]) == 40


def _package_checkout(tmp_path):
    """A checkout holding a package folder ``tabsim`` and a file beside it, committed."""
    repo = _repo(tmp_path / "checkout")
    (repo / "tabsim").mkdir()
    (repo / "tabsim" / "engine.py").write_text("X = 1\n")
    (repo / "notes.md").write_text("notes\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "first")
    return repo


def test_an_uncommitted_edit_to_the_package_marks_its_commit_dirty(tmp_path, monkeypatch):
    repo = _package_checkout(tmp_path)
    monkeypatch.setattr(pv, "PACKAGE", repo / "tabsim")
    monkeypatch.chdir(tmp_path)  # the user's folder: no checkout
    clean = pv.provenance()
    assert len(clean["tabsim_commit"]) == 40 and clean["tabsim_dirty"] is False
    (repo / "notes.md").write_text("edited beside the package\n")  # not the package's code
    pv._git_answers.clear()
    assert pv.provenance()["tabsim_dirty"] is False
    (repo / "tabsim" / "engine.py").write_text("X = 2\n")
    pv._git_answers.clear()
    prov = pv.provenance()
    assert prov["tabsim_commit"] == clean["tabsim_commit"] and prov["tabsim_dirty"] is True


def test_a_package_that_is_no_checkout_has_no_dirty_mark(tmp_path, monkeypatch):
    (tmp_path / "tabsim").mkdir()
    monkeypatch.setattr(pv, "PACKAGE", tmp_path / "tabsim")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    prov = pv.provenance()
    assert prov["tabsim_commit"] is None and prov["tabsim_dirty"] is None


def test_a_removed_working_folder_is_recorded_as_unknown(tmp_path, monkeypatch):
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    prov = pv.provenance()
    assert prov["git_commit"] is None and prov["git_dirty"] is None


def test_the_variables_that_can_change_the_numbers_are_recorded(tmp_path, monkeypatch):
    """``JAX_ENABLE_X64=1`` and JAX's other numeric variables left no trace in ``provenance.json``."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JAX_ENABLE_X64", "1")
    monkeypatch.setenv("JAX_DEFAULT_MATMUL_PRECISION", "bfloat16")
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=true")
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "cache"))  # a machine path, no numbers
    env = pv.provenance()["environment"]
    assert env == {"JAX_ENABLE_X64": "1", "JAX_DEFAULT_MATMUL_PRECISION": "bfloat16",
                   "XLA_FLAGS": "--xla_cpu_enable_fast_math=true"}
