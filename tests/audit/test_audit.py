"""Tests of `tabsim audit`: input validation, hand-computed partitions, interval coverage, and
simulator bounds that contain a hidden arm's true term."""
import glob
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats as sps

from tabsim.audit import calibrate as cal
from tabsim.audit.core import audit, audit_entry
from tabsim.audit.estimate import arm_moments, fieller, term_intervals
from tabsim.audit.schema import ArmValue, AuditInputError, Entry, load_entries

AUDITS = Path(__file__).resolve().parents[2] / "experiments" / "audits"
Z95 = float(sps.norm.ppf(0.975))


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


HEADER = """source: {id: s, paper: P, table: T1}
defaults: {benchmark: MATH-500, n_items: 500, samples_per_item: greedy, values: absolute, majority_kind: online, gamma: 0.5}
entries:
"""


def yaml_file(tmp_path, body, name="t.yaml"):
    return write(tmp_path, name, HEADER + body)


def errors_of(*paths):
    with pytest.raises(AuditInputError) as err:
        load_entries(list(paths))
    return "\n".join(err.value.problems)


# ------------------------------------------------------------------------------------------ data files
def test_shipped_tables_parse():
    files = sorted(glob.glob(str(AUDITS / "*.yaml"))) + sorted(glob.glob(str(AUDITS / "*.csv")))
    assert any(f.endswith(".csv") for f in files)
    entries = load_entries(files)
    by_source = {}
    for e in entries:
        by_source.setdefault(e.source["id"], []).append(e)
    assert {k: len(v) for k, v in by_source.items()} == {"spurious-rewards": 4, "ttrl": 9, "co-rewarding": 18,
                                                         "grpo-decomp": 1}
    assert all(e.majority_kind == "offline" for e in by_source["spurious-rewards"])
    assert all(e.majority_kind == "online" for e in by_source["ttrl"] + by_source["co-rewarding"])
    amc = [e for e in by_source["co-rewarding"] if e.benchmark == "AMC"]
    assert all(e.samples_per_item == 8 and e.n_eff == 83 * 8 for e in amc)
    d = by_source["grpo-decomp"][0]
    assert d.missing == ("majority",) and len(d.arms["random"].seeds) == 6
    assert d.arms["true"].mean == pytest.approx(np.mean([81.43, 78.62, 78.62, 79.45, 79.91, 80.67]))


# ------------------------------------------------------------------------------- hand-computed partition
# Gains over base from the spurious-rewards figure: (base, true, majority, random).
SPURIOUS = {"Qwen2.5-Math-7B": (49.4, 28.8, 26.5, 21.4), "Qwen2.5-7B": (41.6, 33.3, 31.4, 7.7),
            "Llama3.1-8B-Instruct": (36.8, 11.0, 11.6, -4.9), "OLMo2-7B": (9.0, 13.9, -7.4, -8.5)}


def hand_var(acc, n):
    """Plus-one binomial variance in points^2, written out independently of the code under test."""
    p = (acc / 100.0 * n + 1.0) / (n + 2.0)
    return 1e4 * p * (1.0 - p) / n


