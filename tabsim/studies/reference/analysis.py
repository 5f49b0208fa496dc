"""The reference study's statistics: every number of the report, from the studies' tidy frames."""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator

import numpy as np
import pandas as pd

from tabsim.studies.reference.design import (
    ADDITIVITY_THRESHOLD,
    CI_LEVEL,
    GATE_TOLERANCE,
    INTERVAL_METHOD,
    POWER_SEEDS_GRID,
    SHARE_THRESHOLD,
    STRONG_PRIOR,
    TARGET_HALF_WIDTH,
    WEAK_PRIOR,
    Settings,
    mode_switch_prior,
)


def analyze(frames: dict, s: Settings, cfg) -> dict:
    """Every statistic of the report, from the studies' tidy frames (the last of :func:`sections`)."""
    for _, part in sections(frames, s, cfg):
        pass
    return part


def sections(frames: dict, s: Settings, cfg) -> Iterator[tuple[str, dict]]:
    """Every statistic of the report, section by section as each is ready: ``(name, results so far)`` for
    ``"prior_sweep"``, ``"factorial"`` and ``"power"`` (a figure's statistics: the caller may draw it, or
    write a table, meanwhile), then ``("all", every statistic)``. Nothing here writes or draws."""
    # the statistics stack (scipy.stats, statsmodels) is imported on use, in each section below: the
    # command's warm-up thread loads it while the engine trains, and the figure helper, which
    # imports this module through the figures, never needs it
    R = s.n_resamples
    sweep, fact, power, rest = {}, {}, {}, {}
    # the factorial's resampling is numpy work that releases the GIL: a second thread does it while this one
    # does the prior sweep, then power, the gate and the families. Its section is handed on as soon as it is
    # done and this thread is between sections (with many seeds, after the others: this thread does not sit
    # idle waiting for it); the result is the same mapping in the same order whatever the timing.
    with ThreadPoolExecutor(1, thread_name_prefix="tabsim-factorial") as side:
        factorial = side.submit(_factorial, frames["factorial"], R)

        def factorial_section(wait: bool) -> list:
            if not fact and (wait or factorial.done()):
                fact.update(factorial.result())
                return [("factorial", {**sweep, **fact, **power})]
            return []

        _prior_sweep(frames, R, cfg, sweep)
        yield "prior_sweep", sweep
        yield from factorial_section(wait=False)
        # power before the gate and the families: its figure, the last, is drawn while they are computed
        _power(frames, s, power)
        yield "power", {**sweep, **fact, **power}
        yield from factorial_section(wait=False)
        _gate_families(frames, s, R, rest)
        yield from factorial_section(wait=True)
    yield "all", {**sweep, **fact, **power, **rest}


def _prior_sweep(frames: dict, R: int, cfg, out: dict) -> None:
    """The prior sweep's partition, Fieller intervals and crossover, into ``out``."""
    from tabsim import stats  # lazy: see analyze

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


def _factorial(frame: pd.DataFrame, R: int) -> dict:
    """``{"fit", "ratio"}``: the 2x2x2 factorial's fit and its interaction ratio with ``R`` resamples."""
    from tabsim import stats  # lazy: see analyze

    fit = stats.fit_factorial(frame, response="pass1", factors=["reward", "filter", "prior"],
                              levels={"reward": ("true", "majority"), "filter": ("on", "off"),
                                      "prior": (STRONG_PRIOR, WEAK_PRIOR)}, ci=CI_LEVEL)
    return {"fit": fit, "ratio": stats.interaction_ratio(fit, threshold=ADDITIVITY_THRESHOLD, ci=CI_LEVEL,
                                                         n_resamples=R)}


def _gate_families(frames: dict, s: Settings, R: int, out: dict) -> None:
    """The gate and the families, into ``out``."""
    from tabsim import stats  # lazy: see analyze

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
    # families
    fsp = stats.seed_partition(frames["families"], by=["family"])
    fsum = stats.summarize_partition(fsp, by=["family"], ci=CI_LEVEL, method=INTERVAL_METHOD, n_resamples=R)
    out["families_summary"] = fsum
    out["verdicts"] = stats.share_verdicts(fsum, by=["family"], threshold=SHARE_THRESHOLD)


def _power(frames: dict, s: Settings, out: dict) -> None:
    """The power analysis, into ``out``."""
    from tabsim import stats  # lazy: see analyze

    psp = stats.seed_partition(frames["power"], by=["prior_strength"])
    curves = [stats.power_curve(psp, seeds_grid=POWER_SEEDS_GRID, n_sim=1000, term=t, ci=CI_LEVEL, method="t")
              for t in ("d_elicit", "d_rd")]
    out["power_curve"] = pd.concat(curves, ignore_index=True)
    out["power_recommend"] = {t: stats.recommend_seeds(c, TARGET_HALF_WIDTH)
                              for t, c in zip(("d_elicit", "d_rd"), curves)}
    out["power_pilot"] = psp
    out["power_mde"] = minimum_detectable_effects(psp, POWER_SEEDS_GRID)


def minimum_detectable_effects(seed_df: pd.DataFrame, seeds_grid, *, power: float = 0.80) -> pd.DataFrame:
    """Smallest true difference a two-sided t test at ``1 - CI_LEVEL`` detects with ``power``, per seed count.

    ``mde(n) = (t_{n-1, (1+ci)/2} + t_{n-1, power}) * sd / sqrt(n)`` with ``sd`` the pilot's per-seed
    standard deviation of the term (normal approximation to the noncentral t).
    """
    from tabsim.stats import dist  # lazy: see analyze

    rows = []
    for term in ("d_elicit", "d_rd"):
        sd = float(seed_df[term].std(ddof=1))
        for n in seeds_grid:
            q = dist.t_ppf(0.5 + CI_LEVEL / 2, n - 1) + dist.t_ppf(power, n - 1)
            rows.append({"term": term, "n_seeds": int(n), "pilot_sd": sd, "power": power,
                         "mde": float(q * sd / math.sqrt(n)), "pilot_estimate": float(seed_df[term].mean())})
    return pd.DataFrame(rows)


def term_row(summary: pd.DataFrame, term: str, **where) -> pd.Series:
    """The row of ``term`` in a summary table where every column of ``where`` has its value."""
    m = summary["term"] == term
    for k, val in where.items():
        m &= np.isclose(summary[k], val) if isinstance(val, float) else summary[k] == val
    return summary[m].iloc[0]


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


def _t_quantile(n: int) -> float:
    from tabsim.stats import dist  # lazy: see analyze

    return float(dist.t_ppf(0.5 + CI_LEVEL / 2, max(int(n) - 1, 1)))
