"""``tabsim reproduce``: the reference study (arXiv 2606.05932, SPEC section 3) rebuilt in one command.

Five studies on the ``paper`` preset, run as one packed job (every study's cells x seeds are units
of one compiled program per static shape, shared units run once):

1. the prior sweep over p_s in {0.20, 0.35, 0.50, 0.65, 0.80}, with the partition and the
   crossover of d_elicit located on a finer grid;
2. the 2x2x2 factorial A = reward (TRUE +1 / MAJORITY -1) x B = filter (on +1 / off -1) x
   C = prior (0.80 +1 / 0.35 -1), fitted by OLS on seed-level rows with ``C(x, Sum)`` contrasts;
3. the points-vs-bounds pilot gate at a strong prior and at a uniform prior near the crossover,
   with its stability across pilot replications;
4. the two simulated families (p_s 0.80 and 0.35) with share verdicts;
5. power at p_s 0.50.

``DIR/report.md`` puts tabsim's numbers beside the paper's headline numbers; it is written last,
so a folder without it is an interrupted run.
"""
from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
import types
from pathlib import Path
from typing import Callable

import click
import numpy as np
import pandas as pd

SCALES = ("default", "heavy")  # the study sizes `tabsim reproduce --scale` offers

SWEEP_PRIORS = (0.20, 0.35, 0.50, 0.65, 0.80)
GRID_PRIORS = tuple(round(0.20 + 0.05 * i, 2) for i in range(13))  # crossover grid, 0.20 .. 0.80
STRONG_PRIOR, WEAK_PRIOR, POWER_PRIOR = 0.80, 0.35, 0.50
FAMILY_SEED0 = 100_000  # the families are fresh replications: their seeds differ from the sweep's
# Pre-set decision constants (written down before any run, STYLE section 8).
CI_LEVEL = 0.95
ADDITIVITY_THRESHOLD = 0.20  # interaction ratio (SPEC section 3)
SHARE_THRESHOLD = 0.60  # verdict rule (SPEC section 3)
GATE_TOLERANCE = 0.05  # widest interval (accuracy units) that still counts as a point
TARGET_HALF_WIDTH = 0.02  # power: wanted CI half-width of d_elicit and d_rd
POWER_SEEDS_GRID = (4, 8, 16, 32, 64, 128)
PAPER_SEEDS = 8  # seeds per condition in the reference study
# Interval method of every partition term: Student t for differences, Fieller for ratios. With 8 seeds
# the BCa bootstrap covers ~0.88 of the time where t covers ~0.95 (experiments/interval_coverage,
# tests/plotting/test_figures.py), so the reproduction uses t; the reference gate keeps the paper's percentile rule.
INTERVAL_METHOD = "t"

# The paper's headline numbers (SPEC section 3).
PAPER = {
    "rd_fraction_0.20": 1.39, "rd_fraction_0.80": 0.05, "interaction_ratio": 0.385, "coef_AC": -0.089,
    "elicitation_share_strong": 0.98, "rd_share_weak": 1.18,
}
HEAVY_TASK = {"n_prompts": 80, "n_answers": 10}
HEAVY_TRAIN = {"group_size": 10, "batch_size": 20}


@dataclasses.dataclass(frozen=True)
class Settings:
    """Sizes of the five studies (validated by :func:`settings`)."""

    preset: str
    scale: str
    seeds: int  # per condition: sweep, crossover grid, families
    steps: int
    factorial_seeds: int
    factorial_steps: int
    pilot_seeds: int  # seeds of one pilot of the gate
    pilot_replicates: int
    power_seeds: int  # pilot seeds behind the power curve
    task: dict
    train: dict
    n_resamples: int = 2000

    def base(self, steps: int) -> dict:
        return {"preset": self.preset, "task": dict(self.task), "train": {**self.train, "steps": steps}}


def settings(*, scale: str = "default", seeds: int | None = None, steps: int | None = None,
             preset: str = "paper", n_resamples: int = 2000) -> Settings:
    """Study sizes for a scale, with optional overrides; bad values raise ``ValueError`` naming them.

    ``default``: the paper's sizes (8 seeds x 200 steps, N=40, K=8, G=8, batch 16). ``heavy``: 50
    seeds x 400 steps for the sweep, 100 seeds x 500 steps for the factorial, N=80, K=10, G=10,
    batch 20. ``seeds`` / ``steps`` override every study.
    """
    from tabsim.config import ConfigError, resolve
    from tabsim.presets import PRESETS

    if scale not in SCALES:
        raise ValueError(f"scale: unknown scale {scale!r}; allowed: {', '.join(SCALES)}")
    if preset not in PRESETS:
        raise ValueError(f"preset: unknown preset {preset!r}; allowed: {', '.join(sorted(PRESETS))}")
    for name, val, lo in (("seeds", seeds, 2), ("steps", steps, 1)):
        if val is not None and (isinstance(val, bool) or not isinstance(val, int) or val < lo):
            raise ValueError(f"{name}: must be an integer >= {lo}, got {val!r}")
    heavy = scale == "heavy"
    s = seeds if seeds is not None else (50 if heavy else PAPER_SEEDS)
    fs = seeds if seeds is not None else (100 if heavy else PAPER_SEEDS)
    st = steps if steps is not None else (400 if heavy else None)
    fst = steps if steps is not None else (500 if heavy else None)
    task = dict(HEAVY_TASK) if heavy else {}
    train = dict(HEAVY_TRAIN) if heavy else {}
    try:
        cfg = resolve({"preset": preset, "task": task, "train": train})
    except ConfigError as err:
        raise ValueError(f"preset {preset!r}: {err}") from None
    need = ("frozen", "random", "majority", "true")
    missing = [a for a in need if a not in cfg.arms.arms]
    if missing:
        raise ValueError(f"preset {preset!r}: the partition needs arms {list(need)}; the preset lacks {missing}")
    st = st if st is not None else cfg.train.steps
    fst = fst if fst is not None else cfg.train.steps
    pilot = min(PAPER_SEEDS, s)
    return Settings(preset=preset, scale=scale, seeds=s, steps=st, factorial_seeds=fs, factorial_steps=fst,
                    pilot_seeds=pilot, pilot_replicates=8, power_seeds=max(32, s), task=task, train=train,
                    n_resamples=n_resamples)


def uniform_prior(cfg) -> float:
    """p_s that makes every answer equally likely without the format boost: ``k / K``."""
    return cfg.task.n_correct / cfg.task.n_answers


def mode_switch_prior(cfg) -> float:
    """Prior strength where a correct answer becomes the prior's mode.

    ``p / k = (1 - p) (1 + f K) / (K - k)``  =>  ``p* = k (1 + f K) / (k (1 + f K) + K - k)``.
    """
    k, K, f = cfg.task.n_correct, cfg.task.n_answers, cfg.task.format_boost
    return k * (1 + f * K) / (k * (1 + f * K) + K - k)


def build_designs(s: Settings) -> dict:
    """The designs of the five studies (units shared between them run once)."""
    from tabsim.config import resolve
    from tabsim.studies.factorial import Factor, make_design

    base, fbase = s.base(s.steps), s.base(s.factorial_steps)
    cfg = resolve(base)
    seeds = range(s.seeds)
    prior = lambda levels: Factor("prior_strength", "task.prior_strength", tuple(levels))  # noqa: E731
    fmt = lambda f: Factor("format_boost", "task.format_boost", (f,))  # noqa: E731
    f0 = cfg.task.format_boost
    n_gate = s.pilot_seeds * s.pilot_replicates
    return {
        "prior_sweep": make_design(base, [prior(SWEEP_PRIORS)], seeds=seeds, name="prior_sweep"),
        "crossover_grid": make_design(base, [prior(GRID_PRIORS)], seeds=seeds, name="crossover_grid"),
        "factorial": make_design(fbase, [
            Factor("reward", "arm", ("true", "majority")),
            Factor("filter", "algo.filter", (1, 0), labels=("on", "off")),
            Factor("prior", "task.prior_strength", (STRONG_PRIOR, WEAK_PRIOR)),
        ], seeds=range(s.factorial_seeds), name="factorial"),
        "gate_strong": make_design(base, [prior([STRONG_PRIOR]), fmt(f0)], seeds=range(n_gate), name="gate_strong"),
        "gate_uniform": make_design(base, [prior([uniform_prior(cfg)]), fmt(0.0)], seeds=range(n_gate),
                                    name="gate_uniform"),
        "families": make_design(base, [Factor("family", "task.prior_strength", (STRONG_PRIOR, WEAK_PRIOR),
                                              labels=("strong", "weak"))],
                                seeds=range(FAMILY_SEED0, FAMILY_SEED0 + s.seeds), name="families"),
        "power": make_design(base, [prior([POWER_PRIOR])], seeds=range(s.power_seeds), name="power"),
    }


