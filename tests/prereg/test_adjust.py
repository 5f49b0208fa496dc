"""A plan's family-wise correction (``analysis.correction``): the adjusted p-values are statsmodels' own."""
from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from tabsim.prereg.analysis import adjust


@pytest.mark.parametrize("method", ["holm", "bonferroni"])
def test_adjusted_p_values_equal_statsmodels(method):
    rng = np.random.default_rng(7)
    cases = [rng.uniform(size=n) for n in (1, 2, 5, 13)]
    cases += [np.array([0.01, 0.04, 0.04, 0.2, 0.01]),  # ties
              np.array([0.3, 0.6, 0.9]),  # adjusted values capped at 1
              np.array([0.0, 1.0, 0.5]), rng.uniform(size=8) ** 6]  # the bounds; tiny p-values
    for p in cases:
        want = multipletests(p, method=method)[1]
        assert adjust(list(p), method) == [float(x) for x in want], (method, p)


def test_no_correction_and_no_p_values_are_returned_as_given():
    assert adjust([0.2, 0.01], "none") == [0.2, 0.01]
    assert adjust([], "holm") == []


def test_an_unknown_correction_is_refused_naming_it():
    with pytest.raises(ValueError, match="correction: 'sidak'"):
        adjust([0.1], "sidak")
