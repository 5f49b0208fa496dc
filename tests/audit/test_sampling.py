"""Sampling units: the item, not the sample, is the unit of an avg@k score; per-item results give the
exact clustered interval; pass@k and greedy scores count items."""
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from tabsim.audit import load_entries
from tabsim.audit.core import audit

AUDITS = Path(__file__).resolve().parents[2] / "experiments" / "audits"
Z95 = float(sps.norm.ppf(0.975))


def hand_var(acc, n):
    p = (acc / 100.0 * n + 1.0) / (n + 2.0)
    return 1e4 * p * (1.0 - p) / n


def coverage_tol(reps):
    # 3 binomial standard errors of an empirical 95% coverage over `reps` replications
    return 3.0 * math.sqrt(0.95 * 0.05 / reps)


def amc_table(tmp_path, body, name="amc.yaml"):
    p = tmp_path / name
    p.write_text("source: {id: s, paper: P, table: T1}\n"
                 "defaults: {benchmark: AMC, samples_per_item: avg@8, values: absolute, majority_kind: online}\n"
                 "entries:\n" + body)
    return p


def test_avg_at_k_counts_items_once(tmp_path):
    p = amc_table(tmp_path, "  - {model: M, arms: {base: 20.93, majority: 49.09, true: 54.22}}\n")
    row = audit(load_entries(p), calibrate=False).audit.iloc[0]
    assert row["n_items"] == 83 and row["samples_per_item"] == "avg@8"
    assert row["se_frozen"] == pytest.approx(math.sqrt(hand_var(20.93, 83)))  # 83 items, not 664 trials
    se_items = math.sqrt(hand_var(54.22, 83) + hand_var(20.93, 83))
    se_trials = math.sqrt(hand_var(54.22, 664) + hand_var(20.93, 664))
    assert row["d_total_low"] == pytest.approx(54.22 - 20.93 - Z95 * se_items)
    assert row["d_total_low_trials"] == pytest.approx(54.22 - 20.93 - Z95 * se_trials)  # the optimistic case


def test_co_rewarding_amc_elicitation_verdicts_do_not_survive_items_as_unit():
    a = audit(load_entries(AUDITS / "co_rewarding.csv"), calibrate=False, rule="reference").audit
    amc = a[a.benchmark == "AMC"]
    assert len(amc) == 6
    # with 664 "independent trials" five rows read ELICITATION_DOMINATED; counting the 83 items once, none does
    assert (amc["reference_verdict_if_independent"] == "ELICITATION_DOMINATED").sum() == 5
    assert (amc["reference_verdict"] == "INCONCLUSIVE").all()
    assert (amc["verdict"] == "INCONCLUSIVE").all()
    assert (amc["verdict_if_independent"] == amc["reference_verdict_if_independent"]).all()


def _per_item_entry(tmp_path, y_base, y_true, k, name="m"):
    """An avg@k entry with per-item results: rows arm, item, sample, correct."""
    lines = ["arm,item,sample,correct"]
    for arm, mat in (("base", y_base), ("true", y_true)):
        for i, row in enumerate(mat):
            lines += [f"{arm},q{i},{j},{int(c)}" for j, c in enumerate(row)]
    f = tmp_path / f"{name}_items.csv"
    f.write_text("\n".join(lines) + "\n")
    acc = {a: round(100.0 * float(np.mean(m)), 2) for a, m in (("base", y_base), ("true", y_true))}
    body = (f"  - {{model: {name}, benchmark: B, n_items: {len(y_base)}, per_item: {f.name}, "
            f"arms: {{base: {acc['base']}, true: {acc['true']}}}}}\n")
    p = tmp_path / f"{name}.yaml"
    p.write_text("source: {id: s, paper: P, table: T1}\n"
                 f"defaults: {{samples_per_item: avg@{k}, values: absolute}}\nentries:\n" + body)
    return p


def test_per_item_results_give_the_clustered_interval(tmp_path):
    rng = np.random.default_rng(3)
    n, k = 40, 4
    p_item = rng.beta(0.5, 0.5, size=n)  # shared difficulty: the arms are paired through their items
    y_b = rng.random((n, k)) < p_item[:, None] * 0.6
    y_t = rng.random((n, k)) < np.minimum(p_item[:, None] * 1.3, 1.0)
    row = audit(load_entries(_per_item_entry(tmp_path, y_b, y_t, k)), calibrate=False).audit.iloc[0]
    assert row["sampling_unit"].startswith("items (clustered")
    # by hand: paired per-item differences of the item means, s^2 / n
    d = y_t.mean(axis=1) - y_b.mean(axis=1)
    se = 100.0 * np.std(d, ddof=1) / math.sqrt(n)
    est = 100.0 * d.mean()
    assert row["d_total"] == pytest.approx(round(100 * y_t.mean(), 2) - round(100 * y_b.mean(), 2))
    assert row["d_total_high"] - row["d_total_low"] == pytest.approx(2 * Z95 * se, rel=1e-6)
    assert abs(row["d_total"] - est) < 0.02


def test_per_item_file_is_checked(tmp_path):
    from tabsim.audit.schema import AuditInputError

    y = np.ones((5, 2), dtype=bool)
    p = _per_item_entry(tmp_path, y, y, 2)
    p.write_text(p.read_text().replace("avg@2", "avg@3"))
    with pytest.raises(AuditInputError, match="samples per item; the entry declares 3"):
        load_entries(p)
    p = _per_item_entry(tmp_path, y, y, 2, name="w")
    p.write_text(p.read_text().replace("true: 100.0", "true: 90.0"))
    with pytest.raises(AuditInputError, match="scores 100.00 in the per-item file but 90"):
        load_entries(p)


def test_item_unit_covers_avg_at_k_and_independent_trials_do_not():
    """avg@8 scores of heterogeneous items: the item-unit interval covers the difference of the arms'
    population accuracies at least 95% of the time; n x k independent trials undercover."""
    from tabsim.audit.entry import ArmValue, Entry
    from tabsim.audit.estimate import arm_moments, term_intervals

    reps, n, k = 400, 83, 8
    rng = np.random.default_rng(17)
    means = {"frozen": 0.25, "true": 0.50}
    hits = {"items": [], "trials": []}
    for _ in range(reps):
        acc = {}
        for arm, mu in means.items():
            p = rng.beta(mu * 1.0, (1 - mu) * 1.0, size=n)  # concentration 1: strongly heterogeneous items
            acc[arm] = 100.0 * rng.binomial(k, p).sum() / (n * k)
        e = Entry(file="x", label="x", source={"id": "s"}, model="m", benchmark="b", n_items=n, samples_per_item=k,
                  decoding=f"avg@{k}", values="absolute", majority_kind=None, gamma=None,
                  arms={a: ArmValue(v) for a, v in acc.items()}, other={}, base_pass_at_k={}, base_maj_at_k={},
                  protocol="avg")
        for unit in hits:
            mean, var, _ = arm_moments(e, unit=unit)
            m = np.array([[mean.get(a, 0.0) for a in ("frozen", "random", "majority", "true")]])
            v = np.array([[var.get(a, 0.0) for a in ("frozen", "random", "majority", "true")]])
            _, lo, hi = term_intervals(m, v)["d_total"]
            hits[unit].append(lo[0] <= 25.0 <= hi[0])
    tol = coverage_tol(reps)
    assert np.mean(hits["items"]) >= 0.95 - tol
    assert np.mean(hits["trials"]) < 0.95 - tol
