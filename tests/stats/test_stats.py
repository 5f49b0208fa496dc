"""Tests of the partition, the interval functions and the crossover (tabsim.stats)."""
import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

import tabsim.stats as ts

ARMS4 = ("frozen", "random", "majority", "true")


def run_frame(acc, *, conditions=None, steps=(100, 200), extra_arms=("incorrect",), seed=0):
    """Engine-shaped tidy frame: one row per seed x arm x step; ``acc[arm]`` is the final pass1.

    Earlier steps carry different (wrong) values so that the final-step selection is exercised;
    the frozen arm is logged at step 0 only, like a policy that never changes.
    """
    rng = np.random.default_rng(seed)
    n = len(next(iter(acc.values())))
    rows = []
    for arm, values in acc.items():
        arm_steps = (0,) if arm == "frozen" else steps
        for step in arm_steps:
            for s in range(n):
                final = step == max(arm_steps)
                rows.append({"seed": s, "arm": arm, "step": step, **(conditions or {}),
                             "pass1": float(values[s]) if final else float(rng.uniform()),
                             "entropy": float(rng.uniform())})
    for arm in extra_arms:
        for s in range(n):
            rows.append({"seed": s, "arm": arm, "step": max(steps), **(conditions or {}),
                         "pass1": float(rng.uniform()), "entropy": 0.0})
    return pd.DataFrame(rows)


def random_acc(rng, n):
    return {arm: rng.uniform(0.05, 0.95, n) for arm in ARMS4}


# ----------------------------------------------------------------------------- partition


def test_seed_partition_terms_and_identity_on_every_row():
    rng = np.random.default_rng(1)
    frames, truth = [], {}
    for p in (0.2, 0.5, 0.8):
        for lr in (0.01, 0.05):
            acc = random_acc(rng, 7)
            truth[(p, lr)] = acc
            frames.append(run_frame(acc, conditions={"prior_strength": p, "lr": lr}, seed=int(p * 100 + lr * 1000)))
    df = pd.concat(frames, ignore_index=True)
    out = ts.seed_partition(df, by=("prior_strength", "lr"))
    assert list(out.columns) == ["prior_strength", "lr", "seed", "step", *ts.ACC_COLUMNS, *ts.DIFFERENCE_TERMS]
    assert len(out) == 6 * 7 and (out["step"] == 200).all()
    for (p, lr), acc in truth.items():
        sub = out[(out.prior_strength == p) & (out.lr == lr)].sort_values("seed")
        f, r, m, t = (acc[a] for a in ARMS4)
        np.testing.assert_allclose(sub["acc_majority"], m, rtol=0, atol=0)
        np.testing.assert_allclose(sub["d_null"], r - f, rtol=0, atol=1e-15)
        np.testing.assert_allclose(sub["d_elicit"], m - r, rtol=0, atol=1e-15)
        np.testing.assert_allclose(sub["d_rd"], t - m, rtol=0, atol=1e-15)
        np.testing.assert_allclose(sub["d_naive"], t - r, rtol=0, atol=1e-15)
        np.testing.assert_allclose(sub["d_total"], t - f, rtol=0, atol=1e-15)
    gap = out["d_total"] - (out["d_null"] + out["d_elicit"] + out["d_rd"])
    assert np.abs(gap).max() <= 1e-9


@pytest.mark.parametrize("column,delta,relation", [
    ("d_rd", 1e-6, "d_total == d_null"),
    ("acc_true", 1e-3, "d_rd == acc_true - acc_majority"),
])
def test_identity_check_raises_on_tampered_frame(column, delta, relation):
    out = ts.seed_partition(run_frame(random_acc(np.random.default_rng(2), 6)))
    ts.check_identity(out)
    bad = out.copy()
    bad.loc[3, column] += delta
    with pytest.raises(ValueError, match=relation):
        ts.check_identity(bad)
    with pytest.raises(ValueError, match="identity"):
        ts.summarize_partition(bad, n_resamples=200)


