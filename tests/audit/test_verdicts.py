"""The audit's verdicts: the three shares with intervals, a verdict that names the dominant term, the
reference rule beside it, and the notes on format repair."""
import math

import pytest
from scipy import stats as sps

from tabsim.audit import load_entries
from tabsim.audit.core import audit

Z95 = float(sps.norm.ppf(0.975))


def hand_var(acc, n):
    """Plus-one binomial variance in points^2, written out independently of the code under test."""
    p = (acc / 100.0 * n + 1.0) / (n + 2.0)
    return 1e4 * p * (1.0 - p) / n


def table(tmp_path, body, head="", name="t.yaml"):
    p = tmp_path / name
    p.write_text("source: {id: s, paper: P, table: T1}\n"
                 "defaults: {benchmark: MATH-500, samples_per_item: greedy, majority_kind: offline, gamma: 0.5"
                 + head + "}\nentries:\n" + body)
    return p


# Spurious Rewards' Qwen2.5-Math-7B on MATH-500 as its later version reports it: base 49.4, random +21.4,
# majority +27.1, ground truth +29.1 (gains over the base).
QWEN_MATH = "  - {model: Qwen2.5-Math-7B, values: gains, arms: {base: 49.4, random: 21.4, majority: 27.1, true: 29.1}}\n"


def test_random_reward_gain_is_named_not_called_elicitation(tmp_path):
    row = audit(load_entries(table(tmp_path, QWEN_MATH)), calibrate=False).audit.iloc[0]
    # three shares that sum to 1, each with its interval
    assert row["null_share"] == pytest.approx(21.4 / 29.1)
    assert row["sharpening_share"] == pytest.approx(5.7 / 29.1)
    assert row["rd_share"] == pytest.approx(2.0 / 29.1)
    assert row["null_share"] + row["sharpening_share"] + row["rd_share"] == pytest.approx(1.0)
    for s in ("null_share", "sharpening_share", "rd_share"):
        assert row[f"{s}_low"] < row[s] < row[f"{s}_high"]
    # the null share's Fieller interval, by hand: endpoints solve (a - rho b)^2 = z^2 Var(a - rho b) with
    # a = d_null, b = d_total, Cov(a, b) = Var(frozen) (independent arms over 500 items)
    vf, vr, vt = hand_var(49.4, 500), hand_var(70.8, 500), hand_var(78.5, 500)
    a, b = 21.4, 29.1
    for rho in (row["null_share_low"], row["null_share_high"]):
        lhs = (a - rho * b) ** 2
        rhs = Z95 ** 2 * ((vf + vr) - 2 * rho * vf + rho ** 2 * (vf + vt))
        assert lhs == pytest.approx(rhs, rel=1e-6)
    # the verdict names the term that holds most of the gain; the reference rule stays beside it
    assert row["null_share_low"] > 0.5
    assert row["verdict"] == "RANDOM_REWARD_DOMINATED" == row["term_verdict"]
    assert row["reference_verdict"] == "ELICITATION_DOMINATED"
    assert "null (d_null) share lies above 0.5" in row["verdict_reason"]


def test_reference_rule_is_an_option(tmp_path):
    entries = load_entries(table(tmp_path, QWEN_MATH))
    row = audit(entries, calibrate=False, rule="reference").audit.iloc[0]
    assert row["verdict"] == "ELICITATION_DOMINATED" and row["term_verdict"] == "RANDOM_REWARD_DOMINATED"
    with pytest.raises(ValueError, match="rule must be one of terms, reference"):
        audit(entries, calibrate=False, rule="shares")


def test_three_term_verdict_definition():
    from tabsim.audit.verdict import term_verdict

    def v(null, elicit, rd, t=0.5):
        return term_verdict({"null_share": null, "sharpening_share": elicit, "rd_share": rd}, threshold=t).verdict

    assert v((0.7, 0.55, 0.9), (0.2, 0.0, 0.4), (0.1, -0.1, 0.3)) == "RANDOM_REWARD_DOMINATED"
    assert v((0.1, -0.1, 0.3), (0.8, 0.6, 1.0), (0.1, -0.1, 0.3)) == "ELICITATION_DOMINATED"
    assert v((0.1, -0.1, 0.3), (0.1, -0.1, 0.3), (0.8, 0.6, 1.0)) == "REWARD_DESIGN_DOMINATED"
    assert v((0.6, 0.4, 0.8), (0.2, 0.0, 0.4), (0.2, 0.0, 0.4)) == "INCONCLUSIVE"  # straddles 0.5
    assert v((0.35, 0.3, 0.4), (0.35, 0.3, 0.4), (0.3, 0.25, 0.35)) == "MIXED"
    assert v((0.8, 0.7, 0.9), (0.8, 0.7, 0.9), (-0.6, -0.7, -0.5)) == "MIXED"  # two above, a negative third
    inf = math.inf
    assert v((0.7, -inf, inf), (0.2, -inf, inf), (0.1, -inf, inf)) == "INCONCLUSIVE"  # d_total ~ 0
    assert v((0.7, 0.55, 0.9), (0.2, 0.0, 0.4), (0.1, -0.1, 0.3), t=0.6) == "INCONCLUSIVE"


def test_shipped_spurious_rewards_verdicts(tmp_path):
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "experiments" / "audits" / "spurious_rewards.yaml"
    a = audit(load_entries(path), calibrate=False).audit.set_index("model")
    assert a.loc["Qwen2.5-Math-7B", "verdict"] == "RANDOM_REWARD_DOMINATED"
    assert a.loc["Qwen2.5-Math-7B", "reference_verdict"] == "ELICITATION_DOMINATED"


def test_format_repair_is_said(tmp_path):
    # a format arm reaching most of the true arm's gain
    p = table(tmp_path, "  - {model: M, values: gains, arms: {base: 49.4, random: 21.4, majority: 26.5, true: 28.8, "
                        "format: 16.4}}\n"
                        "  - {model: N, values: gains, arms: {base: 41.6, random: 7.7, majority: 31.4, true: 33.3, "
                        "format: 4.2}}\n")
    a = audit(load_entries(p), calibrate=False).audit.set_index("model")
    assert "format repair can explain" in a.loc["M", "format_note"] and "57%" in a.loc["M", "format_note"]
    assert a.loc["N", "format_note"] == ""
    # a base far below the model's known level on the benchmark
    q = table(tmp_path, "  - {model: M, values: absolute, known_base: 72.0, arms: {base: 27.8, true: 87.2}}\n",
              name="k.yaml")
    assert "below the model's known 72" in audit(load_entries(q), calibrate=False).audit.iloc[0]["format_note"]
    # the same model far lower on an easier benchmark than on a harder one of the same table
    r = table(tmp_path, "  - {model: M, values: absolute, arms: {base: 72.4, true: 82.6}}\n"
                        "  - {model: M, benchmark: GSM8K, values: absolute, arms: {base: 27.82, true: 87.26}}\n",
              name="x.yaml")
    a = audit(load_entries(r), calibrate=False).audit.set_index("benchmark")
    assert "harder MATH-500" in a.loc["GSM8K", "format_note"] and a.loc["MATH-500", "format_note"] == ""