def test_spurious_rewards_partition_by_hand():
    res = audit(load_entries([AUDITS / "spurious_rewards.yaml"]), calibrate=False)
    a = res.audit.set_index("model")
    # Qwen2.5-Math-7B written out: d_null = 21.4, d_elicit = 26.5 - 21.4 = 5.1, d_rd = 28.8 - 26.5 = 2.3
    q = a.loc["Qwen2.5-Math-7B"]
    assert q["d_null"] == pytest.approx(21.4, abs=1e-9)
    assert q["d_elicit"] == pytest.approx(5.1, abs=1e-9)
    assert q["d_rd"] == pytest.approx(2.3, abs=1e-9)
    for model, (base, g_t, g_m, g_r) in SPURIOUS.items():
        r = a.loc[model]
        assert r["identified"] == "point" and r["majority_kind"] == "offline"
        assert r["acc_frozen"] == pytest.approx(base)
        assert r["acc_true"] == pytest.approx(base + g_t)
        assert r["d_null"] == pytest.approx(g_r, abs=1e-9)
        assert r["d_elicit"] == pytest.approx(g_m - g_r, abs=1e-9)
        assert r["d_rd"] == pytest.approx(g_t - g_m, abs=1e-9)
        assert r["d_total"] == pytest.approx(g_t, abs=1e-9)
        assert r["d_naive"] == pytest.approx(g_t - g_r, abs=1e-9)
        assert r["bias"] == pytest.approx(g_m - g_r, abs=1e-9)
        assert r["d_null"] + r["d_elicit"] + r["d_rd"] == pytest.approx(r["d_total"], abs=1e-9)
        assert r["elicitation_share"] == pytest.approx(g_m / g_t)
        assert r["rd_share"] == pytest.approx((g_t - g_m) / g_t)
        assert r["rd_fraction"] == pytest.approx((g_t - g_m) / (g_t - g_r))
        # Wald interval of d_rd: independent binomials over 500 greedy items
        se = math.sqrt(hand_var(base + g_t, 500) + hand_var(base + g_m, 500))
        assert r["d_rd_low"] == pytest.approx(g_t - g_m - Z95 * se, rel=1e-9)
        assert r["d_rd_high"] == pytest.approx(g_t - g_m + Z95 * se, rel=1e-9)
    # the reference rule (0.60 on the share intervals, tabsim.stats.share_verdict), kept beside the verdict
    assert a.loc["Qwen2.5-Math-7B", "reference_verdict"] == "ELICITATION_DOMINATED"
    assert a.loc["OLMo2-7B", "reference_verdict"] == "REWARD_DESIGN_DOMINATED"
    # Llama: elicitation share 11.6 / 11.0 = 1.05 but its interval reaches below 0.60
    assert a.loc["Llama3.1-8B-Instruct", "elicitation_share_low"] < 0.6 < a.loc["Llama3.1-8B-Instruct",
                                                                                 "elicitation_share_high"]
    assert a.loc["Llama3.1-8B-Instruct", "reference_verdict"] == "INCONCLUSIVE"


def test_fieller_endpoints_solve_the_defining_equation():
    a, b = np.array([26.5, 3.0]), np.array([28.8, 2.0])
    vaa, vbb, vab = np.array([8.7, 4.0]), np.array([8.4, 4.0]), np.array([5.0, 1.0])
    point, lo, hi = fieller(a, b, vaa, vbb, vab, Z95)
    assert point[0] == pytest.approx(26.5 / 28.8)
    for rho in (lo[0], hi[0]):
        lhs = (a[0] - rho * b[0]) ** 2
        rhs = Z95 ** 2 * (vaa[0] - 2 * rho * vab[0] + rho ** 2 * vbb[0])
        assert lhs == pytest.approx(rhs, rel=1e-9)
    assert lo[0] < point[0] < hi[0]
    # denominator 2 with sd 2 is not distinguishable from 0: the set is unbounded
    assert lo[1] == -np.inf and hi[1] == np.inf


# ------------------------------------------------------------------------------------------- coverage
def _coverage_tolerance(reps):
    # 3 binomial standard errors of an empirical 95% coverage over `reps` replications
    return 3.0 * math.sqrt(0.95 * 0.05 / reps)


def test_interval_coverage_on_binomial_tables():
    reps, n = 400, 500
    p = np.array([0.45, 0.52, 0.64, 0.71])  # frozen, random, majority, true
    rng = np.random.default_rng(11)
    acc = 100.0 * rng.binomial(n, p, size=(reps, 4)) / n
    iv = term_intervals(acc, hand_var(acc, n))
    truth = 100.0 * p
    true_terms = {"d_null": truth[1] - truth[0], "d_elicit": truth[2] - truth[1], "d_rd": truth[3] - truth[2],
                  "d_total": truth[3] - truth[0],
                  "elicitation_share": (truth[2] - truth[0]) / (truth[3] - truth[0]),
                  "rd_share": (truth[3] - truth[2]) / (truth[3] - truth[0])}
    tol = _coverage_tolerance(reps)
    for term, value in true_terms.items():
        _, lo, hi = iv[term]
        cov = np.mean((lo <= value) & (value <= hi))
        assert abs(cov - 0.95) <= tol, (term, cov)