# ----------------------------------------------------------------------------------------------
# analysis


def analyze(frames: dict, s: Settings, cfg, on_section: Callable[[str, dict], None] | None = None) -> dict:
    """Every statistic of the report, from the studies' tidy frames.

    ``on_section(name, results_so_far)`` is called when the statistics of a figure are ready
    (``"prior_sweep"``, ``"factorial"``, ``"power"``), so the figure can be drawn meanwhile.
    """
    on_section = on_section or (lambda name, part: None)
    from tabsim import stats

    R = s.n_resamples
    out: dict = {}
    # 1. prior sweep
    sp = stats.seed_partition(frames["prior_sweep"], by=["prior_strength"])
    summ = stats.summarize_partition(sp, by=["prior_strength"], ci=CI_LEVEL, method=INTERVAL_METHOD,
                                     n_resamples=R)
    fieller = []
    for p, g in sp.groupby("prior_strength"):
        f = stats.fieller_interval(g["d_rd"], g["d_naive"], ci=CI_LEVEL)
        fieller.append({"prior_strength": p, "rd_fraction": f.estimate, "fieller_low": f.low,
                        "fieller_high": f.high, "bounded": f.bounded})
    out["sweep_seeds"], out["sweep_summary"], out["fieller"] = sp, summ, pd.DataFrame(fieller)
    # crossover on the finer grid
    spg = stats.seed_partition(frames["crossover_grid"], by=["prior_strength"])
    out["grid_seeds"] = spg
    out["crossover"] = stats.locate_crossover(spg, ci=CI_LEVEL, n_resamples=R, paired=True)
    out["mode_switch"] = mode_switch_prior(cfg)
    on_section("prior_sweep", out)
    # 2. factorial
    fit = stats.fit_factorial(frames["factorial"], response="pass1", factors=["reward", "filter", "prior"],
                              levels={"reward": ("true", "majority"), "filter": ("on", "off"),
                                      "prior": (STRONG_PRIOR, WEAK_PRIOR)}, ci=CI_LEVEL)
    out["fit"] = fit
    out["ratio"] = stats.interaction_ratio(fit, threshold=ADDITIVITY_THRESHOLD, ci=CI_LEVEL, n_resamples=R)
    on_section("factorial", out)
    # 3. gate
    gate_frames = []
    for name in ("gate_strong", "gate_uniform"):
        fr = frames[name].assign(condition=name.removeprefix("gate_"))
        gate_frames.append(stats.seed_partition(fr, by=["condition", "prior_strength", "format_boost"]))
    gsp = pd.concat(gate_frames, ignore_index=True)
    pilot = gsp[gsp["seed"] < s.pilot_seeds]
    by = ["condition", "prior_strength", "format_boost"]
    out["gate_pilot"] = stats.classify_terms(pilot, tolerance=GATE_TOLERANCE, by=by, ci=CI_LEVEL,
                                             method=INTERVAL_METHOD, n_resamples=R)
    reps = stats.pilot_replicates(gsp, n_seeds=s.pilot_seeds, n_replicates=s.pilot_replicates)
    out["gate_stability"] = stats.gate_stability(reps, tolerance=GATE_TOLERANCE, by=by, ci=CI_LEVEL,
                                                 method=INTERVAL_METHOD, n_resamples=1000)
    # 4. families
    fsp = stats.seed_partition(frames["families"], by=["family"])
    fsum = stats.summarize_partition(fsp, by=["family"], ci=CI_LEVEL, method=INTERVAL_METHOD, n_resamples=R)
    out["families_summary"] = fsum
    out["verdicts"] = stats.share_verdicts(fsum, by=["family"], threshold=SHARE_THRESHOLD)
    # 5. power
    psp = stats.seed_partition(frames["power"], by=["prior_strength"])
    curves = [stats.power_curve(psp, seeds_grid=POWER_SEEDS_GRID, n_sim=1000, term=t, ci=CI_LEVEL, method="t")
              for t in ("d_elicit", "d_rd")]
    out["power_curve"] = pd.concat(curves, ignore_index=True)
    out["power_recommend"] = {t: stats.recommend_seeds(c, TARGET_HALF_WIDTH)
                              for t, c in zip(("d_elicit", "d_rd"), curves)}
    out["power_pilot"] = psp
    out["power_mde"] = minimum_detectable_effects(psp, POWER_SEEDS_GRID)
    on_section("power", out)
    return out


def minimum_detectable_effects(seed_df: pd.DataFrame, seeds_grid, *, power: float = 0.80) -> pd.DataFrame:
    """Smallest true difference a two-sided t test at ``1 - CI_LEVEL`` detects with ``power``, per seed count.

    ``mde(n) = (t_{n-1, (1+ci)/2} + t_{n-1, power}) * sd / sqrt(n)`` with ``sd`` the pilot's per-seed
    standard deviation of the term (normal approximation to the noncentral t).
    """
    from scipy import stats as sps

    rows = []
    for term in ("d_elicit", "d_rd"):
        sd = float(seed_df[term].std(ddof=1))
        for n in seeds_grid:
            q = sps.t.ppf(0.5 + CI_LEVEL / 2, n - 1) + sps.t.ppf(power, n - 1)
            rows.append({"term": term, "n_seeds": int(n), "pilot_sd": sd, "power": power,
                         "mde": float(q * sd / math.sqrt(n)), "pilot_estimate": float(seed_df[term].mean())})
    return pd.DataFrame(rows)


def _term(summary: pd.DataFrame, term: str, **where) -> pd.Series:
    m = summary["term"] == term
    for k, val in where.items():
        m &= np.isclose(summary[k], val) if isinstance(val, float) else summary[k] == val
    return summary[m].iloc[0]


def compare_with_paper(a: dict, s: Settings) -> pd.DataFrame:
    """tabsim's estimate of each headline number, its interval, and the seed-noise check.

    The paper ran 8 seeds; with the same per-seed spread its standard error is
    ``se_tabsim * sqrt(n_tabsim / 8)``, so the difference has standard error
    ``se_tabsim * sqrt(1 + n_tabsim / 8)`` and counts as beyond the seed noise when
    ``|tabsim - paper| > 1.96`` of it.
    """
    summ, fam, coefs, ratio = a["sweep_summary"], a["families_summary"], a["fit"].coefficients, a["ratio"]
    rows = []

    def add(key, label, est, se, lo, hi, n):
        noise = se * math.sqrt(1.0 + n / PAPER_SEEDS) if np.isfinite(se) else float("nan")
        diff = est - PAPER[key]
        beyond = bool(np.isfinite(noise) and abs(diff) > 1.96 * noise)
        rows.append({"quantity": key, "label": label, "paper": PAPER[key], "tabsim": est, "ci_low": lo,
                     "ci_high": hi, "difference": diff, "noise_se": noise, "z": diff / noise if noise else np.nan,
                     "beyond_seed_noise": beyond, "n_seeds": n})

    for p in (0.20, 0.80):
        r = _term(summ, "rd_fraction", prior_strength=p)
        add(f"rd_fraction_{p:.2f}", f"rd fraction at p_s={p:.2f}", r.estimate, r.se, r.ci_low, r.ci_high, s.seeds)
    add("interaction_ratio", "factorial interaction ratio", ratio.ratio,
        (ratio.ci_high - ratio.ci_low) / (2 * 1.959964), ratio.ci_low, ratio.ci_high, s.factorial_seeds)
    ac = coefs.set_index("term").loc["AC"]
    add("coef_AC", "factorial AxC coefficient", ac.estimate, ac.std_err, ac.ci_low, ac.ci_high, s.factorial_seeds)
    e = _term(fam, "elicitation_share", family="strong")
    add("elicitation_share_strong", "elicitation share, strong family (p_s=0.80)", e.estimate, e.se, e.ci_low,
        e.ci_high, s.seeds)
    r = _term(fam, "rd_share", family="weak")
    add("rd_share_weak", "rd share, weak family (p_s=0.35)", r.estimate, r.se, r.ci_low, r.ci_high, s.seeds)
    return pd.DataFrame(rows)