def test_identity_tolerance_is_1e_9():
    out = ts.seed_partition(run_frame(random_acc(np.random.default_rng(3), 4)))
    ok = out.copy()
    ok.loc[0, "d_total"] += 5e-10
    ts.check_identity(ok)
    ok.loc[0, "d_total"] += 1e-9
    with pytest.raises(ValueError):
        ts.check_identity(ok)


def test_missing_arm_is_named():
    df = run_frame(random_acc(np.random.default_rng(4), 5))
    with pytest.raises(ValueError, match="arm 'majority' is missing"):
        ts.seed_partition(df[df.arm != "majority"])
    with pytest.raises(ValueError, match="arm 'majority_offline' is missing"):
        ts.seed_partition(df, majority_arm="majority_offline")
    with pytest.raises(ValueError, match="majority_arm must be one of"):
        ts.seed_partition(df, majority_arm="format")


def test_offline_majority_arm_is_used_when_asked():
    rng = np.random.default_rng(5)
    acc = random_acc(rng, 5)
    acc["majority_offline"] = rng.uniform(size=5)
    out = ts.seed_partition(run_frame(acc), majority_arm="majority_offline")
    np.testing.assert_allclose(out["acc_majority"], acc["majority_offline"])
    assert out.attrs["majority_arm"] == "majority_offline"


def test_unpaired_seeds_and_ambiguous_rows_raise():
    df = run_frame(random_acc(np.random.default_rng(6), 5))
    unpaired = df[~((df.arm == "true") & (df.seed == 2))]
    with pytest.raises(ValueError, match=r"arm 'true' has no row for \(by..., seed\) = \(2,\)"):
        ts.seed_partition(unpaired)
    with pytest.raises(ValueError, match=r"arm 'true' has no row for \(by..., seed\) = \(0.5, 2\)"):
        ts.seed_partition(unpaired.assign(prior_strength=0.5), by="prior_strength")
    doubled = pd.concat([df.assign(lr=0.1), df.assign(lr=0.2)], ignore_index=True)
    with pytest.raises(ValueError, match=r"vary among them: \['lr'"):
        ts.seed_partition(doubled)
    ts.seed_partition(doubled, by="lr")
    with pytest.raises(ValueError, match="step=7 is not in"):
        ts.seed_partition(df, step=7)
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['gamma'\]"):
        ts.seed_partition(df, by="gamma")


def test_explicit_step_selects_that_step():
    df = run_frame(random_acc(np.random.default_rng(7), 4), steps=(100, 200))
    frozen0 = df[(df.arm == "frozen")].assign(step=100)
    df = pd.concat([df, frozen0], ignore_index=True)
    out = ts.seed_partition(df, step=100)
    expected = df[(df.step == 100) & (df.arm == "random")].sort_values("seed")["pass1"].to_numpy()
    np.testing.assert_allclose(out["acc_random"], expected)


def test_summary_estimates_are_ratios_of_means():
    rng = np.random.default_rng(8)
    acc = {"frozen": rng.uniform(0.2, 0.3, 9), "random": rng.uniform(0.2, 0.3, 9),
           "majority": rng.uniform(0.4, 0.5, 9), "true": rng.uniform(0.6, 0.7, 9)}
    seed_df = ts.seed_partition(run_frame(acc))
    for method in ("bca", "percentile", "t"):
        s = ts.summarize_partition(seed_df, method=method, n_resamples=300).set_index("term")
        assert list(s.index) == list(ts.SUMMARY_TERMS)
        mf, mr, mm, mt = (acc[a].mean() for a in ARMS4)
        expected = {"d_null": mr - mf, "d_elicit": mm - mr, "d_rd": mt - mm, "d_naive": mt - mr,
                    "d_total": mt - mf, "bias": mm - mr, "rd_fraction": (mt - mm) / (mt - mr),
                    "elicitation_share": (mm - mf) / (mt - mf), "rd_share": (mt - mm) / (mt - mf)}
        for term, value in expected.items():
            assert s.loc[term, "estimate"] == pytest.approx(value, abs=1e-12)
            assert s.loc[term, "ci_low"] <= s.loc[term, "estimate"] <= s.loc[term, "ci_high"]
        assert (s["n_seeds"] == 9).all() and (s["method"] == method).all()
    t = ts.summarize_partition(seed_df, method="t").set_index("term")
    f = ts.fieller_interval(acc["true"] - acc["majority"], acc["true"] - acc["random"], 0.95)
    assert (t.loc["rd_fraction", "ci_low"], t.loc["rd_fraction", "ci_high"]) == pytest.approx((f.low, f.high))


