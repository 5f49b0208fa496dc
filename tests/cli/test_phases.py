"""What a computing command says while it works and the time it reports: phase lines on stderr, timed from
the process's start, and a printed and recorded wall time that agrees with the clock."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

SWEEP = ["sweep", "--vary", "prior_strength=0.3,0.5,0.7", "--vary", "lr=0.05,0.1,0.2", "--seeds", "2", "--steps",
         "4", "--arms", "random,true"]


def _run(args, tmp_path):
    env = {**os.environ, "MPLBACKEND": "Agg", "TABSIM_FIGURE_PROCESS": "1"}
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "tabsim.cli", *args], cwd=tmp_path, capture_output=True, text=True,
                          env=env, timeout=300)
    return proc, time.monotonic() - t0


def test_sweep_says_each_phase_and_reports_the_wall_time(tmp_path):
    """The printed time was the engine's alone (6.3 s against a clock's 31-52 s); provenance a third figure."""
    proc, wall = _run([*SWEEP, "--out", "o"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("[")]
    stamps = [float(re.match(r"\[\s*([\d.]+)s\]", ln).group(1)) for ln in lines]
    assert stamps == sorted(stamps)
    text = "\n".join(lines)
    for phase in ("loading the engine", "compiling, then training", "trained in", "figure written"):
        assert phase in text, (phase, proc.stderr)
    assert "9 conditions x 2 seeds x 2 arms, 4 steps" in text
    printed = float(re.search(r"\(([\d.]+) s\)\s*$", proc.stdout).group(1))
    # from the process's start: never more than the clock outside, and at least the last phase line's stamp
    # (the figure written), which the same clock gives (the old figure was the engine's alone, so it left out
    # the imports, the writing and the figure); no comparison of two clocks' durations on a busy machine
    assert printed <= wall + 0.05, (printed, wall)
    assert printed >= stamps[-1], (printed, stamps)
    prov = json.loads((tmp_path / "o" / "provenance.json").read_text())
    assert abs(prov["wall_seconds"] - printed) <= 0.05 * printed + 0.1, (prov["wall_seconds"], printed)
    assert 0 < prov["seconds_training"] < prov["wall_seconds"]
    # nine conditions: one summary figure (final pass@1 against the factor with most levels), not nine panels
    assert (tmp_path / "o" / "pass1.png").is_file()
    assert "final pass@1 of 9 conditions" in text


def test_no_figure_and_quiet(tmp_path):
    """In this process (the phase lines are the command's own; a whole process's silent stderr is checked by
    tests/plotting/test_figure_commands.py::test_reproduce_prints_nothing_on_stderr)."""
    from click.testing import CliRunner

    from tabsim.cli import main

    res = CliRunner().invoke(main, [*SWEEP, "--out", str(tmp_path / "o"), "--no-figure", "-q"])
    assert res.exit_code == 0, res.output
    assert res.stderr == "" and res.stdout == ""
    assert sorted(p.name for p in (tmp_path / "o").iterdir() if not p.name.startswith(".")) == [
        "config.json", "provenance.json", "results.parquet"]


@pytest.mark.parametrize("levels, panels, n_x", [
    ({"prior_strength": 8}, 1, 8),
    ({"prior_strength": 8, "lr": 4}, 4, 8),  # the 32 conditions: 4 panels, not 32
    ({"prior_strength": 8, "lr": 16}, 8, 16),
    ({"prior_strength": 8, "lr": 8, "gamma": 2}, 4, 8),  # 16 combinations of the rest: a panel per arm
])
def test_many_conditions_are_one_readable_summary_figure(levels, panels, n_x):
    import itertools

    import matplotlib

    matplotlib.use("Agg")
    import numpy as np
    import pandas as pd

    from tabsim.plotting.figures import plot_final

    arms = ["frozen", "random", "majority", "true"]
    grid = [dict(zip(levels, vals)) for vals in itertools.product(*(np.linspace(0.1, 0.9, n) for n in levels.values()))]
    rows = [{**g, "seed": s, "arm": arm, "step": step, "pass1": sum(g.values()) / 3 * (arm == "true")}
            for g in grid for s in range(2) for arm in arms for step in (0, 10)]
    frame = pd.DataFrame(rows)
    frame["arm"] = pd.Categorical(frame["arm"], arms)
    fig = plot_final(frame, by=list(levels), title="t")
    assert len(fig.axes) == panels
    assert len(fig.axes[0].get_lines()[0].get_xdata()) == n_x  # the factor with most levels is the x axis
    w, h = fig.get_size_inches() * 130
    assert w < 1400 and h < 1300, (w, h)  # a screen's worth at save_figure's 130 dpi (32 panels: 1701 x 2936)
    matplotlib.pyplot.close(fig)


def _stamped(stderr: str) -> list[tuple[float, str]]:
    """The phase lines of a command's stderr, ``[  2.3s] what``, as (seconds, what)."""
    found = [re.match(r"\[\s*([\d.]+)s\] (.*)", ln) for ln in stderr.splitlines()]
    return [(float(m.group(1)), m.group(2)) for m in found if m]


