"""Small array kernels shaped for XLA on a CPU.

XLA's CPU backend vectorises elementwise work along the minor axis well but reduces over a middle
axis of a small array poorly, and each reduction is a kernel of its own to compile. For the small
static sizes of a tabular policy (answers per prompt, answers per group) these helpers unroll the
short axis into elementwise selects instead.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

UNROLL = 16  # unroll a static axis up to this length (longer unrolls cost more to trace than they save)


def weighted_counts(idx, weights, n: int):
    """``out[r, a] = sum_j weights[r, j] [idx[r, j] == a]`` for ``idx [R, J]``, ``[R, n]``.

    ``weights=None`` counts occurrences (float32).
    """
    dtype = jnp.float32 if weights is None else weights.dtype
    if idx.shape[1] > UNROLL:
        onehot = jax.nn.one_hot(idx, n, dtype=dtype)
        return onehot.sum(1) if weights is None else (onehot * weights[..., None]).sum(1)
    values = jnp.arange(n, dtype=idx.dtype)
    out = jnp.zeros((idx.shape[0], n), dtype)
    for j in range(idx.shape[1]):  # one [R, n] select per slot
        hit = idx[:, j, None] == values
        out = out + (hit.astype(dtype) if weights is None else jnp.where(hit, weights[:, j, None], 0.0))
    return out


def take_rows(table, idx):
    """``table[r, idx[r, ...]]`` for ``table [R, n]`` and integer ``idx [R, ...]``."""
    n = table.shape[-1]
    if n > UNROLL:
        flat = idx.reshape(idx.shape[0], -1)
        return jnp.take_along_axis(table, flat, 1).reshape(idx.shape)
    col = (slice(None),) + (None,) * (idx.ndim - 1)
    out = jnp.zeros(idx.shape, table.dtype)
    for a in range(n):  # one select per value over idx's shape
        out = out + jnp.where(idx == a, table[:, a][col], 0.0)
    return out


def cumsum_last(x):
    """Inclusive prefix sum over the (short) last axis, left to right."""
    n = x.shape[-1]
    if n > UNROLL:
        return jnp.cumsum(x, axis=-1)
    parts = [x[..., 0]]
    for a in range(1, n):
        parts.append(parts[-1] + x[..., a])
    return jnp.stack(parts, -1)
