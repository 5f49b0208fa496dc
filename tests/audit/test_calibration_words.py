"""The calibration's phase is labelled as the audit's, and the report says which bounds were used:
a calibration that bounds no row is not described as the source of the bounds."""
import pytest

from tabsim.audit import calibrate as cal
from tabsim.audit import load_entries
from tabsim.audit.core import audit
from tabsim.audit.report import render_report

TABLE = ("source: {id: s, paper: P, table: T1}\n"
         "defaults: {benchmark: MATH-500, samples_per_item: greedy, values: absolute, majority_kind: online}\n"
         "entries:\n  - {model: M, arms: {base: 40, majority: 55, true: 60}}\n")


class Stop(Exception):
    pass


def test_the_calibration_bar_is_labelled_as_the_audit(monkeypatch):
    seen = []

    def fake_run(cfg, **kw):
        seen.append(kw.get("desc"))
        raise Stop

    monkeypatch.setattr(cal, "run", fake_run)
    with pytest.raises(Stop):
        cal.simulate(cal.CalibrationGrid(seeds=2), cache_dir=None, progress=True)
    assert seen and seen[0].startswith("tabsim audit: calibrating"), seen


def test_a_calibration_that_bounds_no_row_is_not_said_to_bound_them(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text(TABLE)
    res = audit(load_entries(p), calibrate=False)
    assert (res.audit["bound_source"] == "logical").all()
    # a calibration ran (its info is recorded) but every row fell back to logical bounds
    res.info["calibration"] = {"grid": {}, "reach": {}, "sim_d_null_range": [-3.0, 6.0], "n_structures": 4,
                               "cache": "computed", "seconds": 23.0, "digest": "abc"}
    res.audit["n_candidates"] = 120
    report = render_report(res, files=[p], command="tabsim audit t.yaml")
    assumptions = report[report.index("## Assumptions"):report.index("## Summary")]
    assert "Missing arms are bounded by a simulator calibration" not in assumptions
    assert "bounded logically only" in assumptions and "bounds no row" in assumptions
    assert "M / MATH-500: no simulated structure is consistent with the reported arms" in assumptions


TWO = TABLE + "  - {model: N, arms: {base: 30, majority: 50, true: 52}}\n"


def test_the_assumptions_name_the_bound_each_row_with_a_missing_arm_rests_on(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text(TWO)
    res = audit(load_entries(p), calibrate=False)
    # a calibration ran; it bounds the first row, and the second row's model fell back to logical bounds
    res.info["calibration"] = {"grid": cal.CalibrationGrid().as_dict(), "reach": {"paper": {"d_null": [-3.0, 6.0]}},
                               "sim_d_null_range": [-3.0, 6.0], "n_structures": 4, "cache": "computed",
                               "seconds": 23.0, "digest": "abc"}
    res.audit.loc[0, "bound_source"] = "simulator"
    res.audit.loc[1, "bound_note"] = "d_null measured outside every family's reach"
    report = render_report(res, files=[p], command="tabsim audit t.yaml")
    assumptions = report[report.index("## Assumptions"):report.index("## Summary")]
    assert "**Bounds used**: simulator-calibrated for 1 of the 2 rows with a missing arm; logical" in assumptions
    assert "N / MATH-500: d_null measured outside every family's reach" in assumptions
    assert "M / MATH-500:" not in assumptions


FULL = TABLE.replace("base: 40,", "base: 40, random: 41,").replace("online}", "online, gamma: 0.5}")


@pytest.mark.parametrize("table, calibrate", [(FULL, True), (TABLE, False)])
def test_no_simulation_starts_when_no_row_could_use_it(tmp_path, monkeypatch, table, calibrate):
    """A table with every arm, or the calibration switched off: the simulator never runs."""
    calls = []
    monkeypatch.setattr(cal, "run", lambda cfg, **kw: calls.append(cfg))
    monkeypatch.setattr(cal, "_MEMO", {})
    p = tmp_path / "t.yaml"
    p.write_text(table)
    res = audit(load_entries(p), calibrate=calibrate, cache_dir=None)
    assert calls == [] and "calibration" not in res.info
    assert (res.audit["bound_source"] == ("" if calibrate else "logical")).all()