def test_summary_bootstrap_is_paired_over_seeds():
    # Arms share a large per-seed effect (sd 0.1) and differ by small noise (sd 0.005): a paired
    # interval of d_elicit is as narrow as the noise, an unpaired one would be ~20x wider.
    rng = np.random.default_rng(9)
    n = 12
    base = rng.normal(0.5, 0.1, n)
    acc = {"frozen": base, "random": base + rng.normal(0, 0.005, n),
           "majority": base + 0.02 + rng.normal(0, 0.005, n), "true": base + 0.1 + rng.normal(0, 0.005, n)}
    seed_df = ts.seed_partition(run_frame(acc))
    s = ts.summarize_partition(seed_df, method="percentile", n_resamples=1000, random_state=3).set_index("term")
    single = ts.mean_interval(seed_df["d_elicit"].to_numpy(), method="percentile", n_resamples=1000, random_state=3)
    # Same seed -> same resampled seed indices for the joint and the single-array bootstrap.
    assert s.loc["d_elicit", "ci_low"] == pytest.approx(single.low, abs=1e-12)
    assert s.loc["d_elicit", "ci_high"] == pytest.approx(single.high, abs=1e-12)
    paired_t = ts.t_interval(seed_df["d_elicit"].to_numpy())
    assert s.loc["d_elicit", "ci_high"] - s.loc["d_elicit", "ci_low"] < 2 * (paired_t.high - paired_t.low)


def test_summary_groups_and_seed_uniqueness():
    rng = np.random.default_rng(10)
    df = pd.concat([run_frame(random_acc(rng, 5), conditions={"prior_strength": p}) for p in (0.2, 0.8)])
    seed_df = ts.seed_partition(df, by="prior_strength")
    s = ts.summarize_partition(seed_df, by="prior_strength", n_resamples=200)
    assert len(s) == 2 * len(ts.SUMMARY_TERMS)
    assert list(s.columns) == ["prior_strength", "term", "estimate", "se", "ci_low", "ci_high",
                               "ci_level", "method", "n_seeds"]
    with pytest.raises(ValueError, match="appears more than once"):
        ts.summarize_partition(seed_df, n_resamples=200)


@pytest.mark.parametrize("kwargs,match", [
    ({"ci": 1.5}, r"ci must be a confidence level in \(0, 1\), got 1.5"),
    ({"method": "bootstrap"}, "method must be one of"),
    ({"n_resamples": 10}, "n_resamples must be an integer >= 100, got 10"),
    ({"random_state": "x"}, "random_state must be"),
])
def test_summary_rejects_bad_settings(kwargs, match):
    seed_df = ts.seed_partition(run_frame(random_acc(np.random.default_rng(11), 4)))
    with pytest.raises(ValueError, match=match):
        ts.summarize_partition(seed_df, **kwargs)


# ----------------------------------------------------------------------------- intervals

N_REP, N_SEEDS = 400, 20