def test_seed_sd_inflation_restores_coverage_of_single_runs():
    """Single runs whose accuracy carries seed noise (sd 2 points) around the arm's mean: intervals with
    seed_sd=2 cover the mean difference at 95%; without it they undercover."""
    reps, n, sd = 400, 1000, 2.0
    p = np.array([0.50, 0.50, 0.60, 0.66])
    rng = np.random.default_rng(5)
    truth = 100.0 * p
    hits, hits_naive = [], []
    for _ in range(reps):
        run_acc = np.clip(truth + np.r_[0.0, rng.normal(0.0, sd, 3)], 0, 100)  # the base is untrained
        obs = 100.0 * rng.binomial(n, run_acc / 100.0) / n
        e = Entry(file="x", label="x", source={"id": "s"}, model="m", benchmark="b", n_items=n,
                  samples_per_item=1, decoding="greedy", values="absolute", majority_kind="online", gamma=0.5,
                  arms={a: ArmValue(float(v)) for a, v in zip(("frozen", "random", "majority", "true"), obs)},
                  other={}, base_pass_at_k={}, base_maj_at_k={})
        for sd_used, bucket in ((sd, hits), (0.0, hits_naive)):
            mean, var, _ = arm_moments(e, seed_sd=sd_used)
            m = np.array([[mean[a] for a in ("frozen", "random", "majority", "true")]])
            v = np.array([[var[a] for a in ("frozen", "random", "majority", "true")]])
            _, lo, hi = term_intervals(m, v)["d_rd"]
            bucket.append(lo[0] <= truth[3] - truth[2] <= hi[0])
    assert abs(np.mean(hits) - 0.95) <= _coverage_tolerance(reps)
    assert np.mean(hits_naive) < 0.95 - _coverage_tolerance(reps)


# --------------------------------------------------------------------------- bounds with a known answer
SMALL = cal.CalibrationGrid(families=(("paper", (0.1, 0.3, 1.0)),), prior_strength=(0.2, 0.4, 0.6, 0.8),
                            format_boost=(0.2,), heterogeneity=(10.0,), steps=50, seeds=4, seed=0, lr_fine=4)


@pytest.fixture(scope="module")
def known_table():
    """A full 4-arm table simulated by tabsim at a structure inside the family (off the grid points),
    with seeds disjoint from the calibration's; its seed means are the true accuracies."""
    import tabsim as ts

    cfg = {"preset": "paper", "task": {"n_prompts": 40, "heterogeneity": 10.0, "format_boost": 0.2},
           "arms": {"arms": list(cal.SIM_ARMS), "tie": "lowest"},
           "train": {"steps": 50, "seeds": 8, "seed": 1000, "pass_k": [8]},
           "sweep": {"prior_strength": [0.5], "lr": [0.5], "format_boost": [0.2], "heterogeneity": [10.0]}}
    fin = ts.run(cfg, progress=False).final()
    acc = fin.groupby("arm", observed=True)[["pass1", "pass@8"]].mean() * 100.0
    frame, _ = cal.simulate(SMALL, cache_dir=None)
    truth = {a: float(acc.loc[a, "pass1"]) for a in ("frozen", "random", "majority", "true")}
    return truth, cal.structures(frame), float(acc.loc["frozen", "pass@8"])


def _entry(acc, hide, n=1000, pass_at_k=None):
    arms = {a: ArmValue(v) for a, v in acc.items() if a not in hide}
    return Entry(file="sim", label="sim", source={"id": "sim", "paper": "", "arxiv": "", "version": "", "table": ""},
                 model="sim", benchmark="sim", n_items=n, samples_per_item=1, decoding="greedy",
                 values="absolute", majority_kind="online", gamma=0.5, arms=arms, other={},
                 base_pass_at_k=pass_at_k or {}, base_maj_at_k={})