def compare_every_point(a: dict, s: Settings) -> pd.DataFrame:
    """Every point of the prior sweep and every factorial term beside what the paper reports or implies.

    The paper (SPEC section 3) reports the rd fraction at p_s = 0.20 and 0.80, the sign change of
    d_elicit at the crossover, the AxC coefficient and the interaction ratio, and describes an
    on-policy simulator with no clipping, where RANDOM cannot move the policy (``d_null = 0``). So:

    * ``d_null`` at every p_s: the paper's design implies 0; tabsim agrees when its CI contains 0;
    * ``d_elicit`` at every p_s: the paper's claim is its sign, negative below the crossover and
      positive above; the crossover is where the prior's mode becomes correct (p* of
      :func:`mode_switch_prior`); tabsim agrees when its CI lies on the claimed side;
    * ``rd_fraction``: 1.39 and 0.05 at the ends (the seed-noise rule of :func:`compare_with_paper`);
      at the inner points the claim is ``> 1`` below p* and ``< 1`` above (the bias d_elicit changes sign);
    * factorial: AC = -0.089 (reported); ``max |main| = |AC| / 0.385 = 0.231`` when AC is the largest
      interaction (tabsim's largest main term is compared with it); every other interaction
      ``|coef| <= 0.089`` under the same reading; the interaction ratio 0.385.

    Returns:
      DataFrame ``section, p_s, term, paper, paper_kind (reported | implied | not reported), tabsim,
      ci_low, ci_high, agrees`` with ``agrees`` "yes", "no" or "undetermined" (CI straddles the claim).
    """
    summ, coefs = a["sweep_summary"], a["fit"].coefficients.set_index("term")
    pstar = a["mode_switch"]
    headline = compare_with_paper(a, s).set_index("quantity")
    rows = []

    def add(section, p, term, paper, kind, r_est, lo, hi, agrees):
        rows.append({"section": section, "p_s": p, "term": term, "paper": paper, "paper_kind": kind,
                     "tabsim": float(r_est), "ci_low": float(lo), "ci_high": float(hi), "agrees": agrees})

    def side(lo, hi, sign):  # CI entirely on the claimed side of 0 (sign +1 / -1)
        if (sign > 0 and lo > 0) or (sign < 0 and hi < 0):
            return "yes"
        return "no" if (sign > 0 and hi < 0) or (sign < 0 and lo > 0) else "undetermined"

    for p in SWEEP_PRIORS:
        r = _term(summ, "d_null", prior_strength=p)
        add("prior sweep", p, "d_null", "0 (on-policy, no clip)", "implied", r.estimate, r.ci_low, r.ci_high,
            "yes" if r.ci_low <= 0 <= r.ci_high else "no")
        r = _term(summ, "d_elicit", prior_strength=p)
        sign = 1 if p > pstar else -1
        add("prior sweep", p, "d_elicit", f"{'> 0' if sign > 0 else '< 0'} (p* = {pstar:.3f})", "implied",
            r.estimate, r.ci_low, r.ci_high, side(r.ci_low, r.ci_high, sign))
        r = _term(summ, "rd_fraction", prior_strength=p)
        key = f"rd_fraction_{p:.2f}"
        if key in PAPER:
            h = headline.loc[key]
            add("prior sweep", p, "rd_fraction", f"{PAPER[key]:.2f}", "reported", r.estimate, r.ci_low, r.ci_high,
                "no" if h.beyond_seed_noise else "yes")
        else:
            above = p > pstar
            lo_, hi_ = r.ci_low - 1.0, r.ci_high - 1.0
            add("prior sweep", p, "rd_fraction", "< 1" if above else "> 1", "implied", r.estimate, r.ci_low,
                r.ci_high, side(lo_, hi_, -1 if above else 1))
    main_terms, inter_terms = ("A", "B", "C"), ("AB", "AC", "BC", "ABC")
    implied_main = abs(PAPER["coef_AC"]) / PAPER["interaction_ratio"]
    largest = max(main_terms, key=lambda t: abs(coefs.loc[t, "estimate"]))
    for t in main_terms + inter_terms:
        c = coefs.loc[t]
        if t == "AC":
            h = headline.loc["coef_AC"]
            add("factorial", np.nan, t, f"{PAPER['coef_AC']:.3f}", "reported", c.estimate, c.ci_low, c.ci_high,
                "no" if h.beyond_seed_noise else "yes")
        elif t == largest:  # the paper's numbers are rounded to 3 decimals: the implied value is a range
            lo_i = (abs(PAPER["coef_AC"]) - 5e-4) / (PAPER["interaction_ratio"] + 5e-4)
            hi_i = (abs(PAPER["coef_AC"]) + 5e-4) / (PAPER["interaction_ratio"] - 5e-4)
            ok = abs(c.ci_low) <= hi_i and abs(c.ci_high) >= lo_i if c.estimate > 0 else \
                abs(c.ci_high) <= hi_i and abs(c.ci_low) >= lo_i
            add("factorial", np.nan, t, f"abs(coef) = {implied_main:.3f} ({lo_i:.3f}..{hi_i:.3f}; largest main)", "implied",
                c.estimate, c.ci_low, c.ci_high, "yes" if ok else "no")
        elif t in main_terms:
            add("factorial", np.nan, t, f"abs(coef) <= {implied_main:.3f}", "implied", c.estimate, c.ci_low, c.ci_high,
                "yes" if c.ci_low <= implied_main and c.ci_high >= -implied_main else "no")
        else:
            bound = abs(PAPER["coef_AC"])
            add("factorial", np.nan, t, f"abs(coef) <= {bound:.3f}", "implied", c.estimate, c.ci_low, c.ci_high,
                "yes" if c.ci_low <= bound and c.ci_high >= -bound else "no")
    h = headline.loc["interaction_ratio"]
    add("factorial", np.nan, "interaction ratio", f"{PAPER['interaction_ratio']:.3f}", "reported", h.tabsim, h.ci_low,
        h.ci_high, "no" if h.beyond_seed_noise else "yes")
    return pd.DataFrame(rows)


def settings_changes(s: Settings, cfg) -> list[str]:
    """How this run's settings differ from the paper's (seeds only change the noise, so they are not listed)."""
    from tabsim.config import resolve

    ref = resolve({"preset": "paper"})
    out = []
    if s.preset != "paper":
        out.append(f"preset {s.preset!r} instead of 'paper'")
    for label, mine, theirs in (("steps", s.steps, ref.train.steps),
                                ("factorial steps", s.factorial_steps, ref.train.steps),
                                ("N prompts", cfg.task.n_prompts, ref.task.n_prompts),
                                ("K answers", cfg.task.n_answers, ref.task.n_answers),
                                ("k correct", cfg.task.n_correct, ref.task.n_correct),
                                ("G", cfg.train.group_size, ref.train.group_size),
                                ("batch", cfg.train.batch_size, ref.train.batch_size),
                                ("format boost", cfg.task.format_boost, ref.task.format_boost)):
        if mine != theirs:
            out.append(f"{label} {mine} instead of {theirs}")
    return out


