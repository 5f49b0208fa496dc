"""The CPU-shaped kernels in tabsim.sim.ops against plain NumPy, on both branches (unrolled and general)."""
import jax
import numpy as np
import pytest

from tabsim.sim.ops import RANK_BY_COMPARISON, UNROLL, cumsum_last, ranks, take_rows, weighted_counts

from f32_tolerance import f64_bound  # tests/core: the float error bounds


@pytest.mark.parametrize("J,n", [(8, 8), (UNROLL + 3, 5), (4, UNROLL + 6)])
def test_weighted_counts_matches_numpy(J, n):
    rng = np.random.default_rng(J * 100 + n)
    idx = rng.integers(0, n, size=(7, J))
    w = rng.normal(size=(7, J))
    ref_w, ref_c = np.zeros((7, n)), np.zeros((7, n))
    for r in range(7):
        np.add.at(ref_w[r], idx[r], w[r])
        np.add.at(ref_c[r], idx[r], 1.0)
    with jax.enable_x64(True):
        # float64: each side sums a bin's weights (at most J) in its own order, erring by (J - 1) u times the
        # row's sum|w| (Higham 4.2); both sides together by f64_bound(J, .) (eps = 2u)
        tol = f64_bound(J, np.abs(w).sum(-1))
        np.testing.assert_allclose(np.asarray(weighted_counts(idx, w, n)), ref_w, rtol=0, atol=tol)
        np.testing.assert_array_equal(np.asarray(weighted_counts(idx, None, n)), ref_c)


@pytest.mark.parametrize("n,shape", [(6, (5, 9)), (6, (5, 3, 4)), (UNROLL + 2, (5, 9))])
def test_take_rows_matches_numpy(n, shape):
    rng = np.random.default_rng(n)
    table = rng.normal(size=(shape[0], n))
    idx = rng.integers(0, n, size=shape)
    ref = np.take_along_axis(table, idx.reshape(shape[0], -1), 1).reshape(shape)
    with jax.enable_x64(True):
        np.testing.assert_array_equal(np.asarray(take_rows(table, idx)), ref)  # a select: exact


@pytest.mark.parametrize("n", [1, 8, UNROLL + 1])
def test_cumsum_last_matches_numpy(n):
    x = np.random.default_rng(n).random((3, 4, n))
    with jax.enable_x64(True):
        got = np.asarray(cumsum_last(x))
    if n <= UNROLL:  # added left to right, as NumPy's accumulate does: the same roundings, exact
        np.testing.assert_array_equal(got, np.cumsum(x, -1))
    else:  # jnp.cumsum may add in a tree: two orders of n terms >= 0, each within (n - 1) u of the prefix
        np.testing.assert_allclose(got, np.cumsum(x, -1), rtol=f64_bound(n, 1.0), atol=0)


@pytest.mark.parametrize("K", [2, 8, RANK_BY_COMPARISON, RANK_BY_COMPARISON + 1])
def test_ranks_are_numpys_stable_double_argsort(K):
    """Counted (small K) or sorted (large K): the rank of each entry, ties broken by position."""
    rng = np.random.default_rng(K)
    u = rng.integers(0, 4, size=(6, 5, K)).astype(np.float32)  # many ties
    u[0] = rng.random((5, K))
    ref = np.argsort(np.argsort(u, axis=-1, kind="stable"), axis=-1, kind="stable")
    np.testing.assert_array_equal(np.asarray(ranks(u)), ref)
    np.testing.assert_array_equal(np.asarray(jax.jit(jax.vmap(ranks))(u)), ref)
