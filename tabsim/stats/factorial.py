"""Two-level (and general) factorial analysis on seed-level rows, in the style of dexpy.

The design is a DataFrame, the model one formula string with ``C(factor, Sum)`` effect coding
fitted by statsmodels OLS. For a factor with levels ``(high, low)`` the coding is ``high = +1``,
``low = -1``; an interaction column is the product of its factors' codes. In a balanced two-level
design every coefficient is half the high-minus-low contrast of its column::

    beta_T = (mean(y | x_T = +1) - mean(y | x_T = -1)) / 2

so the "effect" of DOE textbooks is ``2 beta_T``. The reference study (docs/science.md, the reference simulator) reports
coefficients, e.g. its AxC coefficient -0.089, with A = reward (TRUE +1 vs MAJORITY -1),
B = filter (on/off), C = prior (0.80 vs 0.35).
"""
from __future__ import annotations

import dataclasses
import functools
import string
from typing import Mapping, Optional, Sequence

import numpy as np
import pandas as pd

from tabsim.stats import checks as v
from tabsim.stats.draws import resample_indices, resampled_sums
from tabsim.stats.effects import balanced_fit, effect_matrix, holm, is_balanced_two_level
from tabsim.stats.terms import native, quote, readable_term

ADDITIVITY_DECISIONS = ("additive", "non-additive", "inconclusive")


@dataclasses.dataclass(frozen=True)
class FactorialResult:
    """A fitted factorial model.

    Attributes:
      model: the statsmodels OLS results (a balanced two-level design is fitted in closed form,
        :mod:`tabsim.stats.effects`; statsmodels fits it when ``model`` is first read).
      formula: the formula string that was fitted.
      anova: ANOVA table (``statsmodels.stats.anova.anova_lm``) as a DataFrame.
      coefficients: one row per model column: ``term`` (readable: ``"A"``, ``"AB"``, ``"ABC"`` for
        two-level factors; ``"A[level]"`` pieces for factors with more levels), ``model_term`` (the
        statsmodels name), ``order`` (0 intercept, 1 main effect, >= 2 interaction), ``estimate``,
        ``std_err``, ``ci_low``, ``ci_high``, ``p_value``, ``p_holm`` (Holm over the effect rows,
        NaN for the intercept).
      design: the seed-level rows that were fitted, factors as ordered categoricals.
      response: response column.
      factors: factor columns, in letter order.
      letters: factor column -> letter (A, B, C, ...).
      levels: factor column -> its levels, first coded +1 (``(high, low)`` for two levels).
      ci_level: confidence level of the coefficient intervals.
    """

    formula: str
    anova: pd.DataFrame
    coefficients: pd.DataFrame
    design: pd.DataFrame
    response: str
    factors: tuple
    letters: dict
    levels: dict
    ci_level: float
    fitted: object = dataclasses.field(default=None, repr=False, compare=False)

    @functools.cached_property
    def model(self):
        """The statsmodels OLS results of ``formula`` on ``design``."""
        return self.fitted if self.fitted is not None else _ols(self.formula, self.design)

    @property
    def closed_form(self) -> bool:
        """Whether the coefficients come from the balanced two-level closed form."""
        return self.fitted is None


def fit_factorial(
    df: pd.DataFrame,
    *,
    response: str = "pass1",
    factors: Sequence[str],
    formula: Optional[str] = None,
    levels: Optional[Mapping[str, Sequence]] = None,
    step="final",
    anova_typ: int = 3,
    ci: float = 0.95,
) -> FactorialResult:
    """Fit a factorial model by OLS on seed-level rows with sum-to-zero (effect) coding.

    Default model ``response ~ C(A, Sum) * C(B, Sum) * ...`` (all main effects and interactions);
    with two levels ``(high, low)`` per factor each coefficient is
    ``(mean(y | x_T = +1) - mean(y | x_T = -1)) / 2`` in a balanced design.

    Args:
      df: tidy rows, one per seed x cell (engine output works: e.g. ``arm`` as a factor with
        ``levels={"arm": ("true", "majority")}`` keeps only those two arms).
      response: response column (default ``"pass1"``).
      factors: factor columns; letters A, B, C, ... follow this order.
      formula: a patsy formula over ``design`` columns; default the full factorial above.
      levels: ``{factor: (high, low)}`` (or all levels, first coded +1); rows at other levels are
        dropped. Factors not listed use their sorted levels, so the first sorted level is +1.
      step: ``"final"`` (largest step of each cell), an int, or None; ignored without a ``step``
        column.
      anova_typ: ANOVA sums of squares type, 2 or 3 (equal in balanced designs).
      ci: two-sided confidence level of the coefficient intervals.

    Returns:
      :class:`FactorialResult`.
    """
    factors, level, levels = _check_arguments(df, response, factors, formula, levels, anova_typ, ci)
    rows, order = _select_levels(df, factors, levels, step, response)
    cells = _check_cells(rows, factors, order, formula)
    design = _design_frame(rows, factors, order, response, formula)
    default = formula is None
    if default:
        formula = f"{quote(response)} ~ " + " * ".join(f"C({quote(f)}, Sum)" for f in factors)

    letters = {f: string.ascii_uppercase[i] for i, f in enumerate(factors)}
    n_levels = {f: len(order[f]) for f in factors}
    if default and is_balanced_two_level(cells, order, factors):
        model = None
        columns, codes, coefs, anova = balanced_fit(design, response, factors, order, level, anova_typ)
    else:
        model = _ols(formula, design)
        anova, columns, codes, coefs = _statsmodels_rows(model, anova_typ, level)
    coefs.insert(0, "term", [readable_term(c, cs, letters, n_levels) for c, cs in zip(columns, codes)])
    coefs["p_holm"] = np.nan
    effects = coefs["order"] > 0
    pvals = coefs.loc[effects, "p_value"].to_numpy()
    if effects.any() and np.isfinite(pvals).all():
        coefs.loc[effects, "p_holm"] = holm(pvals)
    return FactorialResult(
        formula=formula, anova=anova, coefficients=coefs, design=design, response=response,
        factors=factors, letters=letters, levels=order, ci_level=level, fitted=model,
    )


