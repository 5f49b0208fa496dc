"""Bootstrap indices are drawn as int32 where they fit: the values of the int64 draws, the generator left
in the same state (the statistics' resamples are the same whichever type holds them)."""
import numpy as np
import pytest

from tabsim.stats.draws import INT32_BELOW, resample_indices


@pytest.mark.parametrize("n", [1, 2, 3, 7, 4096, 100_003, 2**24 + 1, INT32_BELOW - 1, INT32_BELOW, 2**32 + 3])
def test_the_values_and_the_next_draws_are_those_of_int64_indices(n):
    a, b = np.random.default_rng(11), np.random.default_rng(11)
    for size in [(5,), (3, 1001), (2, 3, 7)]:  # odd counts: a 64-bit word split across calls
        got, want = resample_indices(a, n, size), b.integers(0, n, size=size)
        assert got.dtype == (np.int32 if n < INT32_BELOW else np.int64)
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(a.random(9), b.random(9))  # the same state afterwards
