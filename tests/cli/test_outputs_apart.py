"""Every command that writes ``--out`` refuses one that is, holds or lies inside what it reads, with
``--overwrite`` or not, links resolved (:func:`tabsim.files.overlap.check_apart`): one line, exit 2,
nothing read or computed, the input as it was. Before, ``tabsim compare e --out e --overwrite``
replaced the sweep ``e`` with the comparison, ``--out e/cmp`` changed the published ``e``, and
``tabsim run study/cfg.toml --out study --overwrite`` deleted the config file."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tabsim.cli import main
from tabsim.files.overlap import OverlapError, check_apart, relation

ROOT = Path(__file__).resolve().parents[2]
SMALL = 'preset = "paper"\n[train]\nsteps = 2\nseeds = 2\n'


def _tree(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def inputs(tmp_path):
    """A published run (a sweep folder), a config in a study folder, a folder of audit tables, a plan."""
    from tabsim.runtime.run import Result
    import pandas as pd

    frame = pd.DataFrame({"algo.estimator": ["grpo"] * 2 + ["rloo"] * 2, "seed": [0, 1] * 2, "arm": "true",
                          "step": 2, "pass1": [0.1, 0.2, 0.3, 0.4]})
    Result(frame=frame, config={"preset": "paper"}, provenance={}).save(tmp_path / "e")
    (tmp_path / "study").mkdir()
    (tmp_path / "study" / "cfg.toml").write_text(SMALL)
    shutil.copytree(ROOT / "experiments" / "audits", tmp_path / "tables")
    shutil.copytree(ROOT / "preregistration" / "clipping_null", tmp_path / "plan",
                    ignore=shutil.ignore_patterns("results"))
    shutil.copytree(ROOT / "preregistration" / "claims", tmp_path / "claims",
                    ignore=shutil.ignore_patterns("results", "*.png"))
    return tmp_path


CASES = {  # command line (FOLDER is the tmp folder), the input that must stay as it was, what the line says
    "compare is": (["compare", "{t}/e", "--by", "algo.estimator", "--out", "{t}/e", "--overwrite"], "e",
                   "--out {t}/e: is {t}/e, the run or sweep it reads"),
    "compare inside": (["compare", "{t}/e", "--by", "algo.estimator", "--out", "{t}/e/cmp"], "e",
                       "--out {t}/e/cmp: lies inside {t}/e, the run or sweep it reads"),
    "compare holds": (["compare", "{t}/e", "--by", "algo.estimator", "--out", "{t}", "--overwrite"], "e",
                      "--out {t}: holds {t}/e, the run or sweep it reads"),
    "compare link": (["compare", "{t}/e", "--by", "algo.estimator", "--out", "{t}/elink", "--overwrite"], "e",
                     "--out {t}/elink: is {t}/e"),
    "run": (["run", "{t}/study/cfg.toml", "--out", "{t}/study", "--overwrite"], "study",
            "--out {t}/study: holds {t}/study/cfg.toml, the config file it reads"),
    "sweep": (["sweep", "--config", "{t}/study/cfg.toml", "--out", "{t}/study", "--overwrite"], "study",
              "--out {t}/study: holds {t}/study/cfg.toml, the config file it reads"),
    "sweep track-dir": (["sweep", "--out", "{t}/study", "--track-dir", "{t}/study/tb", "--overwrite"], "study",
                        "the tracker folder it writes (--track-dir)"),
    "audit": (["audit", "{t}/tables", "--out", "{t}/tables", "--overwrite"], "tables",
              "--out {t}/tables: is {t}/tables, the table (or folder of tables) it reads"),
    "audit cache": (["audit", "{t}/tables", "--cache-dir", "{t}/study/cache", "--out", "{t}/study", "--overwrite"],
                    "study", "the calibration cache it reads and writes"),
    "prereg run": (["prereg", "run", "{t}/plan/plan.yaml", "--exploratory", "--out", "{t}/plan", "--overwrite"],
                   "plan", "--out {t}/plan: holds {t}/plan/plan.yaml, the plan it reads"),
    "claims run": (["claims", "--root", "{t}/claims", "run", "-q", "--quick", "--out", "{t}/claims/B17/quick"],
                   "claims", "--out {t}/claims/B17/quick: lies inside {t}/claims, the claim studies (--root)"),
    "reproduce": (["--compile-cache", "{t}/study", "reproduce", "--out", "{t}/study", "--overwrite"], "study",
                  "--out {t}/study: is {t}/study, the compilation cache it reads and writes"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_an_output_that_overlaps_an_input_is_refused_before_anything_runs(inputs, case):
    args, kept, says = CASES[case]
    os.symlink(inputs / "e", inputs / "elink")
    before = _tree(inputs / kept)
    got = CliRunner().invoke(main, [a.format(t=inputs) for a in args])
    assert got.exit_code == 2, got.output
    lines = got.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and says.format(t=inputs) in lines[0], got.output
    assert "with --overwrite or not" in lines[0]
    assert _tree(inputs / kept) == before
    assert not [p for p in inputs.iterdir() if p.name.endswith((".staging", ".lock"))]


def test_verify_still_passes_after_a_refused_compare_inside_the_run(inputs):
    from tabsim.runtime.manifest import check_folder

    CliRunner().invoke(main, ["compare", str(inputs / "e"), "--by", "algo.estimator", "--out", str(inputs / "e/c")])
    got = check_folder(inputs / "e")
    assert not (got["changed"] or got["missing"] or got["added"])


def test_relation_resolves_links_and_tells_apart_siblings(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    os.symlink(tmp_path / "a", tmp_path / "link")
    assert relation(tmp_path / "link" / "b", tmp_path / "a") == "lies inside"
    assert relation(tmp_path / "a", tmp_path / "link/b/x.csv") == "holds"
    assert relation(tmp_path / "a/../a", tmp_path / "a") == "is"
    assert relation(tmp_path / "ab", tmp_path / "a") is None  # a name that starts alike is not inside
    check_apart(tmp_path / "c", [("run it reads", tmp_path / "a"), ("nothing", None)])
    with pytest.raises(OverlapError, match=r"--out .*: lies inside .*a, the run it reads"):
        check_apart(tmp_path / "link" / "b", [("run it reads", tmp_path / "a")])


def test_a_config_read_from_a_published_run_must_be_as_published(inputs):
    """``tabsim run e/config.json`` ran a config edited after the run ``e`` was published."""
    from tabsim.runtime.manifest import ManifestError, check_file

    config = inputs / "e" / "config.json"
    check_file(config)  # as published: read without a word
    check_file(inputs / "study" / "cfg.toml")  # in no published folder: not checked
    config.write_text('{"preset": "paper", "train": {"seeds": 3}}')
    for args in (["run", config], ["sweep", "--config", config]):
        got = CliRunner().invoke(main, [str(a) for a in args] + ["--out", str(inputs / "o")])
        lines = got.output.strip().splitlines()
        assert got.exit_code == 1 and len(lines) == 1, got.output
        assert f"{config}: changed since {inputs / 'e'} was published" in lines[0]
    (inputs / "e" / "extra.toml").write_text(SMALL)
    with pytest.raises(ManifestError, match="extra.toml: added to .* since it was published"):
        check_file(inputs / "e" / "extra.toml")
    config.unlink()  # a link in place of the published file, to a file in no published folder
    os.symlink(inputs / "study" / "cfg.toml", config)
    with pytest.raises(ManifestError, match=r"config.json: a link \(tabsim publishes none\) in .* since"):
        check_file(config)
    assert not (inputs / "o").exists()
