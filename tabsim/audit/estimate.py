"""The partition of a published table with intervals from the binomial uncertainty of its item counts.

Each arm's accuracy is a proportion over its benchmark's items. Without per-item results the item is
the sampling unit (``unit="items"``: variance ``p(1 - p) / n_items``, an upper bound for an avg@k
score whose k samples of an item are correlated); ``unit="trials"`` counts ``n_items x k``
independent samples instead, the optimistic case (a lower bound). With per-item results the
clustered variance ``s^2(y) / n`` and the paired covariance of arms scored on the same items are
used (:mod:`tabsim.audit.items`). The variance uses the plus-one
proportion ``(x + 1) / (n + 2)`` so that 0 % and 100 % scores keep a positive variance. Per-seed
values add their seed variance ``s^2 / S``; single runs of trained arms add an assumed seed variance
``seed_sd^2`` (0 by default). Differences get Wald intervals; ratios get Fieller intervals, which are
unbounded when the denominator is not distinguishable from 0. Everything is vectorised over a
leading axis of *completions* (candidate values for missing arms), so bounds are the union of the
intervals over the completions a table admits.
"""
from __future__ import annotations

import functools
import math

import numpy as np
from scipy import stats as sps

from tabsim.audit.entry import PARTITION_ARMS, Entry
from tabsim.audit.items import clustered_moments
from tabsim.stats.partition_terms import CONTRASTS, HELP, RATIOS, SHARES  # noqa: F401 (SHARES read from here)

# the partition's vocabulary (tabsim.stats.partition_terms); the arm axis is frozen, random, majority, true
_C = CONTRASTS
DIFFERENCE_TERMS = tuple(_C)
RATIO_TERMS = RATIOS
# the contrasts as one array [4, terms], and each ratio's numerator and denominator columns, built once
# (term_intervals runs for every row of every pass)
_C_MATRIX = np.asarray([_C[t] for t in DIFFERENCE_TERMS], dtype=float).T
_RATIO_A = [DIFFERENCE_TERMS.index(a) for a, _ in RATIO_TERMS.values()]
_RATIO_B = [DIFFERENCE_TERMS.index(b) for _, b in RATIO_TERMS.values()]
UNITS = ("items", "trials")
TERMS = DIFFERENCE_TERMS + tuple(RATIO_TERMS)
TERM_HELP = HELP


def _arms_of(coef) -> set:
    return {PARTITION_ARMS[i] for i, c in enumerate(coef) if c}


TERM_ARMS = {t: _arms_of(c) for t, c in _C.items()}
TERM_ARMS.update({t: TERM_ARMS[a] | TERM_ARMS[b] for t, (a, b) in RATIO_TERMS.items()})


def identified_terms(present) -> tuple:
    """Terms whose arms are all in ``present``."""
    present = set(present)
    return tuple(t for t in TERMS if TERM_ARMS[t] <= present)


def binomial_var(acc, n_eff):
    """Variance in points^2 of an accuracy ``acc`` (percent) over ``n_eff`` trials, plus-one proportion.

    ``var = 100^2 p~ (1 - p~) / n``, ``p~ = (p n + 1) / (n + 2)``.
    """
    p = np.asarray(acc, dtype=float) / 100.0
    pt = (p * n_eff + 1.0) / (n_eff + 2.0)
    return 1e4 * pt * (1.0 - pt) / n_eff


def arm_moments(entry: Entry, *, seed_sd: float = 0.0, unit: str = "items") -> tuple[dict, dict, dict]:
    """Mean, variance and variance source of each reported partition arm of ``entry``.

    ``var = binomial(mean, n) + s^2 / S`` for per-seed values (``s`` the sample sd over ``S``
    seeds; the seeds share the benchmark items, so the binomial part is not divided by ``S``),
    ``+ seed_sd^2`` for a single run of a trained arm, nothing more for the base. ``n`` is the item
    count (``unit="items"``) or ``n_items x k`` for avg@k (``unit="trials"``); an arm with per-item
    results gets its clustered variance instead of the binomial one, whatever the unit.

    Returns:
      ``(mean, var, note)``: dicts arm -> percent, points^2, and a short description.
    """
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")
    n = entry.n_items if unit == "items" else entry.n_eff
    _, cl_cov = clustered_moments(entry.per_item) if entry.per_item else ({}, {})
    mean, var, note = {}, {}, {}
    for arm in PARTITION_ARMS:
        if arm not in entry.arms:
            continue
        av = entry.arms[arm]
        if (arm, arm) in cl_cov:
            # never below the independent-samples variance (the clustered one is at least that in expectation)
            v = max(cl_cov[(arm, arm)], float(binomial_var(av.mean, entry.n_eff)))
            note[arm] = f"clustered over {entry.n_items} items (per-item results)"
        else:
            v = float(binomial_var(av.mean, n))
            note[arm] = ("binomial over items" if entry.protocol != "avg" or unit == "items"
                         else f"binomial over {n} samples taken as independent")
        if av.seeds:
            s = float(np.std(av.seeds, ddof=1))
            v += s * s / len(av.seeds)
            note[arm] += f" + seed spread (sd {s:.2f} over {len(av.seeds)} seeds)"
        elif arm != "frozen" and seed_sd > 0:
            v += seed_sd * seed_sd
            note[arm] += f" + assumed seed sd {seed_sd:g}"
        mean[arm], var[arm] = float(av.mean), v
    return mean, var, note