@pytest.mark.parametrize("hide, terms", [
    (("random",), ("d_null", "d_elicit", "d_naive", "rd_fraction")),
    (("majority",), ("d_elicit", "d_rd", "elicitation_share", "rd_share")),
    (("random", "true"), ("d_null", "d_rd", "d_total", "elicitation_share")),
])
def test_simulator_bounds_contain_the_hidden_term(known_table, hide, terms):
    acc, structs, _ = known_table
    f, r, m, t = (acc[a] for a in ("frozen", "random", "majority", "true"))
    truth = {"d_null": r - f, "d_elicit": m - r, "d_rd": t - m, "d_naive": t - r, "d_total": t - f,
             "rd_fraction": (t - m) / (t - r), "elicitation_share": (m - f) / (t - f), "rd_share": (t - m) / (t - f)}
    out = audit_entry(_entry(acc, hide), structs=structs, grid=SMALL)
    row, rows = out["row"], {x["term"]: x for x in out["terms"]}
    assert row["identified"] == "bounds" and row["bound_source"] == "simulator" and row["n_consistent"] > 0
    for term in terms:
        x = rows[term]
        assert x["identified"] == "bounds"
        assert x["low"] <= truth[term] <= x["high"], (term, truth[term], x["low"], x["high"])
    # the calibration must be informative: narrower than the model-free bounds for a difference term
    d = rows[terms[0]]
    assert d["high"] - d["low"] < d["logical_high"] - d["logical_low"]


def test_inconsistent_table_falls_back_to_logical_bounds(known_table):
    acc, structs, _ = known_table
    # a majority gain of +60 points from a 30 % base is beyond every simulated structure
    out = audit_entry(_entry({"frozen": 30.0, "majority": 90.0, "true": 92.0}, hide=()), structs=structs,
                      grid=SMALL)
    row = out["row"]
    assert row["n_consistent"] == 0 and row["bound_source"] == "logical"
    d_null = {x["term"]: x for x in out["terms"]}["d_null"]
    assert d_null["low"] == pytest.approx(d_null["logical_low"]) and d_null["high"] == pytest.approx(
        d_null["logical_high"])


def test_base_pass_at_k_constrains_the_calibration(known_table):
    import dataclasses

    acc, _, pass8 = known_table
    grid = dataclasses.replace(SMALL, pass_k=(8,))
    frame, _ = cal.simulate(grid, cache_dir=None)
    structs = cal.structures(frame)
    free = audit_entry(_entry(acc, ("random",)), structs=structs, grid=grid)["row"]
    right = audit_entry(_entry(acc, ("random",), pass_at_k={8: pass8}), structs=structs, grid=grid)
    assert 0 < right["row"]["n_consistent"] <= free["n_consistent"]
    d_null = {x["term"]: x for x in right["terms"]}["d_null"]
    assert d_null["low"] <= acc["random"] - acc["frozen"] <= d_null["high"]
    # pass@8 equal to pass@1 would need a deterministic policy: no structure of the family has one
    wrong = audit_entry(_entry(acc, ("random",), pass_at_k={8: acc["frozen"]}), structs=structs, grid=grid)
    assert wrong["row"]["n_consistent"] == 0 and wrong["row"]["bound_source"] == "logical"


def test_simulator_bound_contradicted_by_a_measurement_falls_back_to_logical(known_table):
    """A d_null measured for the same model and benchmark by another source, outside this row's simulator
    bound: the row says so and uses logical bounds instead."""
    acc, _, _ = known_table
    bounded = _entry(acc, ("random",))
    arms = {"frozen": ArmValue(acc["frozen"]), "random": ArmValue(acc["frozen"] + 25.0), "true": ArmValue(acc["true"])}
    measured = Entry(file="m", label="m", source={"id": "other", "paper": "", "arxiv": "", "version": "", "table": ""},
                     model="sim", benchmark="sim", n_items=1000, samples_per_item=1, decoding="greedy",
                     values="absolute", majority_kind="online", gamma=0.5, arms=arms, other={}, base_pass_at_k={},
                     base_maj_at_k={})
    # the simulator's own bound (not widened to the registry's measured range, which reaches +27)
    alone = audit([bounded], grid=SMALL, null_range=False).audit.iloc[0]
    assert alone["bound_source"] == "simulator" and alone["bound_note"] == ""
    assert alone["d_null_high"] < 25.0
    row = audit([measured, bounded], grid=SMALL, null_range=False).audit.iloc[1]
    assert row["bound_source"] == "logical" and row["verdict_basis"] == "logical bounds"
    assert "d_null measured at +25.0" in row["bound_note"] and "other" in row["bound_note"]
    assert row["d_null_low"] <= 25.0 <= row["d_null_high"]


