"""Outputs that are safe to open and say what their bounds rest on: escaped names in the CSVs and the
report, model-based bounds tagged in the summary, the report and the figure, the families' reach."""
import csv
import warnings
import re

import matplotlib
import pytest
from click.testing import CliRunner

from tabsim.audit import load_entries
from tabsim.audit.core import audit

matplotlib.use("Agg")


def _cli(args):
    from tabsim.cli import main

    return CliRunner().invoke(main, ["audit", *args])


def test_names_cannot_run_as_formulas_or_break_tables(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text('source: {id: s, paper: "P | Q", table: T1}\n'
                 "defaults: {benchmark: MATH-500, samples_per_item: greedy, values: absolute, majority_kind: online}\n"
                 "entries:\n"
                 "  - {model: '=1+1', arms: {base: 40, majority: 55, true: 60}}\n"
                 "  - {model: '=HYPERLINK(\"http://x\")', arms: {base: 30, majority: 40, true: 45}}\n"
                 "  - {model: \"a|b\\nc\", arms: {base: 30, majority: 42, true: 45}}\n"
                 "  - {model: '@SUM(A1)', arms: {base: 30, majority: 44, true: 45}}\n")
    out = tmp_path / "out"
    r = _cli([str(p), "--out", str(out), "--no-calibration", "-q"])
    assert r.exit_code == 0, r.output
    for name in ("audit.csv", "terms.csv", "entries.csv"):
        with open(out / name, newline="") as fh:
            rows = list(csv.DictReader(fh))
        models = {row["model"] for row in rows}
        assert {"'=1+1", "'=HYPERLINK(\"http://x\")", "'@SUM(A1)"} <= models, (name, models)
        assert not any(m.startswith(("=", "+", "@")) for m in models)
    report = (out / "report.md").read_text()
    # every line of a Markdown table has as many unescaped cell separators as its header
    lines = report.splitlines()
    for i, ln in enumerate(lines):
        if ln.startswith("|---"):
            n = len(re.findall(r"(?<!\\)\|", lines[i - 1]))
            j = i + 1
            while j < len(lines) and lines[j].startswith("|"):
                assert len(re.findall(r"(?<!\\)\|", lines[j])) == n, lines[j]
                j += 1
    assert "a\\|b c" in report and "P \\| Q" in report


def _bounded_result(tmp_path, source="simulator", families=(("paper", (0.1,)),)):
    """A table without RANDOM, its bounded terms marked as coming from the simulator."""
    p = tmp_path / "b.yaml"
    p.write_text("source: {id: s, paper: P, table: T1}\n"
                 "defaults: {benchmark: MATH-500, samples_per_item: greedy, values: absolute, majority_kind: online}\n"
                 "entries:\n  - {model: M, arms: {base: 40, majority: 55, true: 60}}\n")
    res = audit(load_entries(p), calibrate=False)
    bounded = res.terms["identified"] == "bounds"
    res.terms.loc[bounded, "bound_source"] = source
    res.audit["bound_source"] = source
    res.info["calibration"] = {
        "grid": {"n_prompts": 40, "n_correct": [2], "steps": 100, "seeds": 4, "prior_strength": [0.1, 0.9],
                 "format_boost": [0.0], "heterogeneity": [1.0], "families": [[n, list(l)] for n, l in families]},
        "reach": {n: {"d_null": [-3.1, 6.8], "d_majority": [-5.0, 30.0]} for n, _ in families},
        "sim_d_null_range": [-3.1, 6.8], "n_structures": 4, "cache": "memory", "seconds": 0.0, "digest": "x"}
    return res


def test_model_based_bounds_are_tagged_in_the_summary_and_the_figure(tmp_path):
    from tabsim.audit.report import plot_terms, render_report

    res = _bounded_result(tmp_path)
    f = tmp_path / "b.yaml"
    report = render_report(res, files=[f], command="tabsim audit b.yaml")
    summary = report[report.index("## Summary"):report.index("## P")]
    assert "(simulator: model-based)" in summary
    assert "`paper`: d_null [-3.1, 6.8]" in report  # the family's reach
    assert "`--family reuse` adds" in report
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a one-entry figure has room for its panel, title and legend
        fig = plot_terms(res)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any("model-based" in t for t in labels)
    assert "model-based" in fig._suptitle.get_text()
    assert any(t.get_text().strip() == "sim" for ax in fig.axes for t in ax.texts)
    renderer = fig.canvas.get_renderer()
    inside = fig.bbox.padded(1)
    for artist in [fig._suptitle, fig.legends[0], *fig.axes]:  # nothing cut off at the figure's edges
        box = artist.get_window_extent(renderer)
        assert inside.contains(box.x0, box.y0) and inside.contains(box.x1, box.y1), artist
    assert fig.legends[0].get_window_extent(renderer).y1 < fig.axes[0].get_tightbbox(renderer).y0  # no overlap
    matplotlib.pyplot.close(fig)


def test_report_does_not_suggest_the_family_already_used(tmp_path):
    from tabsim.audit.report import render_report

    res = _bounded_result(tmp_path, families=(("paper", (0.1,)), ("reuse", (1.0,))))
    report = render_report(res, files=[tmp_path / "b.yaml"], command="tabsim audit b.yaml --family reuse")
    assert "`--family reuse` adds" not in report
    assert "`reuse`: d_null [-3.1, 6.8]" in report


def test_outside_family_names_the_measurement():
    from tabsim.audit.checks import outside_family
    from tabsim.audit.entry import ArmValue, Entry

    def entry(src, arms, bench="MATH-500", model="Qwen2.5-Math-7B"):
        return Entry(file="x", label="x", source={"id": src}, model=model, benchmark=bench, n_items=500,
                     samples_per_item=1, decoding="greedy", values="absolute", majority_kind="online", gamma=0.5,
                     arms={a: ArmValue(v) for a, v in arms.items()}, other={}, base_pass_at_k={}, base_maj_at_k={})

    es = [entry("spurious", {"frozen": 49.4, "random": 70.8, "true": 78.2}),
          entry("ttrl", {"frozen": 50.6, "majority": 84.2}, bench="math500", model="qwen2.5-math-7b"),
          entry("ttrl", {"frozen": 16.7, "majority": 43.3}, bench="AIME 2024")]
    rows = [{"d_null": 21.4, "d_null_low": 15.5, "d_null_high": 27.3, "bound_source": ""},
            {"d_null": float("nan"), "d_null_low": -8.1, "d_null_high": 10.8, "bound_source": "simulator"},
            {"d_null": float("nan"), "d_null_low": -18.0, "d_null_high": 21.0, "bound_source": "simulator"}]
    out = outside_family(es, rows, {"paper": {"d_null": [-3.1, 6.8]}})
    assert list(out) == [1, 2]
    assert "d_null measured at +21.4" in out[1] and "spurious" in out[1] and "bounds are logical" in out[1]
    # the AIME row's bound overlaps +21.4, but the family's reach [-3.1, 6.8] excludes what the model did
    assert "outside the reach of every simulated family" in out[2] and "on MATH-500" in out[2]
    assert outside_family(es, rows, {"paper": {"d_null": [-3.1, 30.0]}}).keys() == {1}