def paired_cov(entry: Entry) -> np.ndarray:
    """``[4, 4]`` covariances between reported arms scored on the same items (per-item results), 0 elsewhere.

    The diagonal is 0: the variances come from :func:`arm_moments`.
    """
    out = np.zeros((4, 4))
    if not entry.per_item:
        return out
    _, cov = clustered_moments(entry.per_item)
    for i, a in enumerate(PARTITION_ARMS):
        for j, b in enumerate(PARTITION_ARMS):
            if i != j and (a, b) in cov:
                out[i, j] = cov[(a, b)]
    return out


@functools.lru_cache(maxsize=64)
def z_value(ci: float) -> float:
    """The normal quantile of a two-sided level ``ci`` (1.96 at 0.95)."""
    # one scipy quantile per level, not per call: an audit asks for it for every row and pass
    return float(sps.norm.ppf(0.5 + ci / 2.0))


def fieller(a, b, vaa, vbb, vab, z):
    """Fieller interval for ``a / b`` of jointly normal estimates, vectorised.

    The set ``{rho : (a - rho b)^2 <= z^2 (Vaa - 2 rho Vab + rho^2 Vbb)}``; bounded iff
    ``b^2 > z^2 Vbb`` (the denominator is distinguishable from 0), else ``(-inf, inf)`` (the
    complement-of-an-interval case is widened to the whole line).

    Args:
      a, b: numerator and denominator estimates ``[C]``.
      vaa, vbb, vab: their variances and covariance ``[C]``.
      z: normal quantile of the two-sided level.

    Returns:
      ``(point, low, high)`` arrays ``[C]``; ``point`` is NaN where ``b == 0``.
    """
    a, b, vaa, vbb, vab = (np.asarray(x, dtype=float) for x in (a, b, vaa, vbb, vab))
    z2 = z * z
    qa = b * b - z2 * vbb
    qb = a * b - z2 * vab
    qc = a * a - z2 * vaa
    disc = np.maximum(qb * qb - qa * qc, 0.0)
    bounded = qa > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        root = np.sqrt(disc)
        lo = np.where(bounded, (qb - root) / qa, -np.inf)
        hi = np.where(bounded, (qb + root) / qa, np.inf)
        point = np.where(b != 0, a / b, np.nan)
    return point, lo, hi


def term_intervals(means, variances, *, ci: float = 0.95, cov=None) -> dict:
    """Point and interval of every term for each completion.

    Args:
      means: arm accuracies ``[C, 4]`` (frozen, random, majority, true), percent.
      variances: their variances ``[C, 4]``.
      ci: two-sided level.
      cov: optional ``[4, 4]`` covariances between arms (zero diagonal), the same for every completion;
        None: independent arms.

    Returns:
      dict term -> ``(point [C], low [C], high [C])``.
    """
    m = np.atleast_2d(np.asarray(means, dtype=float))
    v = np.atleast_2d(np.asarray(variances, dtype=float))
    z = z_value(float(ci))
    c, ca, cb = _C_MATRIX, _C_MATRIX[:, _RATIO_A], _C_MATRIX[:, _RATIO_B]
    # every term at once: estimates m c, variances v c^2 (+ c' cov c), one column per term
    est = m @ c
    var, var_a, var_b, var_ab = v @ (c * c), v @ (ca * ca), v @ (cb * cb), v @ (ca * cb)
    if cov is not None:
        off = np.asarray(cov, dtype=float)
        var = var + ((c.T @ off) * c.T).sum(axis=1)
        var_a = var_a + ((ca.T @ off) * ca.T).sum(axis=1)
        var_b = var_b + ((cb.T @ off) * cb.T).sum(axis=1)
        var_ab = var_ab + ((ca.T @ off) * cb.T).sum(axis=1)
    half = z * np.sqrt(np.maximum(var, 0.0))
    lo, hi = est - half, est + half
    out = {t: (est[:, k], lo[:, k], hi[:, k]) for k, t in enumerate(DIFFERENCE_TERMS)}
    point, r_lo, r_hi = fieller(est[:, _RATIO_A], est[:, _RATIO_B], var_a, var_b, var_ab, z)
    out.update({t: (point[:, k], r_lo[:, k], r_hi[:, k]) for k, t in enumerate(RATIO_TERMS)})
    return out


def term_unions(iv: dict) -> dict:
    """Per term of ``iv`` (term -> ``(estimates, lows, highs)`` over completions): ``(lowest low, highest high,
    lowest finite estimate, highest finite estimate)``, NaN where there is none; every term at once."""
    est, lo, hi = (np.stack([np.asarray(iv[t][k], dtype=float) for t in TERMS]) for k in range(3))
    if est.shape[1] == 0:
        return {t: (math.nan,) * 4 for t in TERMS}
    finite = np.isfinite(est)
    any_finite = finite.any(axis=1)
    s_lo = np.where(any_finite, np.where(finite, est, np.inf).min(axis=1), np.nan)
    s_hi = np.where(any_finite, np.where(finite, est, -np.inf).max(axis=1), np.nan)
    rows = zip(lo.min(axis=1).tolist(), hi.max(axis=1).tolist(), s_lo.tolist(), s_hi.tolist())
    return dict(zip(TERMS, rows))
