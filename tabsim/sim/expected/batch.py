"""The rest of the batch, exactly: what the other groups of a prompt's batch do to its expected update.

A prompt's update reads the other groups of its batch in two ways:

* aggregations that normalise over the (mini)batch weigh its group by ``1 / (1 + M)``, M the number
  of other kept groups in its minibatch;
* the batch-level estimators read totals over every kept group of the batch: GPG's ``alpha = n / m``
  and REINFORCE++'s whitening (mean and variance over the batch's answers).

With rewards of 0 or 1, every such total is a sum over the kept groups of a small integer statistic
of each group: its rewarded count ``m`` (GPG, REINFORCE++: ``sum r = sum r^2``) or ``m (G - m)``
(REINFORCE++-baseline: G times the group's sum of squared centred rewards). So the rest of the batch
enters only through the joint distribution of ``(M, S)``, M the other kept groups and S their summed
statistic. Each other prompt j is dropped by the filter with probability ``F0[j]`` or kept with
statistic s with probability ``F1[j, s]``; its group is independent of the others given the policy.

Without replacement the other ``b`` members are a uniform b-subset of the other ``N - 1`` prompts.
The distribution of their ``(M, S)`` is the coefficient of ``t^b`` in ``prod_{j != i} (1 + t F_j)``
divided by ``C(N - 1, b)``. Two exact ways to get it for every prompt i:

* **deconvolution** (``b <= (N - 1) / 2``): the product over all N prompts once, each coefficient
  kept as a distribution (divided by ``C(n, k)``), then prompt i divided out,
  ``q_k = p_k N / (N - k) - F_i * q_{k-1} k / (N - k)``. The factor ``k / (N - k)`` is below 1 here,
  so rounding errors shrink from one k to the next: ``O(N b^2 S)`` per step instead of ``O(N^2 b^2 S)``.
* **one prompt at a time** (larger b): for each i, the others in order, each taken with the chance
  that the subset still needs it (``(b - k) / left``).

With replacement the b other slots are independent draws of the prompts' mixture.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from tabsim.sim.algos import ESTIMATORS


def batch_level(estimator: str) -> bool:
    """Whether ``estimator`` reads totals over the whole batch, as declared at its registration
    (``register_estimator(name, batch_level=True)``)."""
    return bool(ESTIMATORS.meta(estimator).get("batch_level", False))


WHITEN_EPS = 1e-8  # the whitening's epsilon (tabsim.sim.algos.advantages._masked_whiten)


# -- the others' (M, S) ---------------------------------------------------------------------------
def add_group(f, F0, F1):
    """The distribution ``f [..., M, S]`` after one more group: dropped with probability ``F0`` (scalar),
    kept with statistic s with probability ``F1 [s]`` (M + 1, S + s). Mass beyond the last S is cut
    (the arrays are sized so that none is)."""
    out = F0 * f
    kept = jnp.pad(f[..., :-1, :], [(0, 0)] * (f.ndim - 2) + [(1, 0), (0, 0)])  # M -> M + 1
    S = f.shape[-1]
    for s in range(F1.shape[-1]):
        out = out + F1[s] * jnp.pad(kept[..., :S - s], [(0, 0)] * (f.ndim - 1) + [(s, 0)])
    return out


def _start(b: int, S: int, dtype):
    return jnp.zeros((b + 1, S), dtype).at[0, 0].set(1.0)


def _deconvolved(F0, F1, b: int, S: int):
    n = F0.shape[0]
    k = jnp.arange(b + 1, dtype=F0.dtype)[:, None, None]

    def absorb(p, j):  # p[k]: the k-subsets of the prompts so far, as a distribution
        nn = j + 1.0
        added = jax.vmap(lambda x: add_group(x, F0[j], F1[j]))(p[:-1])
        new = p * jnp.maximum(nn - k, 0.0) / nn + jnp.pad(added, [(1, 0), (0, 0), (0, 0)]) * k / nn
        return new, None

    p0 = jnp.zeros((b + 1, b + 1, S), F0.dtype).at[0, 0, 0].set(1.0)
    p, _ = jax.lax.scan(absorb, p0, jnp.arange(n))

    def remove(i):
        def body(q, kk):
            kf = kk.astype(F0.dtype)
            qk = p[kk] * n / (n - kf) - add_group(q, F0[i], F1[i]) * kf / (n - kf)
            return qk, None

        q, _ = jax.lax.scan(body, p[0], jnp.arange(1, b + 1))
        return q

    return jax.vmap(remove)(jnp.arange(n))


def _one_at_a_time(F0, F1, b: int, S: int):
    n = F0.shape[0]
    need = b - jnp.arange(b + 1, dtype=F0.dtype)

    def one(i):
        def body(carry, j):
            f, left = carry  # f[k, M, S]: k of the subset chosen so far; left: prompts still to see
            take = jnp.clip(need / jnp.maximum(left, 1.0), 0.0, 1.0)[:, None, None]
            added = jax.vmap(lambda x: add_group(x, F0[j], F1[j]))(f * take)
            new = f * (1 - take) + jnp.pad(added[:-1], [(1, 0), (0, 0), (0, 0)])
            skip = j == i
            return (jnp.where(skip, f, new), left - jnp.where(skip, 0.0, 1.0)), None

        f0 = jnp.zeros((b + 1, b + 1, S), F0.dtype).at[0, 0, 0].set(1.0)
        (f, _), _ = jax.lax.scan(body, (f0, jnp.asarray(n - 1.0, F0.dtype)), jnp.arange(n))
        return f[b]

    return jax.vmap(one)(jnp.arange(n))


def others(F0, F1, b: int, replacement: bool):
    """``P(M, S)`` ``[N, b + 1, b (s_max) + 1]`` over the other b members of each prompt's batch.

    Args:
      F0: ``[N]`` each prompt's chance that its group is dropped.
      F1: ``[N, s_max + 1]`` its chance that the group is kept with statistic s.
      b: how many other members (``batch - 1``, or ``minibatch - 1`` for the normaliser alone).
      replacement: the members are independent draws (True) or a uniform subset of the other prompts.
    """
    S = b * (F1.shape[-1] - 1) + 1
    n = F0.shape[0]
    if b == 0:
        return jnp.broadcast_to(_start(0, S, F0.dtype), (n, 1, S))
    if replacement:
        f, F0m, F1m = _start(b, S, F0.dtype), F0.mean(), F1.mean(0)
        for _ in range(b):
            f = add_group(f, F0m, F1m)
        return jnp.broadcast_to(f, (n,) + f.shape)
    if 2 * b <= n - 1:
        return _deconvolved(F0, F1, b, S)
    return _one_at_a_time(F0, F1, b, S)


def others_kept(q, mb: int, replacement: bool):
    """``P(M = m)``, ``[N, mb]``: M the number of kept groups among the other ``mb - 1`` members of a
    prompt's minibatch, given each prompt's chance ``q [N]`` that its group is kept."""
    return others(1.0 - q, q[:, None], mb - 1, replacement)[..., 0]


def work(n_prompts: int, b: int, s_max: int, replacement: bool) -> float:
    """Operations per step of :func:`others` (the check refuses configurations above a limit)."""
    cells = (b + 1) ** 2 * (b * s_max + 1) * (s_max + 2)
    if replacement:
        return float(b * cells / (b + 1))
    return float(2 * n_prompts * cells if 2 * b <= n_prompts - 1 else n_prompts ** 2 * cells)


def batch_scale(algo, schedule, q, n_prompts: int):
    """``(inclusion [], P(M) [N, mb] or None)``: the chance a prompt is in the batch, and for batch-normalised
    aggregations the distribution of the other kept groups in its minibatch (its weight is ``1 / (1 + M)``)."""
    incl = schedule.batch_size / n_prompts
    if algo.aggregation == "group-sum":  # each group's loss is summed: no batch normaliser
        return incl, None
    return incl, others_kept(q, schedule.batch_size // algo.minibatches, schedule.replacement)


# -- the batch-level estimators -------------------------------------------------------------------
def statistic(estimator: str, G: int) -> np.ndarray:
    """Each kept group's statistic by its rewarded count m, ``[G + 1]`` integers."""
    m = np.arange(G + 1)
    return m * (G - m) if estimator == "reinforce_pp_baseline" else m


