"""tabsim's aggregates against rliable 1.2.0's, stored once in rliable_reference.json by
experiments/rliable_reference/make.py (rliable itself is not needed here): point estimates equal,
percentile intervals and profile bands within the Monte-Carlo error of two 20,000-resample bootstraps."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from tabsim.stats import aggregate as agg

REF = json.loads((Path(__file__).parent / "rliable_reference.json").read_text())
CASES = REF["cases"]


def _tolerance(bounds, reps: int, step: float = 0.0) -> float:
    """4 standard errors of the difference of two bootstraps' 2.5% quantiles (each ``sqrt(p (1 - p) / B)``
    over the density, normal with the sd the interval implies), plus one step of a discrete statistic."""
    p, z = 0.025, stats.norm.ppf(0.975)
    sd = (bounds[1] - bounds[0]) / (2 * z)
    return 4 * np.sqrt(2) * np.sqrt(p * (1 - p) / reps) / stats.norm.pdf(z) * sd + step + 1e-12


@pytest.mark.parametrize("case", CASES)
def test_point_estimates_equal_rliable(case):
    c = CASES[case]
    x, y = np.array(c["x"]), np.array(c["y"])
    got = {"mean": agg.aggregate_mean(x), "median": agg.aggregate_median(x), "iqm": agg.aggregate_iqm(x),
           "optimality_gap": agg.optimality_gap(x, threshold=c["threshold"]),
           "probability_of_improvement": agg.probability_of_improvement(x, y)}
    for name, value in got.items():
        assert value == pytest.approx(c[name]["estimate"], abs=1e-12), name
    assert agg.score_distribution(x, c["taus"]).tolist() == pytest.approx(c["profile"]["estimate"], abs=1e-12)


@pytest.mark.parametrize("case", CASES)
def test_percentile_intervals_agree_with_rliable(case):
    c, reps = CASES[case], CASES[case]["reps"]
    x, y = np.array(c["x"]), np.array(c["y"])
    for conditions, key in ((False, "percentile"), (True, "percentile_conditions")):
        if conditions and x.shape[1] == 1:
            continue  # one condition resampled is that condition: nothing new to compare
        got = agg.aggregate_intervals(x, threshold=c["threshold"], n_resamples=reps, method="percentile",
                                      random_state=1, conditions=conditions)
        for name in agg.AGGREGATES:
            want = c[name][key]
            assert got[name][1:] == pytest.approx(want, abs=_tolerance(want, reps)), (name, key)
    want = c["probability_of_improvement"]["percentile"]
    step = 0.5 / (x.shape[0] * y.shape[0] * x.shape[1])
    got = agg.improvement_interval(x, y, n_resamples=reps, method="percentile", random_state=2)
    assert got[1:] == pytest.approx(want, abs=_tolerance(want, reps, step))
    _, lo, hi = agg.profile_intervals(x, c["taus"], n_resamples=reps, method="percentile", random_state=3)
    want = np.array(c["profile"]["percentile"])
    for i in range(len(c["taus"])):
        tol = _tolerance(want[:, i], reps, 1 / x.size)
        assert (lo[i], hi[i]) == pytest.approx(tuple(want[:, i]), abs=tol), c["taus"][i]
