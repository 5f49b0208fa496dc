"""The CPU-shaped kernels in tabsim.sim.ops against plain NumPy, on both branches (unrolled and general)."""
import jax
import numpy as np
import pytest

from tabsim.sim.ops import (RANK_BY_COMPARISON, TOP_BY_COMPARISON, UNROLL, cumsum_last, pick_last, put_rows, ranks,
                            take_rows, top_k_indices, weighted_counts)

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


@pytest.mark.parametrize("n,k", [(1, 1), (8, 3), (40, 16), (TOP_BY_COMPARISON, TOP_BY_COMPARISON),
                                 (TOP_BY_COMPARISON + 1, 5)])
def test_top_k_indices_are_lax_top_k_ties_in_index_order(n, k):
    """Counted (n <= TOP_BY_COMPARISON) or sorted: the k largest, largest first, a tie to the lower index."""
    rng = np.random.default_rng(n * 7 + k)
    u = rng.random((6, n)).astype(np.float32)
    u[:3] = rng.integers(0, 3, size=(3, n))  # many ties
    ref = np.argsort(-u, axis=-1, kind="stable")[:, :k]
    for row, want in zip(u, ref):
        np.testing.assert_array_equal(np.asarray(top_k_indices(row, k)), want)
    got = jax.jit(jax.vmap(lambda x: top_k_indices(x, k)))(u)
    np.testing.assert_array_equal(np.asarray(got), ref)
    assert got.dtype == jax.lax.top_k(u[0], k)[1].dtype


@pytest.mark.parametrize("n", [3, UNROLL + 4])
def test_pick_last_is_the_entry_itself(n):
    """A masked sum with one term that is not a zero: the picked entry's bits, infinities and NaN included."""
    rng = np.random.default_rng(n)
    x = rng.normal(size=(5, 7, n)).astype(np.float32)
    x[0, :3, 0] = [np.inf, -np.inf, np.nan]
    idx = rng.integers(0, n, size=(5, 7))
    idx[0, :3] = 0
    ref = np.take_along_axis(x, idx[..., None], -1)[..., 0]
    got = np.asarray(jax.jit(pick_last)(x, idx))
    np.testing.assert_array_equal(got.view(np.uint32), ref.view(np.uint32))


def test_put_rows_is_a_scatter_add_into_zeros():
    """Distinct rows: each table row gets its batch row (the same bits as XLA's scatter-add), others zero;
    a NaN or an infinity in one batch row stays in its own table row."""
    rng = np.random.default_rng(0)
    for n, b in [(40, 16), (5, 5), (9, 1)]:
        idx = rng.permutation(n)[:b].astype(np.int32)
        rows = rng.normal(size=(b, 8)).astype(np.float32)
        rows[0, :2] = [np.nan, np.inf]
        ref = np.asarray(jax.numpy.zeros((n, 8), np.float32).at[idx].add(rows))
        got = np.asarray(jax.jit(put_rows, static_argnums=2)(rows, idx, n))
        np.testing.assert_array_equal(got.view(np.uint32), ref.view(np.uint32))
        assert np.isfinite(np.delete(got, idx, axis=0)).all() and (np.delete(got, idx, axis=0) == 0).all()

