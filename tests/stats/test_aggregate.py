"""Aggregates across conditions (tabsim.stats.aggregate): rliable's definitions written out independently
here, hand-computed values, the stratified bootstrap's strata, and the intervals' coverage by simulation."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, stats

from tabsim.stats import aggregate as agg


# rliable's metrics (rliable/metrics.py), one task at a time, with scipy's Mann-Whitney U
def rly_mean(s):
    return np.mean([np.mean(s[:, t]) for t in range(s.shape[1])])


def rly_median(s):
    return np.median([np.mean(s[:, t]) for t in range(s.shape[1])])


def rly_iqm(s):
    flat = np.sort(s.ravel())
    cut = int(0.25 * flat.size)
    return np.mean(flat[cut:flat.size - cut])


def rly_gap(s, gamma):
    return gamma - np.mean(np.minimum(s, gamma))


def rly_poi(x, y):
    probs = []
    for t in range(x.shape[1]):
        if np.array_equal(x[:, t], y[:, t]):
            probs.append(0.5)
        else:
            u, _ = stats.mannwhitneyu(x[:, t], y[:, t], alternative="greater")
            probs.append(u / (x.shape[0] * y.shape[0]))
    return np.mean(probs)


def test_estimates_match_rliable_definitions():
    rng = np.random.default_rng(3)
    for trial in range(20):
        runs, tasks = rng.integers(2, 12), rng.integers(1, 7)
        x = rng.normal(0.5, 0.2, size=(runs, tasks)).round(1)  # rounded: ties, which the 0.5 P(X = Y) counts
        y = rng.normal(0.45, 0.2, size=(rng.integers(2, 12), tasks)).round(1)
        assert agg.aggregate_mean(x) == pytest.approx(rly_mean(x), abs=1e-12)
        assert agg.aggregate_median(x) == pytest.approx(rly_median(x), abs=1e-12)
        assert agg.aggregate_iqm(x) == pytest.approx(rly_iqm(x), abs=1e-12)
        assert agg.optimality_gap(x, threshold=0.6) == pytest.approx(rly_gap(x, 0.6), abs=1e-12)
        assert agg.probability_of_improvement(x, y) == pytest.approx(rly_poi(x, y), abs=1e-12)
        assert agg.probability_of_improvement(x, x) == pytest.approx(0.5, abs=1e-12)


def test_hand_computed_values():
    s = np.array([[0.0, 1.0], [0.2, 0.6], [0.4, 0.8], [0.6, 0.4]])  # 4 runs x 2 tasks
    assert agg.aggregate_mean(s) == pytest.approx((0.3 + 0.7) / 2)
    assert agg.aggregate_median(s) == pytest.approx(0.5)
    assert agg.aggregate_iqm(s) == pytest.approx(np.mean([0.4, 0.4, 0.6, 0.6]))  # middle 4 of 8
    assert agg.optimality_gap(s, threshold=0.5) == pytest.approx(0.5 - np.mean([0, 0.5, 0.2, 0.5, 0.4, 0.5, 0.5, 0.4]))
    x, y = np.array([[1.0], [2.0]]), np.array([[2.0], [0.0]])  # pairs: (1,2)<, (1,0)>, (2,2)=, (2,0)>
    assert agg.probability_of_improvement(x, y) == pytest.approx((0 + 1 + 0.5 + 1) / 4)
    assert agg.score_distribution(s, [0.5]).tolist() == [4 / 8]  # 1.0, 0.6, 0.8, 0.6


def test_bootstrap_resamples_within_each_condition():
    s = np.array([[0.0, 10.0], [1.0, 11.0], [2.0, 12.0]])
    rng = np.random.default_rng(0)
    block = np.concatenate(list(agg.stratified_resamples(s, 500, rng)))
    assert block.shape == (500, 3, 2)
    assert set(np.unique(block[:, :, 0])) <= {0.0, 1.0, 2.0} and set(np.unique(block[:, :, 1])) <= {10.0, 11.0, 12.0}
    # the blocks' size bounds memory only: the estimates do not depend on it
    got = agg.aggregate_intervals(s, n_resamples=300, random_state=1)
    assert got["mean"][0] == pytest.approx(6.0) and got["mean"][1] < 6.0 < got["mean"][2]


def test_refuses_bad_input_naming_the_field():
    with pytest.raises(ValueError, match=r"scores must be \[runs, tasks\]"):
        agg.aggregate_intervals(np.ones((1, 3)))
    with pytest.raises(ValueError, match="finite"):
        agg.aggregate_intervals(np.array([[1.0, np.nan], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="n_resamples"):
        agg.aggregate_intervals(np.ones((3, 2)), n_resamples=10)
    with pytest.raises(ValueError, match="same tasks"):
        agg.improvement_interval(np.ones((3, 2)), np.ones((3, 3)))


def _mixture_iqm(mu, sd):
    """The interquartile mean of an equal mixture of normals: E[X | q25 < X < q75], in closed form."""
    cdf = lambda v: np.mean(stats.norm.cdf((v - mu) / sd))  # noqa: E731
    lo, hi = (optimize.brentq(lambda v, p=p: cdf(v) - p, -50, 50, xtol=1e-13) for p in (0.25, 0.75))
    a, b = (lo - mu) / sd, (hi - mu) / sd
    partial = mu * (stats.norm.cdf(b) - stats.norm.cdf(a)) + sd * (stats.norm.pdf(a) - stats.norm.pdf(b))
    return np.mean(partial) / 0.5


def _coverage(n_studies: int, runs: int, n_resamples: int, seed: int) -> dict[str, float]:
    """Share of simulated studies whose 95% interval holds the known true value, per statistic."""
    mu, sd = np.linspace(0.2, 0.8, 8), np.full(8, 0.1)  # 8 conditions, well apart (the median is identified)
    mu_y = mu - 0.05
    gamma = 0.6
    z = (gamma - mu) / sd
    truth = {"mean": mu.mean(), "median": np.median(mu), "iqm": _mixture_iqm(mu, sd),
             "optimality_gap": gamma - np.mean(mu - (mu - gamma) * stats.norm.sf(z) - sd * stats.norm.pdf(z)),
             "poi": np.mean(stats.norm.cdf((mu - mu_y) / np.sqrt(2 * sd ** 2)))}
    rng = np.random.default_rng(seed)
    hits = {k: 0 for k in truth}
    for _ in range(n_studies):
        x = rng.normal(mu, sd, size=(runs, mu.size))
        y = rng.normal(mu_y, sd, size=(runs, mu.size))
        got = agg.aggregate_intervals(x, threshold=gamma, n_resamples=n_resamples, random_state=rng)
        got["poi"] = agg.improvement_interval(x, y, n_resamples=n_resamples, random_state=rng)
        for k in truth:
            hits[k] += got[k][1] <= truth[k] <= got[k][2]
    return {k: h / n_studies for k, h in hits.items()}


def _check_coverage(cover: dict[str, float], n_studies: int) -> None:
    se = np.sqrt(0.95 * 0.05 / n_studies)  # binomial standard error of a coverage of 0.95
    band = 3.5 * se
    off = {k: c for k, c in cover.items() if abs(c - 0.95) > band}
    assert not off, f"coverage outside 0.95 +/- {band:.3f} (3.5 s.e. over {n_studies} studies): {off}"


def test_intervals_cover_at_the_nominal_rate():
    _check_coverage(_coverage(n_studies=200, runs=10, n_resamples=1000, seed=11), 200)


@pytest.mark.heavy
def test_intervals_cover_at_the_nominal_rate_many_studies():
    _check_coverage(_coverage(n_studies=1000, runs=10, n_resamples=2000, seed=12), 1000)


def test_rescaled_bounds_stay_where_the_statistic_can_be():
    # one seed short of the target: the optimality gap's bootstrap lies in [0, 0.01/6]; stretched, its low
    # bound fell below 0 (-0.00018 in a real sweep), and the mean's high bound above the best score
    s = np.ones((6, 1))
    s[0, 0] = 0.99
    for method in agg.METHODS:
        got = agg.aggregate_intervals(s, n_resamples=500, method=method, random_state=0)
        assert got["optimality_gap"][1] >= 0.0 and got["mean"][2] <= 1.0, method
        assert all(lo <= est <= hi for est, lo, hi in got.values()), method


def test_bca_is_scipys_with_each_condition_a_sample():
    rng = np.random.default_rng(4)
    x = rng.normal(0.5, 0.2, size=(9, 1))
    got = agg.aggregate_intervals(x, n_resamples=1000, method="bca", random_state=np.random.default_rng(7))["mean"]
    want = stats.bootstrap((x[:, 0],), np.mean, n_resamples=1000, method="BCa", rng=np.random.default_rng(7))
    assert got[1:] == pytest.approx(tuple(want.confidence_interval), abs=1e-12)
    two = rng.normal(0.5, 0.2, size=(9, 2))
    lo, hi = agg.aggregate_intervals(two, n_resamples=1000, method="bca")["mean"][1:]
    pct = agg.aggregate_intervals(two, n_resamples=1000, method="percentile")["mean"][1:]
    assert lo < two.mean() < hi and hi - lo == pytest.approx(pct[1] - pct[0], rel=0.25)


def test_conditions_resampled_too_widen_the_interval_when_conditions_differ():
    rng = np.random.default_rng(8)
    x = np.linspace(0.1, 0.9, 6) + rng.normal(0, 0.01, size=(5, 6))  # conditions far apart, seeds close
    within = agg.aggregate_intervals(x, n_resamples=1000, method="percentile")["mean"]
    both = agg.aggregate_intervals(x, n_resamples=1000, method="percentile", conditions=True)["mean"]
    se = np.linspace(0.1, 0.9, 6).std() / np.sqrt(6)  # the bootstrap standard error over conditions
    assert both[2] - both[1] == pytest.approx(2 * 1.96 * se, rel=0.2) and within[2] - within[1] < 0.2 * se
    with pytest.raises(ValueError, match="'bca' resamples seeds within conditions only"):
        agg.aggregate_intervals(x, method="bca", conditions=True)
