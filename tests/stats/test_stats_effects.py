"""The closed-form fit of balanced two-level factorials against statsmodels, Holm's adjustment, and
the cell-sum bootstrap of the interaction ratio against the resample-every-row formula."""
import gc
import itertools

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.anova import anova_lm
from statsmodels.stats.multitest import multipletests

import tabsim.stats as ts
from tabsim.stats.effects import effect_terms, holm

# Level types of every kind a frame holds: strings (a name that needs quoting), ints, floats, bools.
LEVELS = {"reward arm": ("true", "majority"), "n": (3, 1), "prior": (0.30000000000000004, 0.1), "flag": (True, False),
          "e": ("on", "off")}


def balanced_frame(k: int, n_seeds: int = 3, seed: int = 0) -> pd.DataFrame:
    names = list(LEVELS)[:k]
    rng = np.random.default_rng(seed)
    rows = [{**dict(zip(names, cell)), "seed": s} for cell in itertools.product(*(LEVELS[f] for f in names))
            for s in range(n_seeds)]
    df = pd.DataFrame(rows)
    codes = np.stack([np.where(df[f] == LEVELS[f][0], 1.0, -1.0) for f in names], axis=1)
    df["y"] = 0.5 + codes @ rng.normal(0, 0.1, k) + np.prod(codes, axis=1) * 0.03 + rng.normal(0, 0.05, len(df))
    return df.sample(frac=1.0, random_state=seed).reset_index(drop=True)  # rows in no particular order


@pytest.mark.parametrize("k,typ", [(2, 3), (3, 3), (3, 2), (4, 3), (5, 2)])
def test_closed_form_equals_statsmodels(k, typ):
    df = balanced_frame(k, seed=k)
    factors = list(LEVELS)[:k]
    res = ts.fit_factorial(df, response="y", factors=factors, levels={f: LEVELS[f] for f in factors}, anova_typ=typ)
    assert res.closed_form
    model = res.model  # statsmodels' fit of the same formula and rows
    coefs = res.coefficients
    assert coefs["model_term"].tolist() == list(model.params.index)
    scale = np.abs(model.params.to_numpy()).max()
    np.testing.assert_allclose(coefs["estimate"], model.params, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(coefs["std_err"], model.bse, rtol=1e-12)
    conf = model.conf_int(alpha=0.05)
    np.testing.assert_allclose(coefs["ci_low"], conf[0], rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(coefs["ci_high"], conf[1], rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(coefs["p_value"], model.pvalues, rtol=1e-12)
    anova = anova_lm(model, typ=typ)
    assert list(res.anova.index) == list(anova.index) and list(res.anova.columns) == list(anova.columns)
    np.testing.assert_allclose(res.anova.to_numpy(), anova.to_numpy(), rtol=1e-12, atol=1e-12 * anova["sum_sq"].max())


def test_unbalanced_and_custom_designs_use_statsmodels():
    df = balanced_frame(3)
    factors = list(LEVELS)[:3]
    levels = {f: LEVELS[f] for f in factors}
    assert not ts.fit_factorial(df.iloc[1:], response="y", factors=factors, levels=levels).closed_form
    formula = "y ~ C(Q('reward arm'), Sum) + C(n, Sum) + C(prior, Sum)"
    custom = ts.fit_factorial(df, response="y", factors=factors, levels=levels, formula=formula)
    assert not custom.closed_form and list(custom.coefficients["order"]) == [0, 1, 1, 1]


def test_effect_terms_follow_the_formula_expansion():
    assert effect_terms(3) == [(0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)]
    assert effect_terms(4)[4:10] == [(0, 1), (0, 2), (1, 2), (0, 3), (1, 3), (2, 3)]


def test_holm_equals_statsmodels_and_collects_no_garbage(monkeypatch):
    p = np.random.default_rng(1).uniform(0, 0.2, 40)
    p[5] = p[7]  # a tie
    expected = multipletests(p, method="holm")[1]
    calls = []
    monkeypatch.setattr(gc, "collect", lambda *a: calls.append(a) or 0)
    np.testing.assert_array_equal(holm(p), expected)
    ts.fit_factorial(balanced_frame(3), response="y", factors=list(LEVELS)[:3],
                     levels={f: LEVELS[f] for f in list(LEVELS)[:3]})
    assert calls == []


def _resample_every_row(res, n_resamples, seed):
    """The bootstrap written out: every row of every resample, refitted with pinv(X)."""
    rng = np.random.default_rng(seed)
    X = np.asarray(res.model.model.exog, dtype=float)
    y = np.asarray(res.model.model.endog, dtype=float)
    cell = res.design.groupby(list(res.factors), observed=True, sort=False).ngroup().to_numpy()
    idx = np.empty((n_resamples, y.size), dtype=np.int64)
    for c in np.unique(cell):
        members = np.flatnonzero(cell == c)
        idx[:, members] = members[rng.integers(0, members.size, size=(n_resamples, members.size))]
    beta = y[idx] @ np.linalg.pinv(X).T
    main = (res.coefficients["order"] == 1).to_numpy()
    inter = (res.coefficients["order"] >= 2).to_numpy()
    boot = np.max(np.abs(beta[:, inter]), axis=1) / np.max(np.abs(beta[:, main]), axis=1)
    return np.quantile(boot, [0.025, 0.975])


@pytest.mark.parametrize("closed", [True, False])
def test_cell_sum_bootstrap_equals_every_row_resample(closed):
    df = balanced_frame(3, n_seeds=7, seed=11)
    factors = list(LEVELS)[:3]
    levels = {f: LEVELS[f] for f in factors}
    if not closed:  # one seed missing: unbalanced, fitted by statsmodels
        df = df.iloc[1:]
    res = ts.fit_factorial(df, response="y", factors=factors, levels=levels)
    assert res.closed_form is closed
    out = ts.interaction_ratio(res, n_resamples=400, random_state=5)
    lo, hi = _resample_every_row(res, 400, 5)
    assert out.ci_low == pytest.approx(lo, rel=1e-12) and out.ci_high == pytest.approx(hi, rel=1e-12)