def difference_reasons(cmp: pd.DataFrame, a: dict, s: Settings, cfg) -> dict[str, str]:
    """A plain reason for every headline number that differs by more than the seed noise."""
    reasons = {}
    changes = settings_changes(s, cfg)
    coefs = a["fit"].coefficients.set_index("term")
    exact = ("tabsim evaluates pass@1 exactly (the policy's mass on the correct answers), so its seed noise "
             "is small; the paper sampled pass@1 (SPEC section 3), which adds evaluation noise that the noise SE "
             "here leaves out, and it reported rounded values")
    for row in cmp.itertuples():
        if not row.beyond_seed_noise:
            continue
        k = row.quantity
        if changes:
            reasons[k] = "the settings differ from the paper's (see above; SPEC section 3 lists the paper's)"
            continue
        rel = abs(row.difference) / abs(row.paper) if row.paper else float("nan")
        if k == "coef_AC":
            doubled = 2 * row.tabsim
            why = (f"tabsim reports the coefficient of the +/-1 coding, half the high-minus-low contrast; "
                   f"the contrast 2*beta_AC = {doubled:+.3f}")
            if abs(doubled - row.paper) <= 1.96 * 2 * row.noise_se:
                why += (", which matches the paper's value within the noise, so the paper's number is most "
                        "likely the contrast (effect), not the coefficient")
            else:
                why += f" does not match the paper either, so the convention does not explain it; {exact}"
            reasons[k] = why
        elif k == "interaction_ratio":
            big = coefs.loc[a["ratio"].max_interaction_term]
            main = coefs.loc[a["ratio"].max_main_term]
            reasons[k] = (f"the ratio is |{a['ratio'].max_interaction_term}| / |{a['ratio'].max_main_term}| = "
                          f"{abs(big.estimate):.3f} / {abs(main.estimate):.3f}, so it moves with both "
                          f"coefficients; {exact} (relative difference {rel:.1%})")
        else:
            reasons[k] = (f"{exact}; the difference is {rel:.1%} of the paper's value, and a ratio of two partition "
                          f"terms amplifies evaluation noise in either term")
    return reasons


def remarks(a: dict, cfg) -> dict[str, list[str]]:
    """Plain observations that the tables support (computed, not assumed)."""
    out: dict[str, list[str]] = {"sweep": [], "factorial": [], "gate": []}
    x = a["crossover"]
    if np.isfinite(x.estimate) and np.isfinite(x.ci_low) and np.isfinite(x.ci_high):
        p = a["mode_switch"]
        where = "below" if x.ci_high < p else "above" if x.ci_low > p else "at"
        out["sweep"].append(f"The crossover of d_elicit lies {where} p* = {p:.3f} (its interval "
                            f"{'excludes' if where != 'at' else 'includes'} p*): majority reward follows the "
                            f"plurality of G sampled answers, not the prior's mode.")
    coefs = a["fit"].coefficients
    null = coefs[(coefs["order"] > 0) & (coefs["ci_low"] <= 0) & (coefs["ci_high"] >= 0)]["term"].tolist()
    if null:
        out["factorial"].append(f"Terms whose interval includes 0: {', '.join(null)}."
                                + (" The filter (B) has no detectable effect: with this estimator and the "
                                   "group-sum aggregation, groups whose rewards are all equal have zero advantage "
                                   "and no normaliser counts them, so dropping them leaves the policy-gradient part "
                                   "of the update unchanged." if "B" in null and cfg.algo.aggregation == "group-sum"
                                   and cfg.algo.estimator in ("grpo", "dr_grpo", "rloo") else ""))
    st = a["gate_stability"]
    flips = st[st[["frac_point", "frac_sign", "frac_bounds"]].max(axis=1) < 1.0]
    if len(flips):
        out["gate"].append("Classifications that change between pilots: " + "; ".join(
            f"{r.condition} {r.term} (modal {r.modal_classification}, in "
            f"{max(r.frac_point, r.frac_sign, r.frac_bounds):.0%} "
            f"of pilots)" for r in flips.itertuples()) + ".")
    else:
        out["gate"].append("Every classification is the same in every pilot.")
    ref = st[st["term"] == "d_elicit"]
    for r in ref.itertuples():
        out["gate"].append(f"Reference gate ({r.condition}): points in {r.frac_reference_points:.0%} of pilots.")
    return out


# ----------------------------------------------------------------------------------------------
# figures


def figures(a: dict, out: Path, pool=None, which=("prior_sweep", "factorial", "power")) -> list[str]:
    """Three figures (PNG; PDF too with ``--pdf``): the prior sweep, the factorial, power.

    Colours, line styles and markers come from :mod:`tabsim.plotting` (one palette for the project).
    Intervals of a few thousandths are narrower than a marker on an axis spanning the whole pass@1
    range, so each figure shows them twice: as error bars and as numbers (half-widths or printed
    intervals), so the interval is visible whatever its size.

    ``pool``: where they are drawn (a :mod:`tabsim.plotting.helper` helper; default this process, and
    the written paths are returned); with a helper the paths come from its ``wait()``.
    """
    from tabsim.plotting import helper as _figure_process

    local = pool is None
    if local:
        pool = _figure_process.LocalFigures()
    # result objects travel as plain namespaces: unpickling tabsim.stats' classes would load the
    # statistics stack (scipy.stats, statsmodels) in the helper
    plain = lambda obj: types.SimpleNamespace(**{f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)})  # noqa: E731
    jobs = {
        "prior_sweep": lambda: pool.submit(f"{__name__}:figure_prior_sweep", arm_intervals(a["sweep_seeds"]),
                                           a["sweep_summary"], plain(a["crossover"]), a["mode_switch"],
                                           stem=out / "figures" / "prior_sweep"),
        "factorial": lambda: pool.submit(f"{__name__}:figure_factorial", a["fit"].coefficients, plain(a["ratio"]),
                                         stem=out / "figures" / "factorial"),
        "power": lambda: pool.submit(f"{__name__}:figure_power", a["power_curve"], a["power_mde"],
                                     stem=out / "figures" / "power"),
    }
    for name in which:
        jobs[name]()
    return pool.wait() if local else []


def arm_intervals(sp: pd.DataFrame, arms=("frozen", "random", "majority", "true")) -> pd.DataFrame:
    """Final pass@1 of each arm per prior: mean over seeds and the 95% t half-width (``arm, prior_strength,
    mean, half``)."""
    rows = []
    for arm in arms:
        g = sp.groupby("prior_strength")[f"acc_{arm}"].agg(["mean", "sem", "count"])
        half = g["sem"].fillna(0) * [_t_quantile(n) for n in g["count"]]
        rows.append(pd.DataFrame({"arm": arm, "prior_strength": g.index, "mean": g["mean"].to_numpy(),
                                  "half": half.to_numpy()}))
    return pd.concat(rows, ignore_index=True)


