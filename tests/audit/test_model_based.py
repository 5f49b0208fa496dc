"""What an audit's verdict rests on, said where it is read: the model-based tag in the verdict itself,
d_majority in the figure, shares outside [0, 1] explained, verdicts that one point of seed spread
reverses flagged as fragile, and measured null effects (a registry) that overrule simulator bounds."""
import csv
from pathlib import Path

import matplotlib
import pytest

from tabsim.audit import calibrate as cal
from tabsim.audit import load_entries
from tabsim.audit import measured as ms
from tabsim.audit.checks import model_key
from tabsim.audit.core import audit
from tabsim.audit.report import plot_terms, render_report, write_outputs

matplotlib.use("Agg")
AUDITS = Path(__file__).resolve().parents[2] / "experiments" / "audits"
DOMINANCE = ("RANDOM_REWARD_DOMINATED", "ELICITATION_DOMINATED", "REWARD_DESIGN_DOMINATED")
SMALL = cal.CalibrationGrid(families=(("paper", (0.1, 0.3, 1.0)),), prior_strength=(0.2, 0.4, 0.6, 0.8),
                            format_boost=(0.2,), heterogeneity=(10.0,), steps=50, seeds=4, seed=0, lr_fine=4)


def _row(frame, model, bench):
    return frame[(frame.model == model) & (frame.benchmark == bench)].iloc[0]


@pytest.fixture(scope="module")
def ttrl_alone():
    """TTRL's table audited alone (no random arm anywhere in the run), with and without the registry."""
    entries = load_entries([AUDITS / "ttrl.yaml"])
    return entries, audit(entries, grid=SMALL), audit(entries, grid=SMALL, measurements=())


# ------------------------------------------------------------------------------- measured null effects
def test_ttrl_qwen_math_row_alone_gets_no_verdict_from_a_contradicted_bound(ttrl_alone):
    _, res, _ = ttrl_alone
    r = _row(res.audit, "Qwen2.5-Math-7B", "MATH-500")
    assert not (r["verdict"] in DOMINANCE and r["verdict_basis"] == "simulator bounds"), r["verdict"]
    assert r["bound_source"] == "logical" and r["verdict"] == "INCONCLUSIVE"
    assert "+21.4" in r["bound_note"] and "spurious-rewards" in r["bound_note"]
    assert "spurious-rewards" in r["verdict_reason"]  # the verdict itself says why the bound was set aside
    # every row of the same model: the families' reach excludes what the model was measured to do
    same = res.audit[res.audit.model.map(model_key) == model_key("Qwen2.5-Math-7B")]
    assert (same["bound_source"] == "logical").all() and same["bound_note"].str.contains("reach").all()


def test_without_the_registry_the_same_row_rests_on_the_simulator_and_says_so(ttrl_alone):
    entries, _, res = ttrl_alone
    r = _row(res.audit, "Qwen2.5-Math-7B", "MATH-500")
    # the finding, kept visible: the model-based bound alone gives dominance ...
    assert r["verdict"] == "ELICITATION_DOMINATED" and r["verdict_basis"] == "simulator bounds"
    # ... which the model-free bounds do not, so the verdict is tagged model-based everywhere it is read
    assert r["verdict_if_model_free"] == "INCONCLUSIVE" and bool(r["verdict_model_based"])
    assert r["verdict_reason"].startswith("model-based")
    report = render_report(res, files=[AUDITS / "ttrl.yaml"], command="tabsim audit ttrl.yaml")
    summary = report[report.index("## Summary"):report.index("## Test-time")]
    line = next(ln for ln in summary.splitlines() if "Qwen2.5-Math-7B | MATH-500" in ln)
    assert "**ELICITATION_DOMINATED (simulator: model-based)**" in line
    for _, row in res.audit.iterrows():  # the tag marks exactly the verdicts the simulator decides
        assert bool(row["verdict_model_based"]) == (row["bound_source"] == "simulator"
                                                    and row["verdict"] != row["verdict_if_model_free"])


def test_registry_records_match_the_shipped_tables():
    entries = {(e.source["id"], model_key(e.model), e.benchmark): e for e in load_entries([AUDITS])}
    shipped = 0
    for m in ms.MEASUREMENTS:
        assert m.citation and m.setup and m.source_id and m.n_items >= 2
        e = entries.get((m.source_id, model_key(m.model), m.benchmark))
        if e is None:
            continue
        shipped += 1
        assert e.arms["frozen"].mean == pytest.approx(m.base)
        assert e.arms[m.reward].mean == pytest.approx(m.after)
        assert e.n_items == m.n_items
    assert shipped == len(ms.MEASUREMENTS)  # every record is also a shipped table's cell
    assert len(ms.random_measurements()) >= 5


def test_a_registry_measurement_outside_a_bound_sets_it_aside(ttrl_alone):
    """The rule on a synthetic measurement: inside the bound keeps it, outside sets it aside."""
    entries, _, free = ttrl_alone
    r = _row(free.audit, "LLaMA-3.1-8B-Instruct", "MATH-500")
    assert r["bound_source"] == "simulator"
    lo, hi = r["d_null_low"], r["d_null_high"]
    inside = ms.NullMeasurement(model="LLaMA-3.1-8B-Instruct", benchmark="MATH-500", reward="random", gamma=0.5,
                                base=47.8, after=47.8 + 0.5 * (lo + hi), n_items=500, setup="synthetic",
                                source_id="synthetic", citation="a test")
    outside = ms.NullMeasurement(**{**inside.__dict__, "after": min(100.0, 47.8 + hi + 15.0)})
    llama = [e for e in entries if e.model.startswith("LLaMA")]
    keep = _row(audit(llama, grid=SMALL, measurements=(inside,)).audit, "LLaMA-3.1-8B-Instruct", "MATH-500")
    drop = _row(audit(llama, grid=SMALL, measurements=(outside,)).audit, "LLaMA-3.1-8B-Instruct", "MATH-500")
    assert keep["bound_source"] == "simulator" and keep["bound_note"] == ""
    assert drop["bound_source"] == "logical" and "synthetic" in drop["bound_note"]