@pytest.mark.parametrize("method", ["t", "percentile", "bca"])
def test_interval_coverage_on_normal_seeds(method):
    # 400 replications of 20 N(mu, 0.05^2) seeds. The t interval is exact for normal data:
    # coverage 0.95. Percentile and BCa use the bootstrap distribution of the mean, roughly
    # normal with the plug-in sd s*sqrt((n-1)/n), so they cover about
    #   P(|T_{n-1}| <= z_{0.975} sqrt((n-1)/n)) = 0.9287 at n = 20
    # (a 4000-replication check gave 0.930 percentile and 0.929 BCa). The coverage estimate is
    # binomial over 400 replications; 3 standard errors sqrt(p(1-p)/400) ~ 0.033-0.039. The Monte
    # Carlo error of the endpoints (1000 resamples) only blurs coverage at the 1e-3 level.
    mu = 0.1
    x = np.random.default_rng(2024).normal(mu, 0.05, size=(N_REP, N_SEEDS))
    covered = []
    for i in range(N_REP):
        iv = ts.mean_interval(x[i], method=method, n_resamples=1000, random_state=i)
        covered.append(iv.low <= mu <= iv.high)
    coverage = np.mean(covered)
    n = N_SEEDS
    target = 0.95 if method == "t" else 1 - 2 * sps.t.sf(sps.norm.ppf(0.975) * np.sqrt((n - 1) / n), n - 1)
    tol = 3 * np.sqrt(target * (1 - target) / N_REP)
    assert abs(coverage - target) <= tol, (coverage, target, tol)


def test_fieller_coverage_and_unbounded_case():
    # Fieller is exact for bivariate normal seeds; 400 replications, tolerance 3 binomial SE.
    rng = np.random.default_rng(7)
    rho, hits = 0.4, 0
    for _ in range(N_REP):
        den = rng.normal(0.3, 0.05, N_SEEDS)
        num = rho * den + rng.normal(0, 0.03, N_SEEDS)
        f = ts.fieller_interval(num, den, 0.95)
        assert f.bounded
        hits += f.low <= rho <= f.high
    assert abs(hits / N_REP - 0.95) <= 3 * np.sqrt(0.95 * 0.05 / N_REP)
    # Denominator not distinguishable from 0: the set is unbounded.
    den = rng.normal(0.0, 0.1, 10)
    f = ts.fieller_interval(rng.normal(0.2, 0.05, 10), den, 0.95)
    assert (f.low, f.high, f.bounded) == (-np.inf, np.inf, False)


def test_fieller_with_constant_denominator_is_a_scaled_t_interval():
    x = np.random.default_rng(8).normal(1.0, 0.2, 15)
    c = 2.5
    f = ts.fieller_interval(x, np.full(15, c), 0.9)
    t = ts.t_interval(x, ci=0.9)
    assert (f.low, f.high) == pytest.approx((t.low / c, t.high / c), rel=1e-12)


def test_constant_values_give_degenerate_interval():
    iv = ts.mean_interval(np.full(6, 0.25), method="bca", n_resamples=200)
    assert (iv.estimate, iv.low, iv.high, iv.se) == (0.25, 0.25, 0.25, 0.0)


# ----------------------------------------------------------------------------- crossover

GRID = (0.20, 0.35, 0.50, 0.65, 0.80)


def linear_elicit_frame(root, slope, sigma, n, seed, grid=GRID):
    rng = np.random.default_rng(seed)
    frames = []
    for p in grid:
        frozen = rng.uniform(0.2, 0.3, n)
        random_ = frozen + rng.normal(0, 0.01, n)
        majority = random_ + slope * (p - root) + rng.normal(0, sigma, n)
        acc = {"frozen": frozen, "random": random_, "majority": majority, "true": majority + 0.2}
        frames.append(run_frame(acc, conditions={"prior_strength": p}, seed=int(p * 100)))
    return ts.seed_partition(pd.concat(frames, ignore_index=True), by="prior_strength")