def figure_prior_sweep(arm_ci: pd.DataFrame, summ: pd.DataFrame, crossover, mode_switch: float):
    """The prior sweep: arms (``arm_ci``, from :func:`arm_intervals`), partition terms with the
    crossover, interval sizes."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import ScalarFormatter

    from tabsim.plotting import ARM_COLORS, ARM_STYLES, TERM_COLORS, TERM_MARKERS

    priors = sorted(arm_ci["prior_strength"].unique())
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(14, 4.9), gridspec_kw={"width_ratios": [1, 1.15, 0.8]})
    for i, (arm, g) in enumerate(arm_ci.groupby("arm", sort=False)):
        g = g.set_index("prior_strength")
        half = g["half"]
        ls, marker = ARM_STYLES[arm]
        hollow = arm == "frozen"
        ax1.errorbar(g.index + (i - 1.5) * 0.006, g["mean"], yerr=half, marker=marker, ms=7 if hollow else 4,
                     mfc="none" if hollow else ARM_COLORS[arm], capsize=3, elinewidth=1.2, label=arm,
                     color=ARM_COLORS[arm], ls=ls, zorder=3 if hollow else 2)
    ax1.set(xlabel="prior strength p_s (prior mass on the correct answers)", ylabel="final pass@1 (fraction correct)",
            title="arms: mean over seeds, 95% t interval", xticks=priors)
    ax1.legend(fontsize=7, loc="upper left", title="arm", title_fontsize=7)
    ax1.grid(alpha=0.3)
    terms = ("d_null", "d_elicit", "d_rd")
    for i, t in enumerate(terms):
        g = summ[summ["term"] == t]
        ax2.errorbar(g["prior_strength"] + (i - 1) * 0.006, g["estimate"],
                     yerr=[g["estimate"] - g["ci_low"], g["ci_high"] - g["estimate"]],
                     marker=TERM_MARKERS[t], ms=4, capsize=3, elinewidth=1.2, label=t, color=TERM_COLORS[t])
    curve = crossover.curve
    ax2.plot(curve["prior_strength"], curve["mean_d_elicit"], ls=":", color=TERM_COLORS["d_elicit"], lw=1,
             label="d_elicit, fine grid (step 0.05)")
    x = crossover
    if np.isfinite(x.estimate):
        ax2.axvline(x.estimate, color="k", lw=1.0, label=f"crossover estimate {x.estimate:.3f}")
        if np.isfinite(x.ci_low) and np.isfinite(x.ci_high):
            ax2.axvspan(x.ci_low, x.ci_high, color="k", alpha=0.12, lw=0,
                        label=f"crossover 95% CI [{x.ci_low:.3f}, {x.ci_high:.3f}]")
    ax2.axvline(mode_switch, color="k", lw=1.0, ls="--",
                label=f"p* = {mode_switch:.3f}: prior's mode turns correct")
    ax2.axhline(0, color="grey", lw=0.6)
    ax2.set(xlabel="prior strength p_s", ylabel="partition term (change of pass@1)",
            title="partition (95% t interval) and the crossover", xticks=priors)
    ax2.legend(fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    ax2.grid(alpha=0.3)
    for i, t in enumerate(terms):
        g = summ[summ["term"] == t]
        half = (g["ci_high"] - g["ci_low"]) / 2
        ax3.plot(g["prior_strength"], half.clip(lower=1e-6), marker=TERM_MARKERS[t], ms=4, color=TERM_COLORS[t],
                 label=t)
    ax3.set(yscale="log", xlabel="prior strength p_s", ylabel="95% CI half-width (pass@1, log scale)",
            title="interval sizes (bars left and centre)", xticks=priors)
    for fmt_axis in (ax3.yaxis.set_major_formatter, ax3.yaxis.set_minor_formatter):
        fmt_axis(ScalarFormatter())
    ax3.tick_params(axis="y", which="both", labelsize=6.5)
    ax3.legend(fontsize=7)
    ax3.grid(alpha=0.3, which="both")
    fig.tight_layout()
    return fig


def figure_factorial(coefs: pd.DataFrame, ratio):
    """The factorial: coefficients with printed intervals, the reported AC and the interaction ratio."""
    import matplotlib.pyplot as plt

    from tabsim.plotting import REFERENCE_COLOR, TERM_COLORS

    names = {"A": "reward", "B": "filter", "C": "prior"}
    coefs = coefs[coefs["order"] > 0].reset_index(drop=True)
    fig, (ax, axr) = plt.subplots(1, 2, figsize=(10.5, 3.9), gridspec_kw={"width_ratios": [2.3, 1]})
    y = np.arange(len(coefs))[::-1]
    ax.errorbar(coefs["estimate"], y, xerr=[coefs["estimate"] - coefs["ci_low"], coefs["ci_high"] - coefs["estimate"]],
                fmt="o", ms=4, capsize=4, elinewidth=1.5, color=TERM_COLORS["d_rd"], label="tabsim (95% t interval)")
    span = float(coefs[["ci_low", "ci_high"]].abs().to_numpy().max())
    for yi, r in zip(y, coefs.itertuples()):
        ax.annotate(f"{r.estimate:+.4f} [{r.ci_low:+.4f}, {r.ci_high:+.4f}]", (r.estimate, yi), xytext=(0, 6),
                    textcoords="offset points", fontsize=6.5, ha="center")
    ac = int(np.flatnonzero(coefs["term"].to_numpy() == "AC")[0])
    ax.plot([PAPER["coef_AC"]], [y[ac]], "x", ms=8, mew=2, color=REFERENCE_COLOR,
            label=f"paper: AC = {PAPER['coef_AC']}")
    labels = [f"{t}: " + " x ".join(names[c] for c in t) for t in coefs["term"]]
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_ylim(y.min() - 0.6, y.max() + 0.8)
    ax.set_xlim(-span * 1.35, span * 1.35)
    ax.axvline(0, color="grey", lw=0.6)
    ax.set(xlabel="coefficient on final pass@1 (+/-1 coding: half the high-minus-low contrast)",
           ylabel="factorial term",
           title="2x2x2 factorial: A = reward (TRUE/MAJORITY), B = filter (on/off), C = prior (0.80/0.35)")
    ax.title.set_fontsize(8.5)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3)
    axr.errorbar([ratio.ratio], [1], xerr=[[ratio.ratio - ratio.ci_low], [ratio.ci_high - ratio.ratio]], fmt="o",
                 ms=5, capsize=4, elinewidth=1.5, color=TERM_COLORS["d_rd"], label="tabsim (95% bootstrap CI)")
    axr.annotate(f"{ratio.ratio:.3f} [{ratio.ci_low:.3f}, {ratio.ci_high:.3f}]", (ratio.ratio, 1), xytext=(0, 8),
                 textcoords="offset points", fontsize=7, ha="center")
    axr.plot([PAPER["interaction_ratio"]], [0.6], "x", ms=8, mew=2, color=REFERENCE_COLOR,
             label=f"paper: {PAPER['interaction_ratio']}")
    axr.axvline(ADDITIVITY_THRESHOLD, color="k", ls="--", lw=0.8,
                label=f"pre-set threshold {ADDITIVITY_THRESHOLD} (above: non-additive)")
    hi = max(ratio.ci_high if np.isfinite(ratio.ci_high) else ratio.ratio, PAPER["interaction_ratio"], 0.25)
    axr.set(xlim=(0, hi * 1.3), ylim=(0.2, 1.6), yticks=[], xlabel="max |interaction| / max |main|",
            title=f"interaction ratio |{ratio.max_interaction_term}| / |{ratio.max_main_term}|")
    axr.title.set_fontsize(8.5)
    axr.legend(fontsize=6.5, loc="upper left")
    axr.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    return fig


def figure_power(pc: pd.DataFrame, mde: pd.DataFrame):
    """Power: interval half-width against the target, and the smallest effect detected with 80% power."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

    from tabsim.plotting import TERM_COLORS, TERM_MARKERS

    grid = sorted(pc["n_seeds"].unique())
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.9))
    for i, (t, g) in enumerate(pc.groupby("term", sort=False)):
        ax1.plot(g["n_seeds"], g["mean_half_width"], marker=TERM_MARKERS[t], ms=5 + 2 * (i == 0),
                 mfc="none" if i == 0 else TERM_COLORS[t], color=TERM_COLORS[t], ls="-" if i == 0 else "--",
                 label=f"{t} (pilot estimate {g['pilot_estimate'].iloc[0]:+.3f})")
    ax1.axhline(TARGET_HALF_WIDTH, color="k", ls=":", lw=1.0, label=f"target half-width {TARGET_HALF_WIDTH}")
    ax1.set(xscale="log", yscale="log", xlabel="seeds per condition (log scale)",
            ylabel="mean 95% t half-width (pass@1, log scale)",
            title=f"interval half-width at p_s={POWER_PRIOR:.2f} (simulated from the pilot)")
    for i, (t, g) in enumerate(mde.groupby("term", sort=False)):
        ax2.plot(g["n_seeds"], g["mde"], marker=TERM_MARKERS[t], ms=5 + 2 * (i == 0),
                 mfc="none" if i == 0 else TERM_COLORS[t], color=TERM_COLORS[t], ls="-" if i == 0 else "--",
                 label=f"{t} (pilot sd {g['pilot_sd'].iloc[0]:.4f})")
    ax2.set(xscale="log", yscale="log", xlabel="seeds per condition (log scale)",
            ylabel="smallest detectable difference (pass@1, log scale)",
            title="effect detected with 80% power (two-sided t, 5%)")
    for ax in (ax1, ax2):
        ax.title.set_fontsize(9)
        ax.xaxis.set_major_locator(FixedLocator(grid))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.get_major_formatter().set_scientific(False)
        ax.yaxis.set_minor_formatter(ScalarFormatter())
        ax.tick_params(axis="y", which="both", labelsize=6.5)
        ax.grid(alpha=0.3, which="both")
        ax.margins(y=0.12)
        ax.legend(fontsize=7, loc="lower left")  # the curves fall from top left to bottom right
    fig.tight_layout()
    return fig


