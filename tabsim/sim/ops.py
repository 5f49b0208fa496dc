"""Small array kernels shaped for XLA on a CPU.

XLA's CPU backend vectorises elementwise work along the minor axis well but reduces over a middle
axis of a small array poorly, and each reduction is a kernel of its own to compile. For the small
static sizes of a tabular policy (answers per prompt, answers per group) these helpers unroll the
short axis into elementwise selects instead.
"""
from __future__ import annotations

import functools

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


def _cols(x):
    """The columns of ``x [..., n]`` along its minor axis, each ``[...]``."""
    return [lax.index_in_dim(x, a, x.ndim - 1, keepdims=False) for a in range(x.shape[-1])]


def _bcast_last(v, shape):
    """``v [...]`` broadcast along a new minor axis to ``shape [..., n]``."""
    return lax.broadcast_in_dim(v, shape, tuple(range(len(shape) - 1)))


def _max_last(x):
    cols = _cols(x)
    out = cols[0]
    for c in cols[1:]:
        out = lax.max(out, c)
    return out


def softmax_last(x):
    """``jax.nn.softmax(x, -1)`` with the short minor axis unrolled: adds and maxes of its columns
    instead of minor-axis reductions (the same formula, ``exp(x - max) / sum``; the sum's order may
    differ in the last bit)."""
    if x.shape[-1] > UNROLL:
        return jax.nn.softmax(x, axis=-1)
    e = jnp.exp(x - _bcast_last(lax.stop_gradient(_max_last(x)), x.shape))
    return e / _bcast_last(_sum(_cols(e)), x.shape)


@jax.custom_vjp
def log_softmax_last(x):
    """``jax.nn.log_softmax(x, -1)`` with the short minor axis unrolled (``x - max - log sum exp``),
    and its gradient ``g - softmax sum(g)`` written out with the same unrolled sums."""
    if x.shape[-1] > UNROLL:
        return jax.nn.log_softmax(x, axis=-1)
    shifted = x - _bcast_last(lax.stop_gradient(_max_last(x)), x.shape)
    return shifted - _bcast_last(jnp.log(_sum(_cols(jnp.exp(shifted)))), x.shape)


def _log_softmax_fwd(x):
    out = log_softmax_last(x)
    return out, out


def _log_softmax_bwd(out, g):
    if g.shape[-1] > UNROLL:
        return (g - jnp.exp(out) * g.sum(-1, keepdims=True),)
    return (g - jnp.exp(out) * _bcast_last(_sum(_cols(g)), g.shape),)


log_softmax_last.defvjp(_log_softmax_fwd, _log_softmax_bwd)


def take_last(x, idx):
    """``x[..., idx]`` for ``x [..., n]`` and integer ``idx [...]``: one select per value (no one-hot
    product and minor-axis reduction); its gradient is one compare/select, ``g [idx == a]``."""
    return _take_last(x, idx, x.shape[-1])


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _take_last(x, idx, n):
    zeros = lax.full(idx.shape, 0, x.dtype)
    return _sum([lax.select(lax.eq(idx, lax.full(idx.shape, a, idx.dtype)), c, zeros)
                 for a, c in enumerate(_cols(x))])


def _take_last_fwd(x, idx, n):
    return _take_last(x, idx, n), idx


def _take_last_bwd(n, idx, g):
    shape = idx.shape + (n,)
    hit = lax.eq(_bcast_last(idx, shape), lax.broadcasted_iota(idx.dtype, shape, len(shape) - 1))
    return lax.select(hit, _bcast_last(g, shape), lax.full(shape, 0, g.dtype)), None


_take_last.defvjp(_take_last_fwd, _take_last_bwd)


def log_softmax_transpose(g, logq):
    """The gradient with respect to the logits of ``logq = log_softmax(z)`` from ``g = dL/dlogq``:
    ``g - softmax sum_a g_a``, with the short minor axis unrolled."""
    total = g.sum(-1, keepdims=True) if g.shape[-1] > UNROLL else _bcast_last(_sum(_cols(g)), g.shape)
    return g - jnp.exp(logq) * total


def onehot_minus_softmax(c, idx, logq):
    """``c (onehot(idx) - softmax)`` over the minor axis of ``logq [..., n]`` for ``c``, ``idx [...]``:
    the logit gradient of a loss ``sum c logq[idx]``, as one compare/select."""
    shape = logq.shape
    hit = lax.eq(_bcast_last(idx, shape), lax.broadcasted_iota(idx.dtype, shape, len(shape) - 1))
    cb = _bcast_last(c, shape)
    return lax.select(hit, cb, lax.full(shape, 0, c.dtype)) - jnp.exp(logq) * cb


RANK_BY_COMPARISON = 32  # answers per prompt up to which ranks are counted, not sorted


def ranks(u):
    """Each entry's rank in its row of ``u [..., K]``: ``argsort(argsort(u))`` with ties in index order.

    ``rank_i = #{j: u_j < u_i} + #{j < i: u_j = u_i}``, counted with ``K^2`` comparisons a row for
    ``K <= RANK_BY_COMPARISON`` (a hundred times faster than two sorts on a CPU, the same integers).
    """
    K = u.shape[-1]
    if K > RANK_BY_COMPARISON:
        return jnp.argsort(jnp.argsort(u, axis=-1), axis=-1)
    i = jnp.arange(K)
    before = (u[..., None, :] < u[..., :, None]) | ((u[..., None, :] == u[..., :, None]) & (i < i[:, None]))
    return before.sum(-1, dtype=jnp.int32)
