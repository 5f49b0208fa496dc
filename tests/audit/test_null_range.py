"""Bounds that cover what real models do: simulator bounds on a missing RANDOM arm widened to the range
of d_null that published random-reward runs measured, and families whose reach excludes what the
row's model was measured to do set aside."""
import math
import re
from pathlib import Path

import matplotlib
import numpy as np
import pytest

from tabsim.audit import calibrate as cal
from tabsim.audit import load_entries
from tabsim.audit import measured as ms
from tabsim.audit.checks import families_excluded, model_key
from tabsim.audit.core import audit
from tabsim.audit.entry import ArmValue, Entry
from tabsim.audit.report import render_report

AUDITS = Path(__file__).resolve().parents[2] / "experiments" / "audits"
SMALL = cal.CalibrationGrid(families=(("paper", (0.1, 0.3, 1.0)),), prior_strength=(0.2, 0.4, 0.6, 0.8),
                            format_boost=(0.2,), heterogeneity=(10.0,), steps=50, seeds=4, seed=0, lr_fine=4)
DOMINANCE = ("RANDOM_REWARD_DOMINATED", "ELICITATION_DOMINATED", "REWARD_DESIGN_DOMINATED")


def _entry(arms, model="Qwen2.5-Math-7B", bench="MATH-500", src="t"):
    return Entry(file="x", label="x", source={"id": src}, model=model, benchmark=bench, n_items=500,
                 samples_per_item=1, decoding="greedy", values="absolute", majority_kind="online", gamma=0.5,
                 arms={a: ArmValue(v) for a, v in arms.items()}, other={}, base_pass_at_k={}, base_maj_at_k={})


def test_with_null_envelope_fills_random_over_the_range_by_hand():
    means = np.array([[50.0, 51.0, 70.0, 80.0], [2.0, 2.5, 9.0, 12.0]])
    var = np.array([[4.0, 1.0, 3.0, 2.0], [0.5, 0.2, 0.3, 0.4]])
    m, v = cal.with_null_envelope(means, var, (-2.5, 1.0), step=1.0, seed_sd=0.5)
    gains = [-2.5, -1.5, -0.5, 0.5, 1.0]  # the grid from the low end in steps of 1, and the high end
    assert m.shape == (2 + 2 * len(gains), 4)
    np.testing.assert_array_equal(m[:2], means)  # the simulator's completions are kept
    np.testing.assert_allclose(m[2:7, 1], [50.0 + g for g in gains])
    np.testing.assert_allclose(m[7:, 1], [max(2.0 + g, 0.0) for g in gains])  # clipped at 0
    np.testing.assert_allclose(m[2:7, [0, 2, 3]], np.tile(means[0, [0, 2, 3]], (5, 1)))
    np.testing.assert_allclose(v[2:, 1], 0.25)
    np.testing.assert_allclose(v[2:7, [0, 2, 3]], np.tile(var[0, [0, 2, 3]], (5, 1)))


def test_null_envelope_is_the_span_of_the_measured_intervals():
    reg = ms.random_measurements()
    lo, hi = ms.null_envelope(reg)
    # independently: item-unit binomial intervals (plus-one proportions), seeds where given
    def iv(m):
        p = lambda a: (a / 100 * m.n_items + 1) / (m.n_items + 2) * 100  # noqa: E731
        var = sum(p(a) * (100 - p(a)) / m.n_items for a in (m.base, m.after))
        if m.seeds:
            var += np.var(m.seeds, ddof=1) / len(m.seeds)
        return m.gain - 1.959964 * math.sqrt(var), m.gain + 1.959964 * math.sqrt(var)
    ivs = [iv(m) for m in reg]
    assert lo == pytest.approx(min(a for a, _ in ivs), abs=1e-3)
    assert hi == pytest.approx(max(b for _, b in ivs), abs=1e-3)
    assert lo < -8.5 and hi > 21.4  # OLMo2-7B's -8.5 and Qwen2.5-Math-7B's +21.4, intervals included
    assert ms.null_envelope(()) is None


def test_a_family_whose_reach_excludes_the_models_measurement_is_set_aside():
    es = [_entry({"frozen": 49.4, "random": 70.8, "true": 78.2}, src="spurious"),
          _entry({"frozen": 16.7, "majority": 43.3}, bench="AIME 2024", src="ttrl"),
          _entry({"frozen": 30.0, "majority": 40.0}, model="Other-7B", src="ttrl")]
    rows = [{"d_null": 21.4, "d_null_low": 15.5, "d_null_high": 27.3, "bound_source": ""},
            {"d_null": math.nan, "d_null_low": -9.0, "d_null_high": 20.0, "bound_source": "simulator"},
            {"d_null": math.nan, "d_null_low": -9.0, "d_null_high": 20.0, "bound_source": "simulator"}]
    reach = {"narrow": {"d_null": [-5.0, 6.0]}, "wide": {"d_null": [-10.0, 16.0]}}
    out = families_excluded(es, rows, reach)
    assert list(out) == [1] and list(out[1]) == ["narrow"]  # [15.5, 27.3] overlaps [-10, 16] only
    assert "+21.4" in out[1]["narrow"] and "`narrow`" in out[1]["narrow"]