def _t_quantile(n: int) -> float:
    from scipy import stats as sps

    return float(sps.t.ppf(0.5 + CI_LEVEL / 2, max(int(n) - 1, 1)))


# ----------------------------------------------------------------------------------------------
# report


def _fmt(x, nd=3) -> str:
    if x is None:
        return "-"
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    if isinstance(x, (float, np.floating)):
        if np.isnan(x):
            return "n/a"
        if np.isinf(x):
            return "inf" if x > 0 else "-inf"
        return f"{x:.{nd}f}"
    return str(x)


def _ci(lo, hi, nd=3) -> str:
    return f"[{_fmt(lo, nd)}, {_fmt(hi, nd)}]"


def md_table(frame: pd.DataFrame, nd: int = 3) -> str:
    cols = list(frame.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(_fmt(v, nd) for v in row) + " |")
    return "\n".join(lines)


def render_report(a: dict, cmp: pd.DataFrame, reasons: dict, s: Settings, cfg, wall: float, prov: dict) -> str:
    """``report.md``: the headline table, every point beside the paper, then one section per study."""
    summ, fit, ratio, x = a["sweep_summary"], a["fit"], a["ratio"], a["crossover"]
    every = compare_every_point(a, s)
    L = []
    L.append("# tabsim reproduce: the reference study (arXiv 2606.05932)\n")
    L.append(f"Preset `{s.preset}`, scale `{s.scale}`: N={cfg.task.n_prompts} prompts, K={cfg.task.n_answers} answers "
             f"(k={cfg.task.n_correct} correct), G={cfg.train.group_size}, batch {cfg.train.batch_size}; "
             f"{s.seeds} seeds x {s.steps} steps per condition (sweep, crossover grid, gate, families, power), "
             f"{s.factorial_seeds} seeds x {s.factorial_steps} steps per factorial cell. "
             f"Wall time {wall:.1f} s for the studies (compilation and figures included)"
             + (f", {prov['process_seconds']:.1f} s since the process started (imports included)"
                if prov.get("process_seconds") else "") + ". "
             f"All intervals are {CI_LEVEL:.0%}: Student t over seeds for the partition terms and Fieller for "
             f"their ratios (with {s.seeds} seeds the BCa bootstrap under-covers: about 0.88 against t's 0.95 on "
             f"these very differences, see experiments/interval_coverage); "
             f"seeds are the independent unit (arms of one seed share their random numbers). "
             f"pass@1 is the exact policy mass on the correct answers.\n")
    L.append("## Headline numbers: tabsim beside the paper\n")
    L.append("`noise SE` is the standard error of the difference, assuming the paper's 8 seeds had tabsim's "
             "per-seed spread: `se * sqrt(1 + n / 8)`; a difference beyond 1.96 of it is flagged.\n")
    t = cmp.assign(interval=[_ci(lo, hi) for lo, hi in zip(cmp.ci_low, cmp.ci_high)])
    t = t[["label", "paper", "tabsim", "interval", "noise_se", "z", "beyond_seed_noise"]]
    t.columns = ["quantity", "paper", "tabsim", "tabsim 95% CI", "noise SE", "z", "differs beyond seed noise"]
    L.append(md_table(t) + "\n")
    changes = settings_changes(s, cfg)
    if changes:
        L.append("**This run changes the paper's settings** (" + "; ".join(changes) + "). The headline numbers "
                 "belong to the paper's settings, so differences here are expected and say nothing about the "
                 "reproduction; `tabsim reproduce` without --scale, --steps or --preset runs the paper's "
                 "settings.\n")
    agree = cmp[~cmp.beyond_seed_noise]
    if len(agree):
        L.append("Within the seed noise: " + ", ".join(agree.label) + ".\n")
    for row in cmp[cmp.beyond_seed_noise].itertuples():
        L.append(f"- **{row.label} differs**: tabsim {row.tabsim:.3f} (CI {_ci(row.ci_low, row.ci_high)}) vs the "
                 f"paper's {row.paper:.3f}, a difference of {row.difference:+.3f} = {row.z:+.1f} noise SE. "
                 f"Reason: {reasons[row.quantity]}.")
    L.append("")

    L.append("## Every point beside the paper\n")
    L.append("Every point of the prior sweep and every factorial term. `reported`: a number the paper gives; "
             "`implied`: what its design or its numbers entail (on-policy updates without a clip give d_null = 0; "
             f"d_elicit is negative below the crossover p* = {a['mode_switch']:.3f} and positive above, so the rd "
             "fraction is above 1 below it and below 1 above; |AC| / 0.385 is the largest main coefficient and "
             "|AC| bounds the other interactions when AC is the largest interaction). `agrees`: the tabsim interval "
             "contains the paper's value or lies on its side (`undetermined` when it straddles the claim); reported "
             "values use the seed-noise rule of the table above.\n")
    ev = every.assign(interval=[_ci(lo, hi) for lo, hi in zip(every.ci_low, every.ci_high)])
    ev = ev[["section", "p_s", "term", "paper", "paper_kind", "tabsim", "interval", "agrees"]].rename(
        columns={"interval": "tabsim 95% CI", "paper_kind": "paper's number is"})
    ev["p_s"] = [("" if not np.isfinite(p) else f"{p:.2f}") for p in ev["p_s"]]
    L.append(md_table(ev) + "\n")
    n_no = int((every.agrees == "no").sum())
    n_und = int((every.agrees == "undetermined").sum())
    L.append(f"{len(every) - n_no - n_und} of {len(every)} comparisons agree, {n_no} disagree, "
             f"{n_und} undetermined.\n")

    L.append("## 1. Prior sweep and the crossover\n")
    wide = summ.pivot(index="prior_strength", columns="term", values="estimate")
    sp = a["sweep_seeds"].groupby("prior_strength")[["acc_frozen", "acc_random", "acc_majority", "acc_true"]].mean()
    rows = []
    for p in wide.index:
        de, dr, rf = (_term(summ, k, prior_strength=float(p)) for k in ("d_elicit", "d_rd", "rd_fraction"))
        fi = a["fieller"].set_index("prior_strength").loc[p]
        rows.append({"p_s": p, **{c.removeprefix("acc_"): sp.loc[p, c] for c in sp.columns},
                     "d_null": wide.loc[p, "d_null"], "d_elicit": de.estimate,
                     "d_elicit CI": _ci(de.ci_low, de.ci_high),
                     "d_rd": dr.estimate, "d_rd CI": _ci(dr.ci_low, dr.ci_high),
                     "rd fraction": rf.estimate, "Fieller CI": _ci(fi.fieller_low, fi.fieller_high, 2)})
    L.append(md_table(pd.DataFrame(rows)) + "\n")
    L.append("The rd fraction is d_rd / d_naive; the Fieller interval is the "
             "exact t-based set for a ratio of means (unbounded, `-inf..inf`, when d_naive is not significantly "
             "non-zero).\n")
    if np.isfinite(x.estimate):
        L.append(f"**Crossover** (first root of mean d_elicit on the grid {GRID_PRIORS[0]:.2f}..{GRID_PRIORS[-1]:.2f} "
                 f"step 0.05, paired percentile bootstrap): p_s = {x.estimate:.3f}, CI {_ci(x.ci_low, x.ci_high)}; "
                 f"{x.root_fraction:.0%} of resamples have a root on the grid. d_elicit is {x.direction} through it"
                 + (" (negative below: majority reward amplifies a wrong mode there)" if x.direction == "increasing"
                    else "") + f". For reference, the prior's mode "
                 f"becomes a correct answer at p* = k(1+fK)/(k(1+fK)+K-k) = {a['mode_switch']:.3f}.\n")
    else:
        L.append("**Crossover**: mean d_elicit does not change sign on the grid at this size.\n")
    notes = remarks(a, cfg)
    L += [n + "\n" for n in notes["sweep"]]

    L.append("## 2. The 2x2x2 factorial\n")
    L.append(f"Seed-level OLS `{fit.formula}` on final pass@1 ({s.factorial_seeds} seeds per cell), "
             "A = reward (TRUE +1, MAJORITY -1), B = dynamic-sampling filter (on +1, off -1), C = prior "
             f"({STRONG_PRIOR} +1, {WEAK_PRIOR} -1). A coefficient is half the high-minus-low contrast.\n")
    an = fit.anova.reset_index().rename(columns={"index": "source"})
    L.append("ANOVA (type 3):\n\n" + md_table(an, 4) + "\n")
    co = fit.coefficients[["term", "estimate", "std_err", "ci_low", "ci_high", "p_value", "p_holm"]]
    L.append("Coefficients (Holm-adjusted p over the 7 effects):\n\n" + md_table(co, 4) + "\n")
    L.append(f"**Interaction ratio** max|interaction| / max|main| = |{ratio.max_interaction_term}| / "
             f"|{ratio.max_main_term}| = {ratio.ratio:.3f}, bootstrap CI {_ci(ratio.ci_low, ratio.ci_high)} "
             f"(seeds resampled within cells, {ratio.n_resamples} resamples). Decision against the pre-set "
             f"threshold {ADDITIVITY_THRESHOLD}: **{ratio.decision}** (interval rule); the reference's point rule "
             f"says {ratio.reference_decision}.\n")
    L += [n + "\n" for n in notes["factorial"]]

    L.append("## 3. Points-vs-bounds pilot gate\n")
    L.append(f"One pilot = {s.pilot_seeds} seeds. A term is a point when its t CI excludes 0 and is narrower than "
             f"the pre-set tolerance {GATE_TOLERANCE}, a sign when it excludes 0 but is wider, bounds otherwise "
             "(then the CI intersected with [-1, 1] is the bound). The reference gate: points iff the percentile "
             "CI of d_elicit excludes 0. Strong: p_s = 0.80 with the format boost; uniform: p_s = k/K = "
             f"{uniform_prior(cfg):.2f} with format_boost 0 (every answer equally likely, near the crossover).\n")
    gp = a["gate_pilot"][["condition", "term", "estimate", "ci_low", "ci_high", "width", "classification",
                          "bound_low", "bound_high", "reference_gate"]]
    L.append(md_table(gp) + "\n")
    st = a["gate_stability"][["condition", "term", "frac_point", "frac_sign", "frac_bounds", "modal_classification",
                              "frac_reference_points", "n_replicates"]]
    L.append(f"Stability over {s.pilot_replicates} disjoint pilots of {s.pilot_seeds} seeds (t CIs): "
             "fraction of pilots giving each class.\n\n" + md_table(st, 2) + "\n")
    L += [n + "\n" for n in notes["gate"]]

    L.append("## 4. Simulated families and verdicts\n")
    L.append(f"Rule (SPEC section 3): elicitation share > {SHARE_THRESHOLD} -> ELICITATION_DOMINATED, else rd share > "
             f"{SHARE_THRESHOLD} -> REWARD_DESIGN_DOMINATED, else MIXED; on the Fieller intervals a deciding share "
             f"that straddles {SHARE_THRESHOLD} gives INCONCLUSIVE. Families use fresh seeds "
             f"({FAMILY_SEED0}..{FAMILY_SEED0 + s.seeds - 1}).\n")
    v = a["verdicts"].assign(elicitation_ci=lambda d: [_ci(lo, hi) for lo, hi in
                                                       zip(d.elicitation_ci_low, d.elicitation_ci_high)],
                             rd_ci=lambda d: [_ci(lo, hi) for lo, hi in zip(d.rd_ci_low, d.rd_ci_high)])
    v = v[["family", "elicitation_share", "elicitation_ci", "rd_share", "rd_ci", "verdict", "point_verdict", "reason"]]
    L.append(md_table(v) + "\n")

    L.append(f"## 5. Power at p_s = {POWER_PRIOR:.2f}\n")
    L.append(f"From a pilot of {s.power_seeds} seeds, 1000 simulated studies per seed count (t intervals).\n")
    pc = a["power_curve"][["term", "n_seeds", "pilot_estimate", "mean_half_width", "detection_rate"]]
    L.append(md_table(pc, 4) + "\n")
    for term, rec in a["power_recommend"].items():
        L.append(f"- {term}: **{rec['n_seeds']} seeds** for a half-width of {TARGET_HALF_WIDTH} "
                 f"(predicted {rec['predicted_half_width']:.4f}; {rec['note']}).")
    L.append("")
    mde = a["power_mde"].pivot(index="n_seeds", columns="term", values="mde").reset_index()
    L.append("Smallest true difference detected with 80% power by a two-sided t test at 5%, from the pilot's "
             "per-seed spread (`figures/power`):\n\n" + md_table(mde, 4) + "\n")

    L.append("## Files and provenance\n")
    L.append("`summary.json` (headline numbers), `tables/*.csv` (every table above), `data/*.parquet|csv` "
             "(tidy run frames, one row per condition x seed x arm x eval step), `figures/*.png` (and `.pdf` with `--pdf`), "
             "`config.json` (settings and designs), `provenance.json`.\n")
    L.append(f"tabsim {prov.get('tabsim_version')}, commit `{prov.get('git_commit')}`, jax {prov.get('jax')} on "
             f"{prov.get('backend')}, {prov.get('time_utc')}.\n")
    return "\n".join(L)


