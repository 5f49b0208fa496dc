"""Tests of the points-vs-bounds gate, the seed planning and the verdicts (tabsim.stats)."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

import tabsim.stats as ts


def seed_frame(d_null, d_elicit, d_rd, *, frozen=None, seed=0, **conditions):
    """Seed-level partition frame from per-seed terms (as seed_partition would return it)."""
    d_null, d_elicit, d_rd = (np.asarray(x, float) for x in (d_null, d_elicit, d_rd))
    n = d_null.size
    f = np.random.default_rng(seed).uniform(0.1, 0.2, n) if frozen is None else np.asarray(frozen, float)
    r = f + d_null
    m = r + d_elicit
    t = m + d_rd
    out = pd.DataFrame({**conditions, "seed": np.arange(n), "acc_frozen": f, "acc_random": r,
                        "acc_majority": m, "acc_true": t})
    out["d_null"], out["d_elicit"], out["d_rd"] = r - f, m - r, t - m
    out["d_naive"], out["d_total"] = t - r, t - f
    return out


def normal(rng, mean, sd, n):
    return rng.normal(mean, sd, n)


# ----------------------------------------------------------------------------- gate


def test_classify_rule():
    assert ts.classify(0.10, 0.11, tolerance=0.02) == "point"
    assert ts.classify(-0.11, -0.10, tolerance=0.02) == "point"
    assert ts.classify(0.10, 0.13, tolerance=0.02) == "sign"
    assert ts.classify(0.25, 0.5, tolerance=0.25) == "sign"  # width must be strictly below
    assert ts.classify(-0.01, 0.05, tolerance=0.02) == "bounds"
    assert ts.classify(0.0, 0.01, tolerance=0.02) == "bounds"  # an endpoint at 0 does not exclude it
    with pytest.raises(ValueError, match="tolerance must be a finite number > 0, got -1"):
        ts.classify(0.1, 0.2, tolerance=-1)


def test_classify_terms_on_synthetic_cases():
    rng = np.random.default_rng(0)
    n = 8
    sym = np.tile([0.01, -0.01], n // 2)  # mean exactly 0: every interval contains 0
    df = seed_frame(
        d_null=sym,                                   # bounds
        d_elicit=normal(rng, 0.10, 0.002, n),         # point: t half-width ~ 0.0017
        d_rd=normal(rng, 0.10, 0.05, n),              # sign: half-width ~ 0.04 > tolerance
    )
    out = ts.classify_terms(df, tolerance=0.02, method="t").set_index("term")
    assert out.loc["d_null", "classification"] == "bounds"
    assert out.loc["d_elicit", "classification"] == "point"
    assert out.loc["bias", "classification"] == "point"
    assert out.loc["d_rd", "classification"] == "sign"
    assert (out["reference_gate"] == "points").all()
    assert "bounds only" in out.loc["d_null", "note"]
    row = out.loc["d_null"]
    assert (row.bound_low, row.bound_high) == (row.ci_low, row.ci_high)
    np.testing.assert_allclose(out["width"], out["ci_high"] - out["ci_low"])
    # Same classes with the default BCa bootstrap.
    boot = ts.classify_terms(df, tolerance=0.02, n_resamples=500).set_index("term")
    assert list(boot["classification"]) == list(out["classification"])


def test_bounds_are_clipped_to_the_logical_range():
    # Three seeds with d_elicit in {-0.9, 0.9, 0.8}: the t interval (t_2 = 4.30) reaches beyond
    # [-1, 1]; the reported bounds are that interval intersected with [-1, 1].
    df = seed_frame([0.0, 0.01, -0.01], [-0.9, 0.9, 0.8], [0.0, 0.0, 0.0], frozen=[0.95, 0.05, 0.1])
    out = ts.classify_terms(df, tolerance=0.05, method="t").set_index("term")
    row = out.loc["d_elicit"]
    assert row.classification == "bounds" and row.ci_low < -1 and row.ci_high > 1
    assert (row.bound_low, row.bound_high) == (-1.0, 1.0)
    assert "clipped to the logical range" in row.note
    assert out.loc["d_elicit", "reference_gate"] == "bounds"


def test_reference_gate_follows_d_elicit_only():
    rng = np.random.default_rng(1)
    sym = np.tile([0.02, -0.02], 4)
    df = seed_frame(normal(rng, 0.05, 0.001, 8), sym, normal(rng, 0.2, 0.001, 8))
    out = ts.classify_terms(df, tolerance=0.02, n_resamples=500)
    assert (out["reference_gate"] == "bounds").all()
    cls = out.set_index("term")["classification"]
    # d_naive and d_total inherit the 0.02 spread of d_elicit: t half-width ~0.017, width > 0.02.
    assert cls.to_dict() == {"d_null": "point", "d_elicit": "bounds", "d_rd": "point", "d_naive": "sign",
                             "d_total": "sign", "bias": "bounds"}


def test_gate_stability_fractions():
    rng = np.random.default_rng(2)
    n = 64
    big = seed_frame(np.tile([0.01, -0.01], n // 2), normal(rng, 0.1, 0.002, n), normal(rng, 0.006, 0.02, n))
    pilots = ts.pilot_replicates(big, n_seeds=8, random_state=3)
    assert len(pilots) == 8
    assert sorted(np.concatenate([p["seed"].to_numpy() for p in pilots]).tolist()) == list(range(n))
    out = ts.gate_stability(pilots, tolerance=0.02, method="t").set_index("term")
    fr = out[["frac_point", "frac_sign", "frac_bounds"]]
    np.testing.assert_allclose(fr.sum(axis=1), 1.0)
    assert np.allclose(fr.to_numpy() * 8, np.round(fr.to_numpy() * 8))
    assert out.loc["d_null", "frac_bounds"] == 1.0 and out.loc["d_null", "modal_classification"] == "bounds"
    assert out.loc["d_elicit", "frac_point"] == 1.0 and out.loc["d_elicit", "frac_reference_points"] == 1.0
    assert (out["n_replicates"] == 8).all()
    # d_rd has mean 0.3 pilot-SE: each pilot detects it rarely, so most pilots say bounds.
    assert out.loc["d_rd", "frac_bounds"] >= 0.5
    # The fractions equal per-pilot classification with the documented child seeds.
    children = [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(0).spawn(8)]
    per = [ts.classify_terms(p, tolerance=0.02, method="t", random_state=c).set_index("term")
           for p, c in zip(pilots, children)]
    assert out.loc["d_rd", "frac_sign"] == np.mean([p.loc["d_rd", "classification"] == "sign" for p in per])
    with pytest.raises(ValueError, match="at most 8 pilots"):
        ts.pilot_replicates(big, n_seeds=8, n_replicates=9)


# ----------------------------------------------------------------------------- power


def test_half_width_shrinks_as_one_over_sqrt_n():
    rng = np.random.default_rng(4)
    pilot = seed_frame(np.zeros(400), normal(rng, 0.02, 0.05, 400), np.zeros(400))
    curve = ts.power_curve(pilot, seeds_grid=(16, 256), n_sim=400, random_state=5).set_index("n_seeds")
    # t half-width = t_{n-1} s / sqrt(n) and E[s] = c4(n) sigma for normal seeds, so
    #   hw(256) / hw(16) = (t_255 c4(256)) / (t_15 c4(16)) * sqrt(16 / 256).
    def c4(n):
        return math.sqrt(2 / (n - 1)) * math.exp(math.lgamma(n / 2) - math.lgamma((n - 1) / 2))

    def tq(n):
        return sps.t.ppf(0.975, n - 1)

    expected = tq(256) * c4(256) / (tq(16) * c4(16)) * 0.25
    h16, h256 = curve.loc[16, "mean_half_width"], curve.loc[256, "mean_half_width"]
    rel_se = math.hypot(curve.loc[16, "se_mean_half_width"] / h16, curve.loc[256, "se_mean_half_width"] / h256)
    assert abs(h256 / h16 - expected) <= 4 * rel_se * expected, (h256 / h16, expected, rel_se)
    assert abs(h256 / h16 - 0.25) > 0  # sanity: the ratio is a real measurement


def test_detection_rate_matches_t_test_power():
    # Resampling a large normal pilot approximates normal seeds with the pilot's plug-in mean/sd,
    # so the detection rate is the power of a two-sided one-sample t test (noncentral t).
    rng = np.random.default_rng(6)
    x = normal(rng, 0.02, 0.05, 2000)
    pilot = seed_frame(np.zeros(2000), x, np.zeros(2000))
    grid = (4, 8, 16, 32)
    curve = ts.power_curve(pilot, seeds_grid=grid, n_sim=400, random_state=7).set_index("n_seeds")
    delta = x.mean() / x.std()
    for n in grid:
        tc = sps.t.ppf(0.975, n - 1)
        nc = delta * math.sqrt(n)
        power = sps.nct.sf(tc, n - 1, nc) + sps.nct.cdf(-tc, n - 1, nc)
        se = math.sqrt(power * (1 - power) / 400)
        assert abs(curve.loc[n, "detection_rate"] - power) <= 4 * se + 0.01, (n, curve.loc[n, "detection_rate"], power)
    assert curve["detection_rate"].is_monotonic_increasing


def test_power_curve_percentile_and_groups():
    rng = np.random.default_rng(8)
    pilots = pd.concat([
        seed_frame(np.zeros(10), normal(rng, 0.02, 0.05, 10), np.zeros(10), prior_strength=p) for p in (0.2, 0.8)
    ])
    curve = ts.power_curve(pilots, by="prior_strength", seeds_grid=(4, 16), n_sim=20, method="percentile",
                           n_resamples=200)
    assert list(curve.columns) == ["prior_strength", "term", "n_seeds", "mean_half_width", "median_half_width",
                                   "se_mean_half_width", "detection_rate", "detection_se", "n_sim", "ci_level",
                                   "method", "pilot_seeds", "pilot_estimate"]
    assert len(curve) == 4
    with pytest.raises(ValueError, match="seeds repeat"):
        ts.power_curve(pilots, seeds_grid=(4,), n_sim=20)
    with pytest.raises(ValueError, match="seeds_grid entry must be an integer >= 2, got 1"):
        ts.power_curve(pilots, by="prior_strength", seeds_grid=(1, 4))


def test_recommend_seeds_on_grid_and_extrapolated():
    curve = pd.DataFrame({"term": "d_elicit", "n_seeds": [4, 8, 16], "mean_half_width": [0.1, 0.07, 0.05],
                          "detection_rate": [0.2, 0.4, 0.7]})
    on = ts.recommend_seeds(curve, 0.07)
    assert (on["n_seeds"], on["extrapolated"], on["detection_rate"]) == (8, False, 0.4)
    off = ts.recommend_seeds(curve, 0.025)
    assert off["n_seeds"] == 64 and off["extrapolated"] is True and "extrapolated" in off["note"]
    assert off["predicted_half_width"] == pytest.approx(0.025)
    assert ts.recommend_seeds(curve, 0.02)["n_seeds"] == math.ceil(16 * (0.05 / 0.02) ** 2)
    with pytest.raises(ValueError, match="one term and one group"):
        ts.recommend_seeds(pd.concat([curve, curve]), 0.05)
    with pytest.raises(ValueError, match="target_half_width must be a finite number > 0"):
        ts.recommend_seeds(curve, 0.0)


# ----------------------------------------------------------------------------- verdict


def test_point_verdict_rules():
    cases = [
        ((0.98, 0.02), ts.ELICITATION_DOMINATED),
        ((-0.18, 1.18), ts.REWARD_DESIGN_DOMINATED),
        ((0.5, 0.5), ts.MIXED),
        ((0.6, 0.4), ts.MIXED),  # strictly greater than the threshold
        ((0.3, 0.6), ts.MIXED),
        ((0.61, 0.9), ts.ELICITATION_DOMINATED),  # elicitation is checked first
        ((0.3, 0.7), ts.REWARD_DESIGN_DOMINATED),
    ]
    for (e, r), expected in cases:
        out = ts.share_verdict(e, r)
        # Without intervals the interval rule reduces to the point rule.
        assert out.point_verdict == out.verdict == expected, (e, r, out)
    assert ts.share_verdict(0.3, 0.7).deciding_share == "rd"
    assert ts.share_verdict(0.5, 0.2, threshold=0.4).point_verdict == ts.ELICITATION_DOMINATED


def test_interval_verdicts_and_inconclusive():
    out = ts.share_verdict(0.7, 0.3, elicitation_ci=(0.5, 0.9), rd_ci=(0.1, 0.5))
    assert out.verdict == ts.INCONCLUSIVE and out.point_verdict == ts.ELICITATION_DOMINATED
    assert out.deciding_share == "elicitation"
    out = ts.share_verdict(0.4, 0.65, elicitation_ci=(0.2, 0.55), rd_ci=(0.45, 0.8))
    assert out.verdict == ts.INCONCLUSIVE and out.deciding_share == "rd"
    assert out.point_verdict == ts.REWARD_DESIGN_DOMINATED
    out = ts.share_verdict(0.4, 0.7, elicitation_ci=(0.2, 0.6), rd_ci=(0.61, 0.8))
    assert out.verdict == ts.REWARD_DESIGN_DOMINATED
    out = ts.share_verdict(0.3, 0.3, elicitation_ci=(0.1, 0.5), rd_ci=(0.2, 0.6))
    assert out.verdict == ts.MIXED
    out = ts.share_verdict(0.8, 0.1, elicitation_ci=(0.65, 0.95))
    assert out.verdict == ts.ELICITATION_DOMINATED and out.rd_ci == (0.1, 0.1)
    # An unbounded Fieller interval can decide nothing.
    assert ts.share_verdict(0.9, 0.1, elicitation_ci=(-np.inf, np.inf)).verdict == ts.INCONCLUSIVE


def test_verdict_checks_inputs():
    with pytest.raises(ValueError, match="elicitation_share is NaN"):
        ts.share_verdict(float("nan"), 0.2)
    with pytest.raises(ValueError, match="rd_ci must be an ordered pair"):
        ts.share_verdict(0.2, 0.3, rd_ci=(0.5, 0.1))
    with pytest.raises(ValueError, match="threshold must be a finite number > 0"):
        ts.share_verdict(0.2, 0.3, threshold="high")


def test_share_verdicts_from_summary():
    rng = np.random.default_rng(9)
    n = 10
    strong = seed_frame(normal(rng, 0.0, 0.002, n), normal(rng, 0.3, 0.002, n), normal(rng, 0.01, 0.002, n),
                        prior_strength=0.8)
    weak = seed_frame(normal(rng, 0.0, 0.002, n), normal(rng, -0.05, 0.002, n), normal(rng, 0.3, 0.002, n),
                      prior_strength=0.35)
    summary = ts.summarize_partition(pd.concat([strong, weak]), by="prior_strength", n_resamples=300)
    out = ts.share_verdicts(summary, by="prior_strength").set_index("prior_strength")
    assert out.loc[0.8, "verdict"] == ts.ELICITATION_DOMINATED
    assert out.loc[0.35, "verdict"] == ts.REWARD_DESIGN_DOMINATED
    assert out.loc[0.35, "rd_share"] > 1.0  # d_elicit < 0 pushes the rd share above 1