def _check_arguments(df, response, factors, formula, levels, anova_typ, ci) -> tuple[tuple, float, dict]:
    """``(factors, level, levels)`` once the frame, the factors, the response, the formula and the levels
    are checked."""
    v.check_frame(df)
    factors = v.as_tuple(factors, "factors")
    if not factors:
        raise ValueError("factors must name at least one factor column")
    if len(set(factors)) != len(factors):
        raise ValueError(f"factors must be distinct, got {list(factors)}")
    if len(factors) > len(string.ascii_uppercase):
        raise ValueError(f"at most {len(string.ascii_uppercase)} factors are supported, got {len(factors)}")
    if response in factors:
        raise ValueError(f"response {response!r} cannot also be a factor")
    v.check_columns(df, (response, *factors), role="response and factors")
    if anova_typ not in (2, 3):
        raise ValueError(f"anova_typ must be 2 or 3, got {anova_typ!r}")
    level = v.check_level(ci)
    if formula is not None and (not isinstance(formula, str) or "~" not in formula):
        raise ValueError(f"formula must be a patsy formula string 'response ~ terms', got {formula!r}")
    levels = dict(levels or {})
    unknown = [k for k in levels if k not in factors]
    if unknown:
        raise ValueError(f"levels names {unknown}, which are not factors {list(factors)}")
    return factors, level, levels


def _select_levels(df, factors, levels, step, response) -> tuple[pd.DataFrame, dict]:
    """``(rows, order)``: the rows at the chosen levels (and step), and each factor's levels, first coded +1."""
    rows = df
    order: dict = {}
    for f in factors:
        present = pd.unique(rows[f].dropna())
        if f in levels:
            want = [native(x) for x in levels[f]]
            if len(want) < 2 or len(set(want)) != len(want):
                raise ValueError(f"levels[{f!r}] must list at least 2 distinct levels, got {levels[f]!r}")
            absent = [x for x in want if x not in set(present.tolist())]
            if absent:
                raise ValueError(
                    f"levels[{f!r}] values {absent} are not in column {f!r}; present: {sorted(present.tolist())}"
                )
            rows = rows[rows[f].isin(want)]
            order[f] = tuple(want)
        else:
            if len(present) < 2:
                raise ValueError(f"factor {f!r} needs at least 2 levels, found {present.tolist()}")
            order[f] = tuple(native(x) for x in sorted(present.tolist()))
    if "step" in rows.columns and step is not None:
        rows = v.select_step(rows, step, list(factors))
    v.check_finite_column(rows, response)
    return rows, order


def _check_cells(rows, factors, order, formula) -> pd.Series:
    """Seeds per cell, once the full factorial (without a formula) has every cell with 2 seeds or more
    and no seed appears twice in a cell."""
    cells = rows.groupby(list(factors), sort=False, observed=True).size()
    n_cells = int(np.prod([len(order[f]) for f in factors]))
    if formula is None:
        if len(cells) < n_cells:
            raise ValueError(
                f"the full factorial needs all {n_cells} cells of {list(factors)}; {n_cells - len(cells)} "
                f"are empty; pass a formula for a fractional design"
            )
        if cells.min() < 2:
            raise ValueError(
                f"each cell needs at least 2 seeds to estimate the error, found {int(cells.min())} in "
                f"cell {cells.idxmin()!r}"
            )
    if "seed" in rows.columns and rows.duplicated([*factors, "seed"]).any():
        raise ValueError(
            "several rows share (factors..., seed); filter the other conditions (or steps) so each "
            "seed appears once per cell"
        )
    return cells