# ------------------------------------------------------------------------------------------- bad input
def test_accuracy_outside_range(tmp_path):
    p = yaml_file(tmp_path, "  - {model: M, arms: {base: 40, true: 101.5}}\n")
    msg = errors_of(p)
    assert "entry 1 (model='M', benchmark='MATH-500')" in msg and "arms.true" in msg and "outside [0, 100]" in msg
    g = write(tmp_path, "g.yaml", HEADER.replace("values: absolute", "values: gains")
              + "  - {model: M, arms: {base: 90, true: 12.0}}\n")
    msg = errors_of(g)
    assert "arms.true" in msg and "102" in msg and "base 90 + gain" in msg


def test_negative_absolute_hints_at_gains(tmp_path):
    msg = errors_of(yaml_file(tmp_path, "  - {model: M, arms: {base: 40, random: -4.9}}\n"))
    assert "arms.random" in msg and "declare values: gains" in msg


def test_missing_item_count(tmp_path):
    # a benchmark outside the registry needs its item count (MATH-500 would get 500 from the registry)
    text = HEADER.replace("n_items: 500, ", "").replace("MATH-500", "MyBench") + "  - {model: M, arms: {base: 40, true: 50}}\n"
    msg = errors_of(write(tmp_path, "t.yaml", text))
    assert "n_items: missing" in msg and "model='M'" in msg


def test_arm_given_twice(tmp_path):
    msg = errors_of(yaml_file(tmp_path, "  - model: M\n    arms:\n      base: 40\n      true: 50\n      true: 51\n"))
    assert "'true' given twice" in msg
    msg = errors_of(yaml_file(tmp_path, "  - {model: M, arms: {base: 40, frozen: 41, true: 50}}\n", name="u.yaml"))
    assert "arms.frozen" in msg and "given twice" in msg
    c = write(tmp_path, "c.csv", "source_id,paper,table,model,benchmark,n_items,samples_per_item,values,base,frozen\n"
                                 "s,P,T,M,B,100,greedy,absolute,40,41\n")
    assert "given twice" in errors_of(c)


def test_gains_and_absolutes_mixed(tmp_path):
    msg = errors_of(yaml_file(tmp_path, "  - {model: M, arms: {base: 40, true: '+5.0', majority: 44}}\n"))
    assert "arms.true" in msg and "mixed inconsistently" in msg
    c = write(tmp_path, "c.csv", "source_id,paper,table,model,benchmark,n_items,samples_per_item,values,base,true,"
                                 "random\ns,P,T,M,B,100,greedy,absolute,40,52,-4.9\n")
    msg = errors_of(c)
    assert "line 2" in msg and "arms.random" in msg and "mixed inconsistently" in msg
    g = write(tmp_path, "g.yaml", HEADER.replace("values: absolute", "values: gains")
              + "  - {model: M, arms: {base: '+40', true: 5}}\n")
    assert "the base is always an absolute accuracy" in errors_of(g)


def test_unknown_arm_and_other_fields(tmp_path):
    msg = errors_of(yaml_file(tmp_path, "  - {model: M, arms: {base: 40, one_shot: 50}}\n"))
    assert "arms.one_shot: unknown arm" in msg and "self_certainty" in msg
    msg = errors_of(yaml_file(tmp_path, "  - {model: M, samples_per_item: avg, arms: {base: 40, majority: 50}}\n",
                              name="u.yaml"))
    assert "samples_per_item: 'avg' is not allowed" in msg
    text = HEADER.replace("majority_kind: online, ", "") + "  - {model: M, arms: {base: 40, majority: 50}}\n"
    assert "majority_kind: missing" in errors_of(write(tmp_path, "v.yaml", text))
    dup = yaml_file(tmp_path, "  - {model: M, arms: {base: 40, true: 50}}\n  - {model: M, arms: {base: 41, true: 50}}\n",
                    name="w.yaml")
    assert "entry given twice" in errors_of(dup)
    c = write(tmp_path, "c.csv", "source_id,paper,table,model,benchmark,n_items,samples_per_item,values,base,oracle\n"
                                 "s,P,T,M,B,100,greedy,absolute,40,41\n")
    assert "column 'oracle': unknown column" in errors_of(c)
    k = yaml_file(tmp_path, "  - {model: M, base_pass_at_k: {5: 60}, arms: {base: 40, true: 50}}\n", name="k.yaml")
    assert "base_pass_at_k.5: k=5 is not supported" in errors_of(k)


def _cli(args):
    from tabsim.cli import main

    return CliRunner().invoke(main, ["audit", *args])


