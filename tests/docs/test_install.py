"""One install line: the README and the quickstart give the same one, and the extras they name exist; the
version is written once; the sdist and wheel build, and the wheel installs and runs in a fresh virtualenv."""
from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

import tabsim

ROOT = Path(__file__).resolve().parents[2]


def _first_install(path: Path) -> str:
    return next(ln.split("#")[0].strip() for ln in path.read_text().splitlines() if ln.startswith("pip install"))


def test_readme_and_quickstart_install_alike():
    assert _first_install(ROOT / "README.md") == _first_install(ROOT / "docs" / "quickstart.md") == "pip install -e ."


def test_every_extra_the_docs_name_exists():
    with open(ROOT / "pyproject.toml", "rb") as f:
        extras = set(tomllib.load(f)["project"]["optional-dependencies"])
    texts = [ROOT / "README.md", ROOT / "notebooks" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    named = {e for p in texts for group in re.findall(r'\.\[([\w,]+)\]', p.read_text()) for e in group.split(",")}
    assert named and named <= extras, named - extras
    assert {"dask", "notebook", "test"} <= named


def _floor(requirement: str) -> tuple[int, ...]:
    return tuple(int(x) for x in requirement.split(">=", 1)[1].split(".") if x.isdigit())


def test_release_metadata_and_citation():
    """The metadata a release shows (an SPDX license with its file, authors, classifiers, links) in the form
    setuptools builds without deprecation, and a citation file that cites this version and the reference
    study."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        pyproject = tomllib.load(f)
    project = pyproject["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert project["authors"] and all(a.get("name") for a in project["authors"])
    classifiers = project["classifiers"]
    assert "Intended Audience :: Science/Research" in classifiers
    assert not [c for c in classifiers if c.startswith("License ::")], "PEP 639: the license expression says it"
    assert project["urls"] and all(url.startswith("https://") for url in project["urls"].values())
    # setuptools reads an SPDX string and license-files from 77.0.3 on; the test extra builds with the same floor
    backend = next(r for r in pyproject["build-system"]["requires"] if r.startswith("setuptools"))
    extra = next(r for r in project["optional-dependencies"]["test"] if r.startswith("setuptools"))
    assert _floor(backend) >= (77, 0, 3) and _floor(extra) == _floor(backend), (backend, extra)

    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software" and cff["license"] == project["license"]
    assert cff["version"] == tabsim.__version__
    assert isinstance(cff["date-released"], datetime.date)  # YAML reads an ISO date as a date, not a string
    (study,) = [r for r in cff["references"] if "2606.05932" in r.get("url", "")]
    assert study["title"] and study["authors"] and study["year"] == 2026
    assert "arXiv:2606.05932" in [i["value"] for i in study["identifiers"]]


# -- a package that installs like a release ------------------------------------------------------------------
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "CITATION.cff", "tabsim")
TWO_STEPS = ["run", "CONFIG", "--set", "train.steps=2", "--set", "train.eval_every=1", "--seeds", "2", "-q", "--json",
             "--no-figure", "--out"]


def _build(tmp_path, *, isolated: bool):
    """The sdist and the wheel built from it (``python -m build``), from a copy of the sources. Built here
    (not isolated), every warning is an error: a metadata form setuptools deprecates fails this build before
    it fails a release."""
    src = tmp_path / "src"
    src.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(ROOT / name, src / name)
    flags = [] if isolated else ["--no-isolation"]  # the build-system's requirements are in the test extra
    env = None if isolated else {**os.environ, "PYTHONWARNINGS": "error"}  # reaches the build backend
    got = subprocess.run([sys.executable, "-m", "build", "--outdir", str(tmp_path / "dist"), *flags, str(src)],
                         capture_output=True, text=True, env=env)
    assert got.returncode == 0, (got.stdout + got.stderr)[-3000:]
    if not isolated:
        warned = [ln for ln in (got.stdout + got.stderr).splitlines() if "Warning" in ln or "WARNING" in ln]
        assert not warned, warned
    (sdist,), (wheel,) = (tmp_path / "dist").glob("*.tar.gz"), (tmp_path / "dist").glob("*.whl")
    return sdist, wheel


def _two_step_run(tabsim_exe, tmp_path, env=None) -> dict:
    cfg = tmp_path / "two.toml"
    cfg.write_text('preset = "paper"\n')
    args = [a if a != "CONFIG" else str(cfg) for a in TWO_STEPS] + [str(tmp_path / "out")]
    got = subprocess.run([str(tabsim_exe), *args], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert got.returncode == 0, got.stderr[-2000:]
    return json.loads(got.stdout)


def test_version_is_written_once_and_cited_alike():
    with open(ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "tabsim.__version__"}
    cff = (ROOT / "CITATION.cff").read_text()
    assert re.search(r"^cff-version: 1\.2\.0$", cff, re.M) and re.search(r"^license: MIT$", cff, re.M)
    assert re.search(rf"^version: {re.escape(tabsim.__version__)}$", cff, re.M), "CITATION.cff's version"
    assert re.search(r"^title: tabsim$", cff, re.M) and "tabsim contributors" in cff


def test_wheel_holds_every_module_and_runs_from_a_fresh_virtualenv(tmp_path):
    """The wheel built from the sdist holds every file of the package; installed into a new virtualenv (its
    dependencies taken from this environment's site-packages) it prints its version and runs two steps."""
    sdist, wheel = _build(tmp_path, isolated=False)
    assert wheel.name.startswith(f"tabsim-{tabsim.__version__}-") and sdist.name == f"tabsim-{tabsim.__version__}.tar.gz"
    package = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tabsim").rglob("*")
               if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = z.read(f"tabsim-{tabsim.__version__}.dist-info/METADATA").decode()
    assert package - names == set(), "files of the package missing from the wheel"
    assert f"Version: {tabsim.__version__}" in meta
    assert "License-Expression: MIT" in meta.splitlines() and "License-File: LICENSE" in meta.splitlines()
    assert f"tabsim-{tabsim.__version__}.dist-info/licenses/LICENSE" in names
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", str(wheel)],
                   check=True, capture_output=True)
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # the dependencies from here; a directory named in a .pth file does not run that directory's own .pth
    # files, so this environment's editable tabsim stays out of reach
    (venv / site.split(str(venv) + "/", 1)[1] / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    where = subprocess.run([str(py), "-c", "import tabsim; print(tabsim.__file__)"], capture_output=True, text=True,
                           cwd=tmp_path, env=env, check=True).stdout
    assert where.startswith(str(venv)), where
    version = subprocess.run([str(venv / "bin" / "tabsim"), "--version"], capture_output=True, text=True, env=env)
    assert version.returncode == 0 and version.stdout.startswith(f"tabsim {tabsim.__version__}\n"), version
    out = _two_step_run(venv / "bin" / "tabsim", tmp_path, env)
    prov = (tmp_path / "out" / "provenance.json").read_text()
    assert out["final"] and f'"tabsim_version": "{tabsim.__version__}"' in prov


@pytest.mark.heavy
def test_wheel_installs_with_its_dependencies_into_a_fresh_virtualenv(tmp_path):
    """As a user installs a release: an isolated build, a new virtualenv, pip resolving the dependencies."""
    _, wheel = _build(tmp_path, isolated=True)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], check=True, timeout=1800)
    version = subprocess.run([str(venv / "bin" / "tabsim"), "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith(f"tabsim {tabsim.__version__}\n"), version
    assert _two_step_run(venv / "bin" / "tabsim", tmp_path)["final"]