def summary_json(a: dict, cmp: pd.DataFrame, s: Settings) -> dict:
    """``summary.json``: the promised schema plus the intervals behind every decision."""
    sp = a["sweep_seeds"]
    means = sp.groupby("prior_strength")[["acc_frozen", "acc_random", "acc_majority", "acc_true", "d_null",
                                         "d_elicit", "d_rd", "d_naive"]].mean()
    summ = a["sweep_summary"]
    sweep = []
    for p, r in means.iterrows():
        sweep.append({"prior_strength": float(p), **{k: float(val) for k, val in r.items()},
                      "rd_fraction": float(_term(summ, "rd_fraction", prior_strength=float(p)).estimate)})
    coefs = a["fit"].coefficients.set_index("term")
    terms = ("A", "B", "C", "AB", "AC", "BC", "ABC")
    fams = []
    ver = a["verdicts"].set_index("family")
    for name, p in (("strong", STRONG_PRIOR), ("weak", WEAK_PRIOR)):
        fams.append({"name": name, "prior_strength": p, "elicitation_share": float(ver.loc[name, "elicitation_share"]),
                     "rd_share": float(ver.loc[name, "rd_share"]), "verdict": str(ver.loc[name, "verdict"])})
    x, ratio = a["crossover"], a["ratio"]
    return {
        "prior_sweep": sweep,
        "factorial": {"coefficients": {t: float(coefs.loc[t, "estimate"]) for t in terms},
                      "interaction_ratio": float(ratio.ratio)},
        "families": fams,
        "intervals": {
            "prior_sweep": summ[summ["term"].isin(["d_null", "d_elicit", "d_rd", "d_naive", "rd_fraction"])][
                ["prior_strength", "term", "estimate", "ci_low", "ci_high"]].to_dict("records"),
            "factorial_coefficients": {t: [float(coefs.loc[t, "ci_low"]), float(coefs.loc[t, "ci_high"])]
                                       for t in terms},
            "interaction_ratio": {"ci": [ratio.ci_low, ratio.ci_high], "threshold": ratio.threshold,
                                  "decision": ratio.decision, "reference_decision": ratio.reference_decision},
            "families": a["verdicts"].to_dict("records"),
        },
        "crossover": {"estimate": x.estimate, "ci": [x.ci_low, x.ci_high], "root_fraction": x.root_fraction,
                      "mode_switch_prior": a["mode_switch"]},
        "gate": a["gate_pilot"][["condition", "term", "classification", "ci_low", "ci_high", "reference_gate"]]
        .to_dict("records"),
        "gate_stability": a["gate_stability"].to_dict("records"),
        "power": {"target_half_width": TARGET_HALF_WIDTH, "recommended": a["power_recommend"]},
        "paper_comparison": cmp.to_dict("records"),
        "paper_comparison_every_point": compare_every_point(a, s).replace({np.nan: None}).to_dict("records"),
        "interval_method": INTERVAL_METHOD,
        "settings": dataclasses.asdict(s),
    }