# ------------------------------------------------------------------------------------- fragility
def test_a_verdict_one_point_of_seed_spread_reverses_is_flagged_fragile(tmp_path):
    entries = load_entries([AUDITS / "spurious_rewards.yaml"])
    res = audit(entries, calibrate=False)
    by = {s: audit(entries, calibrate=False, seed_sd=s).audit.set_index("model")["verdict"]
          for s in (0.25, 0.5, 0.75, 1.0)}
    a = res.audit.set_index("model")
    for model, row in a.iterrows():
        changes = any(by[s][model] != row["verdict"] for s in by)
        assert bool(row["fragile"]) == changes, model
    assert bool(a.loc["Qwen2.5-7B", "fragile"]) and "INCONCLUSIVE at seed sd" in a.loc["Qwen2.5-7B", "fragile_note"]
    assert not bool(a.loc["Qwen2.5-Math-7B", "fragile"])
    out = write_outputs(res, tmp_path / "out", files=[AUDITS / "spurious_rewards.yaml"], command="t")
    with open(out / "audit.csv", newline="") as fh:
        rows = {r["model"]: r for r in csv.DictReader(fh)}
    assert rows["Qwen2.5-7B"]["fragile"] == "True" and rows["Qwen2.5-Math-7B"]["fragile"] == "False"
    report = (out / "report.md").read_text()
    line = next(ln for ln in report[report.index("## Summary"):].splitlines() if "| Qwen2.5-7B |" in ln)
    assert "fragile" in line
    fig = plot_terms(res)
    ticks = [t.get_text() for ax in fig.axes for t in ax.get_yticklabels()]
    assert any("Qwen2.5-7B" in t and "fragile" in t for t in ticks)
    assert not any("Qwen2.5-Math-7B" in t and "fragile" in t for t in ticks)
    matplotlib.pyplot.close(fig)


# ---------------------------------------------------------------------------------- reader's side
def test_the_figure_plots_d_majority_for_a_base_plus_majority_table(tmp_path):
    res = audit(load_entries([AUDITS / "ttrl.yaml"]), calibrate=False)
    fig = plot_terms(res)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "d_majority" in labels
    r = _row(res.terms[res.terms.term == "d_majority"], "Qwen2.5-Math-7B", "MATH-500")
    assert r["identified"] == "point"
    xs = [float(x) for ax in fig.axes for ln in ax.get_lines() for x in ln.get_xdata()]
    assert any(abs(x - r["estimate"]) < 1e-9 for x in xs)  # its estimate is drawn
    matplotlib.pyplot.close(fig)


def test_shares_outside_zero_one_are_explained(tmp_path):
    res = audit(load_entries([AUDITS / "spurious_rewards.yaml"]), calibrate=False)
    report = render_report(res, files=[AUDITS / "spurious_rewards.yaml"], command="t")
    how = report[report.index("## How to read it"):report.index("## Summary")]
    assert "above 1 or below 0" in how
    llama = _row(res.audit, "Llama3.1-8B-Instruct", "MATH-500")
    assert llama["null_share"] < 0  # the random arm lost accuracy: its share is negative
    lines = report.splitlines()

    def note(model):
        return lines[lines.index(next(ln for ln in lines if ln.startswith(f"- **{model}"))) + 1]

    # Llama's d_null -4.9 [-10.8, 1.0] may be 0: its note says so; OLMo2's -8.5 [-11.1, -5.9] cost accuracy
    assert "null_share -0.45 [-1.78, 0.07] is below 0 at its estimate only" in note("Llama3.1-8B-Instruct")
    assert "the sign of d_null (-4.9 [-10.8, 1.0]) is not established" in note("Llama3.1-8B-Instruct")
    assert "d_null -8.5 [-11.1, -5.9] is negative" in note("OLMo2-7B") and "is above 1:" in note("OLMo2-7B")


# ------------------------------------------------------------------------------------------ coverage
def test_the_coverage_check_hides_the_arm_and_every_measurement_of_its_model():
    import importlib.util

    spec = importlib.util.spec_from_file_location("coverage_run", AUDITS / "coverage" / "run.py")
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    e = next(x for x in load_entries([AUDITS / "spurious_rewards.yaml"]) if x.model == "Qwen2.5-Math-7B")
    assert "random" not in run.hide_random(e).arms and set(run.hide_random(e).arms) == set(e.arms) - {"random"}
    r = run.coverage([e], {"small": SMALL}).iloc[0]
    assert r["measured_d_null"] == pytest.approx(21.4)
    # with the model's own measurement left out, nothing sets the simulator bound aside ...
    assert r["bound_source"] == "simulator" and r["n_consistent"] > 0
    # ... and the bound misses the hidden +21.4, which the registry would have caught
    assert not r["inside"] and r["passes"] == (r["verdict_hidden"] == "INCONCLUSIVE")
    full = audit([run.hide_random(e)], grid=SMALL).audit.iloc[0]
    assert full["bound_source"] == "logical" and "+21.4" in full["bound_note"]
