"""Bootstrap index draws.

``rng.integers(0, n, size)`` draws a range below ``2**32`` from 32-bit words whatever the integer type it
returns, so ``int32`` indices are the very values of the default ``int64`` ones at half the memory: a
study's resamples (thousands of seeds, thousands of resamples) are hundreds of megabytes of indices, and
their page faults and memory traffic, not the generator, were most of their time.
``tests/stats/test_draws.py`` checks the values against the ``int64`` draws.
"""
from __future__ import annotations

import numpy as np

INT32_BELOW = 2**31  # ranges below this fit int32 (and are drawn from 32-bit words either way)


def resample_indices(rng: np.random.Generator, n: int, size) -> np.ndarray:
    """``rng.integers(0, n, size=size)``: the same values, ``int32`` where ``n`` allows, and the generator
    left in the same state."""
    return rng.integers(0, n, size=size, dtype=np.int32 if n < INT32_BELOW else np.int64)


GATHER_ROWS = 64  # resamples gathered at once by resampled_sums: a block that stays in the caches


def resampled_sums(values: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``values[idx].sum(axis=1)`` for 1-D ``values`` and 2-D ``idx``, the same bits, gathered
    :data:`GATHER_ROWS` resamples at a time into one reused buffer instead of one ``idx``-sized array of
    fresh memory (each row is summed exactly as in the whole array: numpy sums a row on its own)."""
    values = np.asarray(values)
    if not _in_blocks(values, idx):
        return values[idx].sum(axis=1)
    n_rows, width = idx.shape
    out = np.empty(n_rows, dtype=values.dtype)
    buf = np.empty((min(GATHER_ROWS, n_rows), width), dtype=values.dtype)
    for r0 in range(0, n_rows, GATHER_ROWS):
        m = min(GATHER_ROWS, n_rows - r0)
        np.take(values, idx[r0:r0 + m], out=buf[:m])
        np.sum(buf[:m], axis=1, out=out[r0:r0 + m])
    return out


def resampled_means(values: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``values[idx].mean(axis=1)``, the same bits, by :func:`resampled_sums` (float64 values: numpy's mean is
    the sum divided by the count)."""
    values = np.asarray(values)
    if not _in_blocks(values, idx):
        return values[idx].mean(axis=1)
    return resampled_sums(values, idx) / idx.shape[1]


def _in_blocks(values: np.ndarray, idx: np.ndarray) -> bool:
    """Whether the block-wise gather applies: float64 values (other types are summed, and averaged, in other
    types by numpy) and a 2-D index."""
    return values.dtype == np.float64 and idx.ndim == 2