def test_crossover_recovers_known_root():
    root, slope, sigma, n = 0.42, 0.5, 0.02, 16
    seed_df = linear_elicit_frame(root, slope, sigma, n, seed=12)
    res = ts.locate_crossover(seed_df, n_resamples=1000, random_state=1)
    # Delta method for r = p0 - m0 (p1 - p0) / (m1 - m0) between the grid points around the root,
    # with D = m1 - m0: dr/dm0 = -dp m1 / D^2, dr/dm1 = dp m0 / D^2, Var(m_j) = sigma^2 / n.
    p0, p1 = 0.35, 0.50
    m0, m1 = slope * (p0 - root), slope * (p1 - root)
    d = m1 - m0
    se = (p1 - p0) / d**2 * sigma / np.sqrt(n) * np.hypot(m0, m1)
    assert abs(res.estimate - root) <= 4 * se, (res.estimate, se)
    assert res.ci_low <= root <= res.ci_high
    assert res.root_fraction == 1.0 and res.direction == "increasing"
    assert res.curve["mean_d_elicit"].iloc[0] < 0 < res.curve["mean_d_elicit"].iloc[-1]
    # The interval width should be of the order of the delta-method SE (2 * 1.96 SE).
    assert 2 * 1.96 * se / 2 < res.ci_high - res.ci_low < 2 * 1.96 * se * 2


def test_crossover_interpolates_hand_example():
    # mean curve -0.2, -0.1, 0.05, 0.3 at 0.2, 0.4, 0.6, 0.8 -> root 0.4 + 0.1 * 0.2 / 0.15.
    grid = (0.2, 0.4, 0.6, 0.8)
    rows = []
    for p, m in zip(grid, (-0.2, -0.1, 0.05, 0.3)):
        for s in range(4):
            rows.append({"prior_strength": p, "seed": s, "d_elicit": m + (0.001 if s % 2 else -0.001)})
    res = ts.locate_crossover(pd.DataFrame(rows), n_resamples=200)
    assert res.estimate == pytest.approx(0.4 + 0.1 * 0.2 / 0.15, abs=1e-12)


def test_crossover_without_root_and_censored_bounds():
    no_root = linear_elicit_frame(root=0.05, slope=0.5, sigma=0.02, n=8, seed=13)
    res = ts.locate_crossover(no_root, n_resamples=300)
    assert np.isnan(res.estimate) and np.isnan(res.ci_low) and np.isnan(res.ci_high)
    assert res.root_fraction == 0.0
    # Mean curve -0.01 at the first grid point with a seed sd of 0.05 (6 seeds): about 30% of the
    # resamples have a positive mean there, hence no root, with the root below the grid. More than
    # 2.5% of censored mass makes the lower bound unidentified (NaN); the upper bound is finite.
    z = np.random.default_rng(14).normal(size=6)
    z = (z - z.mean()) / z.std(ddof=1)
    rows = [{"prior_strength": 0.2, "seed": s, "d_elicit": -0.01 + 0.05 * z[s]} for s in range(6)]
    rows += [{"prior_strength": p, "seed": s, "d_elicit": p - 0.2 + 0.01 * z[s]}
             for p in GRID[1:] for s in range(6)]
    res = ts.locate_crossover(pd.DataFrame(rows), n_resamples=1000, random_state=2)
    assert 0.2 < res.estimate < 0.35 and res.direction == "increasing"
    assert 0.1 < res.frac_below_grid < 0.5 and res.root_fraction == pytest.approx(1 - res.frac_below_grid)
    assert np.isnan(res.ci_low) and 0.2 < res.ci_high <= 0.35
    assert res.frac_above_grid == 0.0


def test_crossover_checks_grid_and_seeds():
    seed_df = linear_elicit_frame(0.42, 0.5, 0.02, 4, seed=15)
    with pytest.raises(ValueError, match=r"grid values \[0.3\] are not in"):
        ts.locate_crossover(seed_df, grid=(0.2, 0.3))
    res = ts.locate_crossover(seed_df, grid=(0.35, 0.5), n_resamples=200, paired=True)
    assert 0.35 < res.estimate < 0.5
    with pytest.raises(ValueError, match="seeds repeat"):
        ts.locate_crossover(pd.concat([seed_df.assign(lr=1), seed_df.assign(lr=2)]))