def minibatch_weight(algo, schedule) -> np.ndarray:
    """``E[1 / (1 + M_mb) | M]`` ``[B]``: a kept group's aggregation weight given M other kept groups in the
    batch. The other members of its minibatch are a uniform ``(mb - 1)``-subset of the batch's other
    ``B - 1`` whatever their rewards, so ``M_mb`` is hypergeometric given M (1 for ``group-sum``)."""
    B, mb = schedule.batch_size, schedule.batch_size // algo.minibatches
    if algo.aggregation == "group-sum":
        return np.ones(B)
    w = np.zeros(B)
    for M in range(B):
        for h in range(max(0, M - (B - mb)), min(M, mb - 1) + 1):
            w[M] += math.comb(M, h) * math.comb(B - 1 - M, mb - 1 - h) / math.comb(B - 1, mb - 1) / (1 + h)
    return w


def advantage_tables(algo, schedule) -> tuple[np.ndarray, np.ndarray]:
    """``A1, A0 [G + 1, B, S]``: a rewarded / unrewarded answer's advantage, times its aggregation weight,
    in a kept group with m rewards when the batch's other kept groups number M and sum to statistic S.

    The totals are those of :mod:`tabsim.sim.algos.advantages` with 0/1 rewards over ``n = G (1 + M)`` kept
    answers and ``R = m + S`` rewards (GPG and REINFORCE++) or ``Q = (m (G - m) + S) / G`` summed squared
    centred rewards (REINFORCE++-baseline, whose batch mean is 0)."""
    est, G, B = algo.estimator, schedule.group_size, schedule.batch_size
    s_max = int(statistic(est, G).max())
    m = np.arange(G + 1, dtype=np.float64)[:, None, None]
    M = np.arange(B, dtype=np.float64)[None, :, None]
    S = np.arange((B - 1) * s_max + 1, dtype=np.float64)[None, None, :]
    n = G * (1.0 + M)
    homogeneous = (m == 0) | (m == G)
    if est == "gpg":
        alpha = n / np.maximum(m + S, 1.0)
        A1, A0 = alpha * (1 - m / G), -alpha * m / G
        A1, A0 = np.where(homogeneous, 0.0, A1), np.where(homogeneous, 0.0, A0)
    elif est == "reinforce_pp":
        R = np.minimum(m + S, n)  # more rewards than answers: a cell no batch reaches
        mean = R / n
        inv = 1.0 / np.sqrt((R - R * mean) / np.maximum(n - 1.0, 1.0) + WHITEN_EPS)
        A1, A0 = (1 - mean) * inv, -mean * inv
    elif est == "reinforce_pp_baseline":
        inv = 1.0 / np.sqrt((m * (G - m) + S) / G / np.maximum(n - 1.0, 1.0) + WHITEN_EPS)
        A1, A0 = np.where(homogeneous, 0.0, (1 - m / G) * inv), np.where(homogeneous, 0.0, -m / G * inv)
    else:
        raise ValueError(f"algo.estimator = {est!r} has no exact batch-level tables; they exist for "
                         f"{', '.join(n for n in ESTIMATORS if batch_level(n) and ESTIMATORS.is_own(n))}")
    w = minibatch_weight(algo, schedule)[None, :, None]
    shape = (G + 1, B, S.shape[-1])
    return np.broadcast_to(A1 * w, shape).astype(np.float64), np.broadcast_to(A0 * w, shape).astype(np.float64)


def expected_advantages(tables, kept_by_m, replacement: bool):
    """``H1, H0 [N, G + 1]``: the expected weighted advantage of a rewarded / unrewarded answer of each
    prompt's kept group with m rewards, over the rest of its batch.

    Args:
      tables: ``(A1, A0, stat)`` from :func:`advantage_tables` and :func:`statistic`.
      kept_by_m: ``[N, G + 1]`` each prompt's chance that its group is kept with m rewards.
    """
    A1, A0 = (jnp.asarray(t, kept_by_m.dtype) for t in tables[:2])  # float64 tables, in the program's type
    stat = tables[2]
    s_max = int(stat.max())
    onehot = jnp.asarray(np.eye(s_max + 1, dtype=np.float32)[stat], kept_by_m.dtype)  # [G + 1, s_max + 1]
    F1 = kept_by_m @ onehot
    F0 = 1.0 - kept_by_m.sum(-1)
    D = others(F0, F1, A1.shape[1] - 1, replacement)  # [N, B, S]
    return jnp.einsum("nMs,mMs->nm", D, A1), jnp.einsum("nMs,mMs->nm", D, A0)
