"""Tolerances of the core tests from float32 error analysis, the same on every backend.

A float32 program compared with a float64 (or exact) reference misses it by its own rounding only.
Each rounded operation errs by at most ``u = eps32 / 2`` relatively (``eps32 = 2^-23 = 1.19e-7``), so:

* a sum of ``n`` terms, added in any order (a CPU's loop, a GPU's reduction tree, XLA's fusions), errs by
  at most ``(n - 1) * u * sum|terms|`` (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed.,
  section 4.2): reordering a reduction never leaves this bound;
* a product, quotient or chain of ``n`` elementary operations errs by at most about ``n * u`` relatively;
* a function of a rounded input ``x`` (a float64 value cast to float32: ``u * |x|``) moves by that error
  times its derivative.

``f32_bound(n_ops, scale) = n_ops * eps32 * scale`` is that bound with ``u`` doubled: the factor of two
covers the rounding of each term before it is added (its own product, ``exp`` or ``log``, which a GPU
computes within an ulp or two). Each test says where its ``n_ops`` (the length of the reduction or of the
chain: answers, group size, batch, outcomes, steps compounded) and its ``scale`` (the size of the values or
of the terms summed) come from. The bound is far below any real error the tests look for: an off-by-one
in a count or a weight moves a result by a sizeable fraction of itself, a perturbation of 1e-4 by 1e-4.
"""
from __future__ import annotations

import numpy as np

EPS32 = float(np.finfo(np.float32).eps)  # 2^-23: the spacing of float32 numbers between 1 and 2
EPS64 = float(np.finfo(np.float64).eps)  # 2^-52


def f32_bound(n_ops: float, scale) -> float:
    """``n_ops * eps32 * max|scale|``: the float32 error of a result reached through ``n_ops`` rounded
    operations (or a sum of ``n_ops`` terms) on values of size ``scale``."""
    return float(n_ops) * EPS32 * float(np.max(np.abs(scale)))


def f64_bound(n_ops: float, scale) -> float:
    """The same bound in float64 (``n_ops * eps64 * max|scale|``), for the programs run in double precision."""
    return float(n_ops) * EPS64 * float(np.max(np.abs(scale)))


def update_bound(n_steps: int, table, n_ops: float, step, lipschitz: float = 0.0) -> float:
    """``max|a - b|`` of two float32 programs that apply the same ``n_steps`` optimizer steps to one table,
    each summing its terms in its own order. Each step adds, per program, the rounding of the table entry
    (``u |table|``, with ``table`` its size: ``max|z|`` plus the distance moved) and its own error
    ``f32_bound(n_ops, step)`` (``step``: the sum of the terms' sizes in one entry); an error already in the
    table changes each later step by at most ``lipschitz`` times itself (the step's Lipschitz constant)."""
    err = 0.0
    for _ in range(n_steps):
        err = err * (1.0 + lipschitz) + f32_bound(1, table) + 2.0 * f32_bound(n_ops, step)
    return err
