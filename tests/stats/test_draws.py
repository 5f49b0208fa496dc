"""Bootstrap indices are drawn as int32 where they fit: the values of the int64 draws, the generator left
in the same state (the statistics' resamples are the same whichever type holds them)."""
import numpy as np
import pytest

from tabsim.stats.draws import INT32_BELOW, resample_indices, resampled_means, resampled_sums


@pytest.mark.parametrize("n", [1, 2, 3, 7, 4096, 100_003, 2**24 + 1, INT32_BELOW - 1, INT32_BELOW, 2**32 + 3])
def test_the_values_and_the_next_draws_are_those_of_int64_indices(n):
    a, b = np.random.default_rng(11), np.random.default_rng(11)
    for size in [(5,), (3, 1001), (2, 3, 7)]:  # odd counts: a 64-bit word split across calls
        got, want = resample_indices(a, n, size), b.integers(0, n, size=size)
        assert got.dtype == (np.int32 if n < INT32_BELOW else np.int64)
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(a.random(9), b.random(9))  # the same state afterwards


@pytest.mark.parametrize("n_rows,width", [(2000, 4096), (130, 7), (64, 1), (5, 33), (0, 12)])
@pytest.mark.parametrize("kind", ["float64", "strided", "float32", "int64"])
def test_resampled_sums_and_means_are_the_gathers_bits(n_rows, width, kind):
    """The block-wise gather gives each row's sum and mean bit for bit as the whole gather does, for
    float64 values (contiguous or a strided view); other types take the whole gather itself."""
    rng = np.random.default_rng(7)
    base = rng.normal(size=max(width, 1) * 2) * 10 ** rng.uniform(-3, 3, size=max(width, 1) * 2)
    values = {"float64": base[:width], "strided": base[::2][:width], "float32": base[:width].astype(np.float32),
              "int64": (base[:width] * 100).astype(np.int64)}[kind]
    idx = rng.integers(0, max(width, 1), size=(n_rows, width)).astype(np.int32)
    for got, want in ((resampled_sums(values, idx), values[idx].sum(axis=1)),
                      (resampled_means(values, idx), values[idx].mean(axis=1))):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()