def _design_frame(rows, factors, order, response, formula) -> pd.DataFrame:
    """The fitted rows (every column with a formula), factors as ordered categoricals in ``order``."""
    keep = [c for c in rows.columns if c in ("seed",) or c in factors or c == response]
    if formula is not None:
        keep = list(rows.columns)
    design = rows[keep].copy().reset_index(drop=True)
    for f in factors:  # each distinct value matched once, not once a row
        codes, uniques = pd.factorize(design[f])
        at = {x: i for i, x in enumerate(order[f])}
        lookup = np.array([at.get(native(x), -1) for x in uniques] + [-1], dtype=np.int64)
        design[f] = pd.Categorical.from_codes(lookup[codes], categories=list(order[f]), ordered=True)
    return design


def _ols(formula: str, design: pd.DataFrame):
    # lazy: statsmodels (0.5-1 s of imports) loads only for a design the closed form does not fit; from
    # its modules: statsmodels.api / statsmodels.formula.api also load time series, graphics, datasets
    from statsmodels.regression.linear_model import OLS

    return OLS.from_formula(formula, data=design).fit()


def _statsmodels_rows(model, anova_typ: int, level: float):
    """``(anova, columns, codes, coefficient rows)`` of a statsmodels fit."""
    from statsmodels.stats.anova import anova_lm  # lazy: see _ols

    info = model.model.data.model_spec
    conf = model.conf_int(alpha=1.0 - level)
    columns, codes, records = [], [], []
    for term, sl in info.term_slices.items():
        for column in info.column_names[sl]:
            columns.append(column)
            codes.append([fac.code for fac in term.factors])
            records.append({
                "model_term": column, "order": len(codes[-1]), "estimate": float(model.params[column]),
                "std_err": float(model.bse[column]), "ci_low": float(conf.loc[column, 0]),
                "ci_high": float(conf.loc[column, 1]), "p_value": float(model.pvalues[column]),
            })
    return anova_lm(model, typ=anova_typ), columns, codes, pd.DataFrame.from_records(records)


def additivity_decision(ci_low: float, ci_high: float, threshold: float = 0.20) -> str:
    """Decision on additivity from an interval of the interaction ratio.

    ``"additive"`` if ``ci_high < threshold``, ``"non-additive"`` if ``ci_low > threshold``, else
    ``"inconclusive"``.

    Args:
      ci_low: lower bound of the interaction ratio interval.
      ci_high: upper bound (>= ci_low).
      threshold: pre-set threshold (> 0; 0.20 in the reference study).

    Returns:
      One of ``"additive"``, ``"non-additive"``, ``"inconclusive"``.
    """
    threshold = v.check_positive(threshold, "threshold")
    lo, hi = float(ci_low), float(ci_high)
    if np.isnan(lo) or np.isnan(hi) or lo > hi:
        raise ValueError(f"(ci_low, ci_high) must be an ordered pair of numbers, got ({ci_low!r}, {ci_high!r})")
    if hi < threshold:
        return "additive"
    if lo > threshold:
        return "non-additive"
    return "inconclusive"


@dataclasses.dataclass(frozen=True)
class InteractionRatioResult:
    """Interaction ratio with its bootstrap interval and both decision rules.

    Attributes:
      ratio: ``max |interaction coefficient| / max |main-effect coefficient|``.
      ci_low, ci_high: percentile bootstrap bounds (seeds resampled within cells).
      ci_level: confidence level.
      threshold: the pre-set threshold.
      decision: interval rule, see :func:`additivity_decision`.
      reference_decision: the reference study's point rule, ``"additive"`` iff ratio < threshold.
      max_interaction_term, max_main_term: readable names of the maximising coefficients.
      n_resamples: bootstrap resamples.
    """

    ratio: float
    ci_low: float
    ci_high: float
    ci_level: float
    threshold: float
    decision: str
    reference_decision: str
    max_interaction_term: str
    max_main_term: str
    n_resamples: int


