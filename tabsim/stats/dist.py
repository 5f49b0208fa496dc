"""The few distribution functions the statistics use: Student t and normal quantiles, Student t and F
upper tails.

Each is the special function ``scipy.stats`` itself evaluates (``stdtrit``, ``ndtri``, ``stdtr``,
``fdtrc`` of :mod:`scipy.special`) with the same answers at the edges of its domain (a probability of 0
or 1, an infinite or NaN argument, degrees of freedom that are not positive), so the values are those
of ``scipy.stats.t.ppf``, ``norm.ppf``, ``t.sf`` and ``f.sf`` to the bit (``tests/stats/test_dist.py``).
:mod:`scipy.special` loads in about a quarter of the time of :mod:`scipy.stats`, which a study's
statistics then never import (its bootstrap is :func:`tabsim.stats.intervals.paired_bootstrap`'s own;
only BCa intervals and the IQM aggregate still use ``scipy.stats``).
"""
from __future__ import annotations

import functools

import numpy as np
from scipy import special


def _result(out: np.ndarray):
    """A scalar for scalar arguments (as ``scipy.stats`` returns), else the array."""
    return out[()] if out.ndim == 0 else out


def _positive(params: list) -> np.ndarray:
    """Where every parameter is positive (NaN is not), broadcast together."""
    return functools.reduce(np.logical_and, [p > 0 for p in params], np.True_)


def _quantile(fn, q, *params, low: float = -np.inf, high: float = np.inf):
    """``fn(*params, q)`` at ``0 < q < 1``, ``low`` / ``high`` at ``q = 0`` / ``1``, NaN elsewhere and where a
    parameter is not positive."""
    q = np.asarray(q, dtype=float)
    params = [np.asarray(p, dtype=float) for p in params]
    ok = _positive(params)
    q, ok, *params = np.broadcast_arrays(q, ok, *params)
    out = np.full(q.shape, np.nan)
    inside = ok & (q > 0) & (q < 1)
    if inside.any():
        out[inside] = fn(*(p[inside] for p in params), q[inside]) + 0.0  # + 0.0: no negative zero
    out[ok & (q == 0)] = low
    out[ok & (q == 1)] = high
    return _result(out)


def _upper_tail(fn, x, *params, low: float = -np.inf):
    """``fn(*params, x)`` inside the support ``(low, inf)``, 1 at or below ``low``, 0 at ``inf``, NaN for a
    NaN ``x`` or a parameter that is not positive."""
    x = np.asarray(x, dtype=float)
    params = [np.asarray(p, dtype=float) for p in params]
    ok = _positive(params)
    x, ok, *params = np.broadcast_arrays(x, ok, *params)
    out = np.zeros(x.shape)
    inside = ok & (x > low) & (x < np.inf)
    if inside.any():
        out[inside] = fn(*(p[inside] for p in params), x[inside])
    out[ok & (x <= low)] = 1.0
    out[~ok | np.isnan(x)] = np.nan
    return _result(out)


def t_ppf(q, df):
    """Student t quantile: ``scipy.stats.t.ppf(q, df)``."""
    return _quantile(special.stdtrit, q, df)


def norm_ppf(q):
    """Standard normal quantile: ``scipy.stats.norm.ppf(q)``."""
    return _quantile(special.ndtri, q)


def t_sf(x, df):
    """Student t upper tail ``P(T > x)``: ``scipy.stats.t.sf(x, df)``."""
    return _upper_tail(lambda df_, x_: special.stdtr(df_, -x_), x, df)


def f_sf(x, dfn, dfd):
    """F upper tail ``P(F > x)``: ``scipy.stats.f.sf(x, dfn, dfd)``."""
    return _upper_tail(special.fdtrc, x, dfn, dfd, low=0.0)
