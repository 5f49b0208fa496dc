"""Small array kernels shaped for XLA on a CPU.

XLA's CPU backend vectorises elementwise work along the minor axis well but reduces over a middle
axis of a small array poorly, and each reduction is a kernel of its own to compile. For the small
static sizes of a tabular policy (answers per prompt, answers per group) these helpers unroll the
short axis into elementwise selects instead.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

UNROLL = 16  # unroll a static axis up to this length (longer unrolls cost more to trace than they save)


def _col(x, j: int, shape):
    """Column ``j`` of ``x [R, n]`` broadcast to ``shape`` (``R`` leading)."""
    return lax.broadcast_in_dim(lax.index_in_dim(x, j, 1, keepdims=False), shape, (0,))


def _sum(terms):
    out = terms[0]
    for t in terms[1:]:
        out = lax.add(out, t)
    return out


# The unrolled kernels below use lax primitives, not jnp operators: they run inside every traced
# step and jnp's wrappers cost several times more to trace.

def weighted_counts(idx, weights, n: int):
    """``out[r, a] = sum_j weights[r, j] [idx[r, j] == a]`` for ``idx [R, J]``, ``[R, n]``.

    ``weights=None`` counts occurrences (float32).
    """
    dtype = jnp.float32 if weights is None else weights.dtype
    if idx.shape[1] > UNROLL:
        onehot = jax.nn.one_hot(idx, n, dtype=dtype)
        return onehot.sum(1) if weights is None else (onehot * weights[..., None]).sum(1)
    R, J = idx.shape
    shape = (R, n, J)  # the slot axis last: one compare/select kernel and one reduction over the minor axis
    hit = lax.eq(lax.broadcast_in_dim(idx, shape, (0, 2)), lax.broadcasted_iota(idx.dtype, shape, 1))
    if weights is None:
        vals = lax.convert_element_type(hit, dtype)
    else:
        vals = lax.select(hit, lax.broadcast_in_dim(weights, shape, (0, 2)), lax.full(shape, 0, dtype))
    return vals.sum(-1)


def take_rows(table, idx):
    """``table[r, idx[r, ...]]`` for ``table [R, n]`` and integer ``idx [R, ...]``."""
    n = table.shape[-1]
    if n > UNROLL:
        flat = idx.reshape(idx.shape[0], -1)
        return jnp.take_along_axis(table, flat, 1).reshape(idx.shape)
    zeros = lax.full(idx.shape, 0, table.dtype)
    return _sum([lax.select(lax.eq(idx, lax.full(idx.shape, a, idx.dtype)), _col(table, a, idx.shape), zeros)
                 for a in range(n)])  # one select per value over idx's shape


def cumsum_last(x):
    """Inclusive prefix sum over the (short) last axis, left to right."""
    n = x.shape[-1]
    if n > UNROLL:
        return jnp.cumsum(x, axis=-1)
    parts = [lax.index_in_dim(x, 0, x.ndim - 1)]
    for a in range(1, n):
        parts.append(lax.add(parts[-1], lax.index_in_dim(x, a, x.ndim - 1)))
    return lax.concatenate(parts, x.ndim - 1)
