"""The exact fit of a balanced two-level factorial, and Holm's step-down adjustment.

With ``k`` two-level factors, effect codes ``x_f = +1`` (first level) or ``-1``, and ``n`` seeds in
every one of the ``2^k`` cells, the model columns (every product of codes) are orthogonal with
``X'X = N I``. Ordinary least squares then needs no solve::

    beta_T = mean over cells c of  x_T(c) * ybar_c          (ybar_c: the cell mean)
    se     = sqrt(RSS / (N - 2^k) / N),   RSS = sum (y - ybar_cell)^2

and the type 2 and type 3 ANOVA sums of squares of a term are ``N beta_T^2`` on one degree of
freedom. :func:`tabsim.stats.factorial.fit_factorial` uses this for such designs and statsmodels for
every other design; tests compare the two to 1e-12.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tabsim.stats import dist


def holm(pvals) -> np.ndarray:
    """Holm's step-down adjusted p-values, in the input order.

    ``p_holm_(i) = min(1, max_{j <= i} (m - j + 1) p_(j))`` over the sorted p-values (Holm 1979); the
    same arithmetic as ``statsmodels.stats.multitest.multipletests(method="holm")``, without its
    ``gc.collect()``.

    Args:
      pvals: ``[m]`` p-values.

    Returns:
      ``[m]`` adjusted p-values.
    """
    p = np.asarray(pvals, dtype=float)
    order = np.argsort(p)
    adj = np.maximum.accumulate(p[order] * np.arange(p.size, 0, -1))
    adj[adj > 1] = 1
    out = np.empty_like(adj)
    out[order] = adj
    return out


def effect_terms(k: int) -> list[tuple[int, ...]]:
    """The terms of ``A * B * ...`` over ``k`` factors, in the formula's column order.

    Expanding the product factor by factor gives ``A, B, AB, C, AC, BC, ABC, ...``; a stable sort by
    order puts main effects first: ``A, B, C, AB, AC, BC, ABC`` (the order statsmodels' formulas use).
    """
    terms: list[tuple[int, ...]] = []
    for f in range(k):
        terms += [(f,)] + [t + (f,) for t in terms]
    return sorted(terms, key=len)


def is_balanced_two_level(cells: pd.Series, levels: dict, factors) -> bool:
    """Every factor has two levels and every one of the ``2^k`` cells holds the same number of rows."""
    return (all(len(levels[f]) == 2 for f in factors) and len(cells) == 2 ** len(factors)
            and int(cells.min()) == int(cells.max()) >= 2)


def effect_matrix(design: pd.DataFrame, factors, levels: dict) -> np.ndarray:
    """``[N, 2^k]`` model matrix: the intercept, then each term's product of ``+/-1`` codes."""
    codes = [np.where(design[f].to_numpy() == levels[f][0], 1.0, -1.0) for f in factors]
    cols = [np.ones(len(design))] + [np.prod([codes[i] for i in t], axis=0) for t in effect_terms(len(factors))]
    return np.stack(cols, axis=1)


def _code(name: str) -> str:
    return f"C({name if name.isidentifier() else f'Q({name!r})'}, Sum)"


def balanced_fit(design: pd.DataFrame, response: str, factors, levels: dict, ci: float, anova_typ: int):
    """Coefficient rows and the ANOVA table of the full factorial of a balanced two-level design.

    Args:
      design: seed-level rows; ``factors`` columns hold ``levels[f]`` values, first coded +1.
      response: response column.
      factors: factor columns, in letter order.
      levels: factor -> ``(high, low)``.
      ci: two-sided confidence level of the intervals.
      anova_typ: 2 or 3 (type 3 also lists the intercept, as statsmodels' ``anova_lm`` does).

    Returns:
      ``(columns, codes, coefficients, anova)``: the model column names, each column's factor codes
      (``["C(A, Sum)", "C(B, Sum)"]``), a frame with ``model_term``,
      ``order``, ``estimate``, ``std_err``, ``ci_low``, ``ci_high``, ``p_value`` (one row per
      column), and the ANOVA frame (``sum_sq``, ``df``, ``F``, ``PR(>F)``).
    """
    terms = [()] + effect_terms(len(factors))
    X = effect_matrix(design, factors, levels)
    y = design[response].to_numpy(dtype=float)
    cell = X[:, 1:len(factors) + 1] @ (2.0 ** np.arange(len(factors)))  # a distinct number per cell
    _, inverse, counts = np.unique(cell, return_inverse=True, return_counts=True)
    means = np.bincount(inverse, weights=y) / counts
    first = np.unique(inverse, return_index=True)[1]
    beta = X[first].T @ means / len(means)
    n, df_resid = y.size, y.size - len(means)
    rss = float(np.sum((y - means[inverse]) ** 2))
    se = np.full(beta.size, np.sqrt(rss / df_resid / n))
    t = beta / se
    q = dist.t_ppf(1.0 - (1.0 - ci) / 2.0, df_resid)
    codes = [[_code(factors[i]) for i in term] for term in terms]
    names = ["Intercept"] + [":".join(f"{_code(factors[i])}[S.{levels[factors[i]][0]}]" for i in term)
                             for term in terms[1:]]
    coefs = pd.DataFrame({"model_term": names, "order": [len(term) for term in terms], "estimate": beta,
                          "std_err": se, "ci_low": beta - q * se, "ci_high": beta + q * se,
                          "p_value": dist.t_sf(np.abs(t), df_resid) * 2})
    keep = slice(0 if anova_typ == 3 else 1, None)
    sources = ["Intercept"] + [":".join(c) for c in codes[1:]]
    ss = n * beta[keep] ** 2
    F = ss / (rss / df_resid)
    anova = pd.DataFrame({"sum_sq": np.append(ss, rss), "df": np.append(np.ones(ss.size), float(df_resid)),
                          "F": np.append(F, np.nan), "PR(>F)": np.append(dist.f_sf(F, 1, df_resid), np.nan)},
                         index=sources[keep] + ["Residual"])
    return names, codes, coefs, anova
