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