def test_cli_writes_outputs_and_leaves_nothing_on_error(tmp_path):
    good = yaml_file(tmp_path, "  - {model: M, arms: {base: 40, random: 41, majority: 55, true: 60}}\n"
                               "  - {model: N, arms: {base: 30, majority: 40, true: 45}}\n")
    out = tmp_path / "res" / "audit"
    r = _cli([str(good), "--out", str(out), "--no-calibration", "-q"])
    assert r.exit_code == 0, r.output
    for name in ("audit.csv", "terms.csv", "entries.csv", "report.md", "terms.png", "provenance.json"):
        assert (out / name).is_file(), name
    assert not (out / "terms.pdf").exists()  # PNG only unless --pdf
    report = (out / "report.md").read_text()
    assert "Seed spread is unknown for single-run tables" in report
    before = (out / "audit.csv").read_bytes()

    bad = yaml_file(tmp_path, "  - {model: M, arms: {base: 40, true: 140}}\n", name="bad.yaml")
    fresh = tmp_path / "fresh" / "audit"
    r = _cli([str(good), str(bad), "--out", str(fresh), "--no-calibration", "-q"])
    assert r.exit_code != 0 and "arms.true" in r.output and "outside [0, 100]" in r.output
    assert not fresh.exists() and not fresh.parent.exists()
    r = _cli([str(bad), "--out", str(out), "--no-calibration", "-q"])
    assert r.exit_code != 0 and (out / "audit.csv").read_bytes() == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["audit"]  # no temporary folder left behind
    r = _cli([str(good), "--out", str(out), "--seed-sd", "-1", "--no-calibration"])
    assert r.exit_code != 0 and "--seed-sd" in r.output


def test_calibration_cache_key_covers_every_source_file(monkeypatch):
    """The on-disk calibration is keyed by a hash of all of tabsim's sources, so an edit anywhere (the
    engine's closed-form path, the planning of segments, ...) computes it afresh."""
    from tabsim.runtime import executors

    key = SMALL.digest()
    assert key == SMALL.digest()
    monkeypatch.setattr(cal, "source_digest", lambda: "0" * 16)
    assert SMALL.digest() != key
    assert cal.source_digest is not executors.source_digest


def test_calibration_says_each_sweep_or_where_it_read_it(monkeypatch, tmp_path):
    """``tabsim audit``'s phase lines: a sweep of seconds per family, announced before it compiles, or one line
    saying the calibration came from the cache (the sweeps are stood in for: what is tested is what is said)."""
    import dataclasses
    import re

    import pandas as pd

    grid = dataclasses.replace(SMALL, families=(("paper", (0.1,)), ("reuse8", (0.3,))))

    class Ran:
        def __init__(self, cfg):
            self.cfg = cfg

        def final(self):
            sweep = self.cfg["sweep"]
            return pd.DataFrame([{"prior_strength": p, "format_boost": 0.2, "heterogeneity": 10.0,
                                  "lr": sweep["lr"][0], "seed": 0, "arm": arm, "pass1": 0.5}
                                 for p in sweep["prior_strength"] for arm in cal.SIM_ARMS])

    monkeypatch.setattr(cal, "run", lambda cfg, **kw: Ran(cfg))
    monkeypatch.setattr(cal, "_MEMO", {})
    lines = []
    cal.simulate(grid, cache_dir=tmp_path, log=lines.append)
    path = tmp_path / f"audit-calibration-{grid.digest()}.parquet"
    assert lines[:2] == [f"calibration sweep {i} of 2: family {name} (k = 2), 4 conditions x 4 seeds x 5 arms, 50 "
                         "steps: compiling, then training" for i, name in ((1, "paper"), (2, "reuse8"))]
    assert re.fullmatch(rf"calibration computed in [\d.]+ s; keeping it in {re.escape(str(path))}", lines[2])
    assert len(lines) == 3
    monkeypatch.setattr(cal, "_MEMO", {})
    lines.clear()
    cal.simulate(grid, cache_dir=tmp_path, log=lines.append)
    assert lines == [f"calibration: read from the cache ({path})"]
    lines.clear()
    cal.simulate(grid, cache_dir=tmp_path, log=lines.append)
    assert lines == ["calibration: computed earlier in this process"]
