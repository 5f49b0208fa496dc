"""Tests of the factorial fit and the interaction ratio (tabsim.stats.factorial)."""
import itertools

import numpy as np
import pandas as pd
import pytest

import tabsim.stats as ts

LEVELS = {"arm": ("true", "majority"), "filter": ("on", "off"), "prior_strength": (0.8, 0.35)}
FACTORS = ("arm", "filter", "prior_strength")
# Coefficients of y on the +/-1 codes: A, B, C, AB, AC, BC, ABC.
BETA = {"A": 0.10, "B": 0.03, "C": -0.05, "AB": 0.02, "AC": -0.089, "BC": 0.01, "ABC": 0.005}


def design_frame(beta=BETA, *, n_seeds=6, sigma=0.02, seed=0):
    """Engine-shaped 2^3 frame with an extra arm and an earlier step that the fit must ignore."""
    rng = np.random.default_rng(seed)
    rows = []
    for arm, filt, prior in itertools.product(("true", "majority", "random"), ("on", "off"), (0.8, 0.35)):
        code = {"A": 1 if arm == "true" else -1, "B": 1 if filt == "on" else -1, "C": 1 if prior == 0.8 else -1}
        mean = 0.5 + sum(b * np.prod([code[c] for c in term]) for term, b in beta.items())
        for s in range(n_seeds):
            for step in (100, 200):
                y = mean + rng.normal(0, sigma) if step == 200 else rng.uniform()
                rows.append({"seed": s, "arm": arm, "filter": filt, "prior_strength": prior, "step": step,
                             "gamma": 0.5, "pass1": y})
    return pd.DataFrame(rows)


def codes(df):
    return {"A": np.where(df["arm"] == "true", 1, -1), "B": np.where(df["filter"] == "on", 1, -1),
            "C": np.where(df["prior_strength"] == 0.8, 1, -1)}


def test_coefficients_equal_hand_contrasts_on_2x2x2():
    df = design_frame()
    res = ts.fit_factorial(df, response="pass1", factors=FACTORS, levels=LEVELS)
    rows = df[(df.step == 200) & df.arm.isin(["true", "majority"])]
    assert len(res.design) == len(rows) == 8 * 6
    y = rows["pass1"].to_numpy()
    x = codes(rows)
    coefs = res.coefficients.set_index("term")
    assert list(coefs.index) == ["intercept", "A", "B", "C", "AB", "AC", "BC", "ABC"]
    for term in BETA:
        sign = np.prod([x[c] for c in term], axis=0)
        hand = (y[sign == 1].mean() - y[sign == -1].mean()) / 2
        assert coefs.loc[term, "estimate"] == pytest.approx(hand, abs=1e-12), term
        assert coefs.loc[term, "order"] == len(term)
    assert coefs.loc["intercept", "estimate"] == pytest.approx(y.mean(), abs=1e-12)
    # Standard errors of a balanced +/-1 design: sigma_hat / sqrt(N) for every coefficient.
    sigma_hat = np.sqrt(res.model.mse_resid)
    np.testing.assert_allclose(coefs["std_err"], sigma_hat / np.sqrt(len(y)), rtol=1e-10)
    assert res.formula == "pass1 ~ C(arm, Sum) * C(filter, Sum) * C(prior_strength, Sum)"
    assert res.letters == {"arm": "A", "filter": "B", "prior_strength": "C"}


def test_level_order_sets_the_sign():
    df = design_frame()
    high = ts.fit_factorial(df, factors=FACTORS, levels=LEVELS).coefficients.set_index("term")
    flipped = dict(LEVELS, filter=("off", "on"))
    low = ts.fit_factorial(df, factors=FACTORS, levels=flipped).coefficients.set_index("term")
    for term in BETA:
        sign = -1 if "B" in term else 1
        assert low.loc[term, "estimate"] == pytest.approx(sign * high.loc[term, "estimate"], abs=1e-12)
    # Without levels the sorted order is used, so "off" < "on" puts off at +1.
    default = ts.fit_factorial(df, factors=FACTORS, levels={"arm": LEVELS["arm"]}).coefficients.set_index("term")
    assert default.loc["B", "estimate"] == pytest.approx(low.loc["B", "estimate"], abs=1e-12)


def test_holm_adjustment_is_monotone_and_matches_numpy():
    res = ts.fit_factorial(design_frame(sigma=0.05, seed=3), factors=FACTORS, levels=LEVELS)
    eff = res.coefficients[res.coefficients["order"] > 0]
    p, adj = eff["p_value"].to_numpy(), eff["p_holm"].to_numpy()
    assert (adj >= p - 1e-15).all() and (adj <= 1).all()
    order = np.argsort(p)
    assert np.all(np.diff(adj[order]) >= -1e-15)
    m = p.size
    hand = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    np.testing.assert_allclose(adj[order], hand, rtol=1e-12)
    assert np.isnan(res.coefficients.loc[res.coefficients["order"] == 0, "p_holm"]).all()


def test_anova_types_agree_on_balanced_design():
    df = design_frame(seed=4)
    a2 = ts.fit_factorial(df, factors=FACTORS, levels=LEVELS, anova_typ=2).anova
    a3 = ts.fit_factorial(df, factors=FACTORS, levels=LEVELS, anova_typ=3).anova
    rows = [r for r in a2.index if r != "Residual"]
    np.testing.assert_allclose(a2.loc[rows, "sum_sq"], a3.loc[rows, "sum_sq"], rtol=1e-9)
    # Sum of squares of a +/-1 column in a balanced design: N * beta^2.
    res = ts.fit_factorial(df, factors=FACTORS, levels=LEVELS)
    n = len(res.design)
    b = res.coefficients.set_index("term").loc["A", "estimate"]
    assert a2.loc["C(arm, Sum)", "sum_sq"] == pytest.approx(n * b**2, rel=1e-9)