def test_audit_says_each_phase_and_records_the_command_time(tmp_path):
    """`tabsim audit` was silent until its table (about 10 s on the shipped tables with a cached calibration)."""
    from pathlib import Path

    from click.testing import CliRunner

    from tabsim.base.host import started_at
    from tabsim.cli import main

    table = Path(__file__).resolve().parents[2] / "experiments" / "audits" / "ttrl.yaml"
    since_start = time.perf_counter() - started_at()  # the command's clock starts with the process
    res = CliRunner().invoke(main, ["audit", str(table), "--no-calibration", "--out", str(tmp_path / "a")])
    assert res.exit_code == 0, res.output
    lines = _stamped(res.stderr)
    assert [t for t, _ in lines] == sorted(t for t, _ in lines) and lines[0][0] <= since_start + 1
    text = "\n".join(what for _, what in lines)
    for phase in ("tabsim audit: loading the engine", "read 9 entries from 1 input(s)", "bounds and verdicts of 9",
                  "fragility: the verdicts again at seed sd 1 (4 of 4)", "writing the tables and report.md",
                  "drawing the figure (terms.png)"):
        assert phase in text, (phase, res.stderr)
    assert "calibrat" not in text  # --no-calibration
    printed = float(re.search(r"provenance\.json \(([\d.]+) s\)", res.stdout).group(1))
    prov = json.loads((tmp_path / "a" / "provenance.json").read_text())
    assert since_start < prov["wall_seconds"] <= printed + 0.05
    # -q: not a line; --json: the lines on stderr, one object on stdout with the command's time
    quiet = CliRunner().invoke(main, ["audit", str(table), "--no-calibration", "--out", str(tmp_path / "q"), "-q"])
    assert quiet.exit_code == 0 and quiet.stderr == "" and quiet.stdout == ""
    res = CliRunner().invoke(main, ["audit", str(table), "--no-calibration", "--out", str(tmp_path / "j"), "--json"])
    got = json.loads(res.stdout)
    assert got["wall_seconds"] > since_start and "drawing the figure" in res.stderr


def test_the_chunk_bar_ticks_while_its_first_chunk_compiles(monkeypatch):
    """`prereg run` (and `reproduce`) showed a bar at 0% and nothing else for seconds while the first chunk
    compiled (2.4-3.6 s on 2 cores): its clock is redrawn until a chunk is done, then left to the chunks."""
    from tabsim.studies import heartbeat

    class Bar:
        n, refreshed = 0, 0

        def refresh(self):
            self.refreshed += 1

    monkeypatch.setattr(heartbeat, "HEARTBEAT", 0.01)
    bar = Bar()
    with heartbeat.until_first_chunk(bar):
        time.sleep(0.2)
        assert bar.refreshed >= 3
        bar.n = 1  # the first chunk done: the chunks' own updates redraw it from now on
        time.sleep(0.05)
        seen = bar.refreshed
        time.sleep(0.1)
        assert bar.refreshed == seen
    with heartbeat.until_first_chunk(object()):  # no bar (progress off): nothing to redraw
        pass
