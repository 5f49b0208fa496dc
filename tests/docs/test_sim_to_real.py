"""experiments/sim_to_real: its README and its script state the same run time, and the script runs without
a warning and writes the committed tables again."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[2] / "experiments" / "sim_to_real"
# the comment on the line that gives the command, up to a semicolon: "# about 2 minutes on 2 cores; writes ..."
STATED = re.compile(r"run\.py[^#\n]*#\s*([^;\n]*)")


def stated_time(text: str) -> str:
    (found,) = {m.group(1).strip() for m in STATED.finditer(text)}
    return found


def test_readme_and_script_state_one_run_time():
    readme, script = stated_time((HERE / "README.md").read_text()), stated_time((HERE / "run.py").read_text())
    assert readme == script, (readme, script)


def test_the_pattern_reads_the_time_off_the_command_line():
    assert stated_time("python run.py     # about 3 minutes on 2 busy cores; writes x") == "about 3 minutes on 2 busy cores"
    assert stated_time("`run.py` fits it.\n    python run.py [--out DIR]     # about 2 minutes\n") == "about 2 minutes"


@pytest.mark.heavy
def test_the_study_runs_without_warnings_and_writes_the_committed_tables(tmp_path, optimized_xla):
    """The whole study, as its README runs it (compiled as a user's run is: the suite's unoptimised code
    takes several times the CPU)."""
    got = subprocess.run([sys.executable, str(HERE / "run.py"), "--out", str(tmp_path)], capture_output=True,
                         text=True, timeout=1800)
    assert got.returncode == 0, got.stderr[-3000:]
    assert "Warning" not in got.stderr, got.stderr[-3000:]
    for name in ("fit.csv", "comparison.csv"):
        assert (tmp_path / name).read_bytes() == (HERE / name).read_bytes(), name