@pytest.fixture(scope="module")
def hidden_qwen_math():
    """Spurious Rewards' Qwen2.5-Math-7B row without its RANDOM arm, audited with the registry minus that
    model: with and without the measured range."""
    e = next(x for x in load_entries([AUDITS / "spurious_rewards.yaml"]) if x.model == "Qwen2.5-Math-7B")
    hidden = Entry(**{**e.__dict__, "arms": {a: v for a, v in e.arms.items() if a != "random"}})
    others = tuple(m for m in ms.MEASUREMENTS if model_key(m.model) != model_key(e.model))
    return (audit([hidden], grid=SMALL, measurements=others),
            audit([hidden], grid=SMALL, measurements=others, null_range=False))


def test_the_measured_range_widens_the_bound_and_takes_the_dominance_away(hidden_qwen_math):
    wide, narrow = (r.audit.iloc[0] for r in hidden_qwen_math)
    env = hidden_qwen_math[0].info["null_envelope"]
    assert env is not None and env[1] > 7.7  # the other models reach Qwen2.5-7B's +7.7 and more
    assert narrow["d_null_high"] < 10.0 and wide["d_null_high"] >= env[1]
    assert wide["d_null_low"] <= narrow["d_null_low"] and wide["bound_source"] == "simulator"
    # the simulator alone names a term; with what other models did under a random reward it cannot
    assert narrow["verdict"] in DOMINANCE and wide["verdict"] not in DOMINANCE
    assert "measured d_null range" in wide["null_envelope"]


@pytest.fixture(scope="module")
def shipped_small():
    """Spurious Rewards' table and a TTRL row without RANDOM (simulator-bounded) audited on the small grid (the
    sweep of ``hidden_qwen_math``, from memory); the notes on every shipped table are test_notes.py's."""
    files = [AUDITS / "spurious_rewards.yaml", AUDITS / "ttrl.yaml"]
    entries = [e for e in load_entries(files) if e.source["id"] != "ttrl" or (e.model, e.benchmark) == (
        "LLaMA-3.1-8B-Instruct", "AMC")]
    res = audit(entries, grid=SMALL)
    return res, render_report(res, files=files, command="tabsim audit experiments/audits")


def test_a_range_is_called_simulated_only_where_the_simulator_made_it(shipped_small):
    res, report = shipped_small
    lo_r, hi_r = res.info["calibration"]["sim_d_null_range"]
    quoted = re.findall(r"d_null in \[[^]]+\] \(simulated range \[(-?[\d.]+), (-?[\d.]+)\]"
                        r"(; \[[^]]+\] with RANDOM also over the measured d_null range)?", report)
    assert quoted
    for lo, hi, _ in quoted:  # within what the simulated families reach (printed to 0.1)
        assert lo_r - 0.05 <= float(lo) <= float(hi) <= hi_r + 0.05, (lo, hi, lo_r, hi_r)
    # the rows whose RANDOM was also filled over the measured range name that range beside the simulated one
    widened = res.audit[(res.audit["null_envelope"] != "") & res.audit["bounded_terms"].str.contains("d_null")]
    assert sum(bool(m) for *_, m in quoted) == len(widened) > 0


def test_the_figure_draws_the_simulated_range_apart_from_the_measured_one(shipped_small):
    from tabsim.audit.core import AuditResult
    from tabsim.audit.figure import TERM_COLORS, plot_terms

    res, _ = shipped_small
    lo_r, hi_r = res.info["calibration"]["sim_d_null_range"]
    keep = res.audit.index[(res.audit["null_envelope"] != "")][:1]
    key = res.audit.loc[keep[0], ["source", "model", "benchmark", "train_set"]]
    terms = res.terms[(res.terms[list(key.index)] == key.to_numpy()).all(axis=1)]
    one = AuditResult(audit=res.audit.loc[keep], terms=terms, entries=res.entries, calibration=res.calibration,
                      info=res.info)
    fig = plot_terms(one)
    bands = sorted(((ln.get_alpha(), tuple(ln.get_xdata())) for ax in fig.axes for ln in ax.lines
                    if ln.get_linewidth() == 5 and ln.get_color() == TERM_COLORS["d_null"]), reverse=True)
    (_, sim), (_, both) = bands  # the simulated range drawn darker, the measured-widened one paler
    assert lo_r - 1e-9 <= min(sim) <= max(sim) <= hi_r + 1e-9
    assert max(both) > hi_r and min(both) <= min(sim)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "simulated range" in labels and "with RANDOM over measured d_null" in labels
    matplotlib.pyplot.close(fig)


def test_d_null_outside_the_reach_is_named_so_only_when_its_interval_is(shipped_small):
    res, report = shipped_small
    lo_r, hi_r = res.info["calibration"]["sim_d_null_range"]
    text = next(ln for ln in report.splitlines() if "estimate only, the interval reaching into it" in ln)
    firm, loose = text.split("Outside the reach at the estimate only")
    n = 0
    for _, r in res.audit[res.audit["d_null"].notna()].iterrows():
        if lo_r <= r["d_null"] <= hi_r:
            continue
        named = f"{r['source']} {r['model']} {r['benchmark']} {r['d_null']:+.1f} [{r['d_null_low']:.1f}, " \
                f"{r['d_null_high']:.1f}]"
        outside = r["d_null_high"] < lo_r or r["d_null_low"] > hi_r
        assert named in (firm if outside else loose), (named, text)
        n += 1
    assert n >= 3 and "interval and all" in firm