# ----------------------------------------------------------------------------------------------
# driver


def _process_seconds() -> float | None:
    """Seconds since this process started (Linux ``/proc``), so start-up and imports are counted."""
    import os

    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        start = int(fields[19]) / os.sysconf("SC_CLK_TCK")
        return float(Path("/proc/uptime").read_text().split()[0]) - start
    except (OSError, ValueError, IndexError):
        return None


def reproduce(out: str | Path, *, scale: str = "default", seeds: int | None = None, steps: int | None = None,
              preset: str = "paper", fmt: str = "parquet", progress: bool = True,
              log: Callable[[str], None] | None = None, n_resamples: int = 2000, overwrite: bool = False,
              resume: bool = False, executor=None) -> dict:
    """Run the five studies, write ``out``'s report, figures, data and provenance; return the summary.

    Args:
      out: output folder, published whole when everything is written (a run store: see
        :mod:`tabsim.runtime.store`); a non-empty ``out`` is refused unless ``overwrite`` or ``resume``.
      scale: ``"default"`` (the paper's sizes) or ``"heavy"`` (the reference's heavy settings).
      seeds, steps: override seeds per condition / training steps of every study.
      preset: the preset the studies start from (must train the four partition arms).
      fmt: data format, ``"parquet"`` or ``"csv"``.
      progress: progress bar and stage lines (on stderr).
      log: where stage lines go (default stderr when ``progress``).
      n_resamples: bootstrap resamples of every interval.
      overwrite: replace a non-empty ``out`` (kept until the new run is published).
      resume: continue an interrupted run into ``out`` (finished chunks are reused).
      executor: where the training chunks run (default in this process; e.g.
        :class:`tabsim.runtime.dask.DaskExecutor`); the results are the same.

    Returns:
      The ``summary.json`` content.
    """
    t0 = time.perf_counter()
    if fmt not in ("parquet", "csv"):
        raise ValueError(f"fmt: unknown data format {fmt!r}; allowed: csv, parquet")
    s = settings(scale=scale, seeds=seeds, steps=steps, preset=preset, n_resamples=n_resamples)
    out = Path(out)
    say = log or ((lambda m: click.echo(m, err=True)) if progress else (lambda m: None))
    from tabsim.config import resolve

    designs = build_designs(s)  # validates every study's config before anything is written
    cfg = resolve(s.base(s.steps))
    from tabsim.runtime.store import RunStore, job_key

    key = job_key("reproduce", dataclasses.asdict(s), fmt)
    with RunStore(out, overwrite=overwrite, resume=resume, key=key, description="tabsim reproduce") as store:
        if store.complete:
            say(f"nothing to resume: {out} already holds this reproduction, complete")
            summary = json.loads((out / "summary.json").read_text())
        else:
            summary = _reproduce_into(store.dir, designs, s, cfg, fmt, progress, say, t0, executor=executor)
    if not store.complete:
        say(f"[{time.perf_counter() - t0:5.1f}s] published {out}/")
    return summary


def _reproduce_into(dest: Path, designs: dict, s: Settings, cfg, fmt: str, progress: bool, say,
                    t0: float, executor=None) -> dict:
    """The body of :func:`reproduce`: train, analyse and write everything into ``dest`` (a staging folder)."""
    from tabsim.plotting import helper as _figure_process
    from tabsim.plotting.helper import warm_up

    # the figures are drawn by a helper process that loads matplotlib while the engine trains; this
    # process loads the statistics stack meanwhile (XLA releases the GIL while it computes)
    with _figure_process.start((__name__,)) as pool:
        warm = warm_up("scipy.stats", "statsmodels.regression.linear_model", "statsmodels.stats.anova",
                       draw=isinstance(pool, _figure_process.LocalFigures))
        return _train_and_report(dest, designs, s, cfg, fmt, progress, say, t0, executor, warm, pool)


def _train_and_report(dest: Path, designs: dict, s: Settings, cfg, fmt: str, progress: bool, say, t0: float,
                      executor, warm, pool) -> dict:
    from tabsim.studies.factorial import run_designs
    from tabsim.files.provenance import provenance
    from tabsim.files.atomic import write_frame, write_json

    say(f"[{time.perf_counter() - t0:5.1f}s] tabsim reproduce: 5 studies, preset {s.preset}, scale {s.scale}")
    results = run_designs(list(designs.values()), progress=progress, desc="training (compile + run)",
                          executor=executor)
    frames = {name: r.frame for name, r in zip(designs, results)}
    t_train = time.perf_counter() - t0
    say(f"[{t_train:5.1f}s] trained {results[0].provenance['n_units_job']} seed x condition units in "
        f"{results[0].provenance['n_chunks_job']} chunks, "
        f"{results[0].provenance['n_programs_job']} compiled program(s)")
    warm.join()
    a = analyze(frames, s, cfg, on_section=lambda name, part: figures(part, dest, pool, which=(name,)))
    for name, fr in frames.items():  # while the helper draws
        write_frame(dest / "data" / f"{name}.{fmt}", fr)
    cmp = compare_with_paper(a, s)
    reasons = difference_reasons(cmp, a, s, cfg)
    t_stats = time.perf_counter() - t0
    say(f"[{t_stats:5.1f}s] statistics done")
    tables = {
        "partition_summary": a["sweep_summary"], "rd_fraction_fieller": a["fieller"],
        "crossover_curve": a["crossover"].curve, "factorial_coefficients": a["fit"].coefficients,
        "factorial_anova": a["fit"].anova.reset_index().rename(columns={"index": "source"}),
        "gate_pilot": a["gate_pilot"], "gate_stability": a["gate_stability"], "families": a["families_summary"],
        "verdicts": a["verdicts"], "power_curve": a["power_curve"], "paper_comparison": cmp,
        "paper_comparison_every_point": compare_every_point(a, s), "power_mde": a["power_mde"],
        "partition_seeds": a["sweep_seeds"],
    }
    for name, tab in tables.items():
        write_frame(dest / "tables" / f"{name}.csv", tab)
    figs = pool.wait()
    say(f"[{time.perf_counter() - t0:5.1f}s] figures written")
    wall = time.perf_counter() - t0
    prov = provenance(command="tabsim reproduce", wall_seconds=round(wall, 3), seconds_training=round(t_train, 3),
                      seconds_statistics=round(t_stats - t_train, 3), config_hash=cfg.digest(),
                      n_units=results[0].provenance["n_units_job"], n_chunks=results[0].provenance["n_chunks_job"],
                      n_programs=results[0].provenance["n_programs_job"], argv=sys.argv,
                      process_seconds=_process_seconds())
    write_json(dest / "provenance.json", prov)
    write_json(dest / "config.json", {"settings": dataclasses.asdict(s),
                                     "designs": {n: r.config for n, r in zip(designs, results)},
                                     "constants": {"ci_level": CI_LEVEL, "additivity_threshold": ADDITIVITY_THRESHOLD,
                                                   "share_threshold": SHARE_THRESHOLD, "gate_tolerance": GATE_TOLERANCE,
                                                   "target_half_width": TARGET_HALF_WIDTH, "paper": PAPER}})
    summary = summary_json(a, cmp, s)
    summary["figures"] = [str(Path(p).relative_to(dest)) for p in figs]
    summary["wall_seconds"] = round(wall, 3)
    write_json(dest / "summary.json", summary)
    from tabsim.files.atomic import atomic_write_text

    atomic_write_text(dest / "report.md", render_report(a, cmp, reasons, s, cfg, wall, prov))  # last: marks completion
    say(f"[{time.perf_counter() - t0:5.1f}s] wrote report.md")
    return summary


def __getattr__(name: str):
    if name == "command":  # the CLI command lives in a light module (tabsim.cli.reproduce)
        from tabsim.cli.reproduce import command

        return command
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