def _resampled_coefficients(result: FactorialResult, n_resamples: int, rng) -> np.ndarray:
    """``[n_resamples, p]`` coefficients refitted on seeds drawn with replacement within each cell.

    Each cell draws ``rng.integers(0, n_c, size=(n_resamples, n_c))`` in turn. When the rows of a cell
    share their design row, ``pinv(X) y`` is a weighted sum of the cell sums, so each resample
    reduces to its cell sums first: memory ``n_resamples x cells``, not ``n_resamples x rows``.
    """
    if result.closed_form:
        X = effect_matrix(result.design, result.factors, result.levels)
        y = result.design[result.response].to_numpy(dtype=float)
    else:
        X = np.asarray(result.model.model.exog, dtype=float)
        y = np.asarray(result.model.model.endog, dtype=float)
    cell = result.design.groupby(list(result.factors), observed=True, sort=False).ngroup().to_numpy()
    if cell.size != y.size:
        raise ValueError("the fitted rows do not match the design rows (missing values were dropped)")
    groups = [np.flatnonzero(cell == c) for c in np.unique(cell)]
    if all(np.all(X[m] == X[m[:1]]) for m in groups):
        pinv = np.linalg.pinv(X)
        weights = np.stack([pinv[:, m[0]] for m in groups], axis=1)  # [p, cells]: equal columns within a cell
        sums = np.stack([resampled_sums(y[m], resample_indices(rng, m.size, (n_resamples, m.size))) for m in groups],
                        axis=1)
        return sums @ weights.T
    idx = np.empty((n_resamples, y.size), dtype=np.int64)
    for m in groups:
        idx[:, m] = m[resample_indices(rng, m.size, (n_resamples, m.size))]
    Xb = X[idx]
    return np.linalg.solve(np.einsum("bnp,bnq->bpq", Xb, Xb), np.einsum("bnp,bn->bp", Xb, y[idx]))


def interaction_ratio(
    result,
    *,
    threshold: float = 0.20,
    ci: float = 0.95,
    n_resamples: int = 2000,
    random_state=0,
    **fit_kwargs,
) -> InteractionRatioResult:
    """Interaction ratio of a factorial fit, with a bootstrap interval over seeds within cells.

    ``ratio = max_{|T|>=2} |beta_T| / max_{|T|=1} |beta_T|`` (docs/science.md). Each resample draws
    the seeds of every cell with replacement and refits the same formula. The max of absolute
    values is biased upward when effects are near zero, so ``"additive"`` needs enough seeds for the
    upper bound to fall below the threshold.

    Args:
      result: a :class:`FactorialResult`, or a DataFrame fitted with :func:`fit_factorial` and
        ``fit_kwargs`` (``factors=``, ``levels=``, ...).
      threshold: pre-set threshold (> 0; the reference study used 0.20).
      ci: two-sided confidence level in (0, 1).
      n_resamples: bootstrap resamples (>= 100).
      random_state: int seed or ``numpy.random.Generator``.
      **fit_kwargs: passed to :func:`fit_factorial` when ``result`` is a DataFrame.

    Returns:
      :class:`InteractionRatioResult`.
    """
    if isinstance(result, pd.DataFrame):
        result = fit_factorial(result, **fit_kwargs)
    elif fit_kwargs:
        raise ValueError(f"fit arguments {sorted(fit_kwargs)} apply only when result is a DataFrame")
    if not isinstance(result, FactorialResult):
        raise ValueError(f"result must be a FactorialResult or a DataFrame, got {type(result).__name__}")
    threshold = v.check_positive(threshold, "threshold")
    level = v.check_level(ci)
    n_resamples = v.check_int(n_resamples, "n_resamples", minimum=100)
    rng = v.make_rng(random_state)

    coefs = result.coefficients
    main = np.flatnonzero(coefs["order"].to_numpy() == 1)
    inter = np.flatnonzero(coefs["order"].to_numpy() >= 2)
    if main.size == 0 or inter.size == 0:
        raise ValueError("the model needs at least one main effect and one interaction for the interaction ratio")
    est = coefs["estimate"].to_numpy()
    denom = np.max(np.abs(est[main]))
    if denom == 0:
        raise ValueError("every main-effect coefficient is 0; the interaction ratio is undefined")
    ratio = float(np.max(np.abs(est[inter])) / denom)

    beta = _resampled_coefficients(result, n_resamples, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        boot = np.max(np.abs(beta[:, inter]), axis=1) / np.max(np.abs(beta[:, main]), axis=1)
    alpha = 1.0 - level
    lo, hi = (float(q) for q in np.quantile(boot, [alpha / 2.0, 1.0 - alpha / 2.0]))
    terms = coefs["term"].to_numpy()
    return InteractionRatioResult(
        ratio=ratio, ci_low=lo, ci_high=hi, ci_level=level, threshold=threshold,
        decision=additivity_decision(lo, hi, threshold),
        reference_decision="additive" if ratio < threshold else "non-additive",
        max_interaction_term=str(terms[inter[np.argmax(np.abs(est[inter]))]]),
        max_main_term=str(terms[main[np.argmax(np.abs(est[main]))]]),
        n_resamples=n_resamples,
    )