def test_multilevel_factor_names_and_user_formula():
    rng = np.random.default_rng(5)
    rows = [{"seed": s, "algo": a, "filter": f, "pass1": rng.normal()}
            for a in ("grpo", "dapo", "rloo") for f in ("on", "off") for s in range(4)]
    df = pd.DataFrame(rows)
    res = ts.fit_factorial(df, factors=("algo", "filter"), levels={"filter": ("on", "off")})
    assert list(res.coefficients["term"]) == ["intercept", "A[dapo]", "A[grpo]", "B", "A[dapo]:B", "A[grpo]:B"]
    additive = ts.fit_factorial(df, factors=("algo", "filter"), levels={"filter": ("on", "off")},
                                formula="pass1 ~ C(algo, Sum) + C(filter, Sum)")
    assert list(additive.coefficients["order"]) == [0, 1, 1, 1]
    with pytest.raises(ValueError, match="at least one main effect and one interaction"):
        ts.interaction_ratio(additive, n_resamples=100)


def test_fit_checks_inputs():
    df = design_frame()
    with pytest.raises(ValueError, match=r"levels\['arm'\] values \['oracle'\] are not in column 'arm'"):
        ts.fit_factorial(df, factors=FACTORS, levels={"arm": ("oracle", "majority")})
    with pytest.raises(ValueError, match="cells of"):
        ts.fit_factorial(df[~((df.arm == "true") & (df["filter"] == "on"))], factors=FACTORS, levels=LEVELS)
    with pytest.raises(ValueError, match="at least 2 seeds"):
        ts.fit_factorial(df[df.seed == 0], factors=FACTORS, levels=LEVELS)
    with pytest.raises(ValueError, match="share \\(factors..., seed\\)"):
        ts.fit_factorial(df, factors=FACTORS, levels=LEVELS, step=None)
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['lr'\]"):
        ts.fit_factorial(df, factors=("arm", "lr"))


def test_additivity_decision_rule():
    assert ts.additivity_decision(0.05, 0.19, 0.2) == "additive"
    assert ts.additivity_decision(0.21, 0.5, 0.2) == "non-additive"
    assert ts.additivity_decision(0.1, 0.3, 0.2) == "inconclusive"
    assert ts.additivity_decision(0.1, 0.2, 0.2) == "inconclusive"
    with pytest.raises(ValueError, match="ordered pair"):
        ts.additivity_decision(0.3, 0.1)
    with pytest.raises(ValueError, match="threshold must be a finite number > 0"):
        ts.additivity_decision(0.1, 0.2, threshold=0)


def test_interaction_ratio_point_value_and_decisions():
    res = ts.fit_factorial(design_frame(), factors=FACTORS, levels=LEVELS)
    est = res.coefficients.set_index("term")["estimate"]
    out = ts.interaction_ratio(res, n_resamples=500, random_state=1)
    hand = max(abs(est[t]) for t in ("AB", "AC", "BC", "ABC")) / max(abs(est[t]) for t in ("A", "B", "C"))
    assert out.ratio == pytest.approx(hand, abs=1e-12)
    assert out.max_interaction_term == "AC" and out.max_main_term == "A"
    # AC / A = 0.89 in truth, far above 0.20 with sigma / sqrt(N) ~ 0.003 per coefficient.
    assert out.decision == "non-additive" and out.reference_decision == "non-additive"
    assert out.ci_low <= out.ratio <= out.ci_high

    additive = {"A": 0.10, "B": 0.05, "C": -0.08, "AB": 0.0, "AC": 0.0, "BC": 0.0, "ABC": 0.0}
    df = design_frame(additive, n_seeds=20, sigma=0.02, seed=6)
    out = ts.interaction_ratio(df, factors=FACTORS, levels=LEVELS, n_resamples=500, random_state=2)
    # Interaction coefficients have SE 0.02 / sqrt(160) ~ 0.0016, so max |.| / 0.1 stays ~ 0.03.
    assert out.decision == "additive" and out.reference_decision == "additive" and out.ci_high < 0.2

    # True ratio exactly at the threshold with noisy seeds: the interval must straddle it, while
    # the point rule still commits to one side.
    border = {"A": 0.10, "B": 0.05, "C": -0.08, "AB": 0.02, "AC": 0.0, "BC": 0.0, "ABC": 0.0}
    df = design_frame(border, n_seeds=4, sigma=0.03, seed=7)
    out = ts.interaction_ratio(df, factors=FACTORS, levels=LEVELS, n_resamples=500, random_state=3)
    assert out.decision == "inconclusive"
    assert out.reference_decision in ("additive", "non-additive")


def test_interaction_ratio_bootstrap_matches_refitting():
    # The fast path reuses the design matrix; refit a few resamples with statsmodels to check it.
    import statsmodels.formula.api as smf

    res = ts.fit_factorial(design_frame(n_seeds=3, seed=8), factors=FACTORS, levels=LEVELS)
    rng = np.random.default_rng(9)
    design = res.design
    cell = design.groupby(list(FACTORS), observed=True, sort=False).ngroup().to_numpy()
    idx = np.empty(len(design), dtype=int)
    for c in np.unique(cell):
        members = np.flatnonzero(cell == c)
        idx[members] = members[rng.integers(0, members.size, members.size)]
    refit = smf.ols(res.formula, data=design.iloc[idx].reset_index(drop=True)).fit().params.to_numpy()
    fast = design["pass1"].to_numpy()[idx] @ np.linalg.pinv(res.model.model.exog).T
    np.testing.assert_allclose(fast, refit, atol=1e-12)
