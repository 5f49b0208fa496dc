"""Study: coverage of Student t and BCa intervals with 8 seeds, on the reproduction's own differences.

Question: ``tabsim reproduce`` reports 95% intervals of the partition terms over 8 seeds per
condition (the reference study's seed count). Which interval method has its nominal coverage there?

Design: a *pool* of seeds of the ``paper`` preset at the reference priors p_s in {0.20, 0.35, 0.50,
0.65, 0.80} (200 steps, 512 seeds per prior; ``--quick``: 128 seeds, 100 steps) gives, per prior and
term, the empirical distribution of the per-seed paired differences ``d_null, d_elicit, d_rd,
d_naive``. That distribution is known exactly, its mean included. Each simulated study draws 8
seeds from the pool (with replacement, i.e. i.i.d. from the known distribution), builds the 95%
interval of the mean with :func:`tabsim.stats.mean_interval` (``method="t"`` and ``method="bca"``
with 2000 resamples, as the reproduction would), and records whether it covers the pool mean.
Coverage is the fraction of ``n_studies`` studies covered; its binomial standard error is
``sqrt(0.95 * 0.05 / n_studies)`` at the nominal level.

    python experiments/interval_coverage/run.py [--quick] [--out DIR]

Writes ``coverage.csv`` (one row per prior x term x method: coverage, its standard error, mean
width, the pool's skewness and excess kurtosis), ``results.parquet`` (the pool's run frame),
``coverage.png/.pdf`` and ``summary.json``.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as sps

import tabsim as ts
from tabsim.studies.scripts import study_args, study_store, write_study
from tabsim.files.atomic import write_frame

OUT = Path(__file__).resolve().parent / "out"
PRIORS = [0.2, 0.35, 0.5, 0.65, 0.8]
TERMS = ("d_null", "d_elicit", "d_rd", "d_naive")
METHODS = ("t", "bca")
N_SEEDS = 8  # seeds per simulated study: the reproduction's
LEVEL = 0.95


def coverage(pool: np.ndarray, *, n_studies: int, n_seeds: int = N_SEEDS, level: float = LEVEL,
             n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Coverage of the pool mean by t and BCa intervals of ``n_studies`` i.i.d. draws of ``n_seeds``.

    Args:
      pool: per-seed values ``[pool_seeds]``; their empirical distribution is the known truth.
      n_studies: simulated studies.
      n_seeds: seeds per study.
      level: two-sided interval level.
      n_resamples: bootstrap resamples of the BCa interval.
      seed: random state of the draws (study ``i``'s bootstrap uses random_state ``i``).

    Returns:
      DataFrame, one row per method: ``method, coverage, coverage_se, mean_width, n_studies``.
    """
    from tabsim.stats import mean_interval

    truth = float(pool.mean())
    rng = np.random.default_rng(seed)
    hits = {m: 0 for m in METHODS}
    widths = {m: 0.0 for m in METHODS}
    for i in range(n_studies):
        x = rng.choice(pool, size=n_seeds, replace=True)
        if np.ptp(x) == 0:  # a degenerate draw: every interval is the point itself
            for m in METHODS:
                hits[m] += x[0] == truth
            continue
        for m in METHODS:
            iv = mean_interval(x, ci=level, method=m, n_resamples=n_resamples, random_state=i)
            hits[m] += iv.low <= truth <= iv.high
            widths[m] += iv.high - iv.low
    se = float(np.sqrt(level * (1 - level) / n_studies))
    return pd.DataFrame([{"method": m, "coverage": hits[m] / n_studies, "coverage_se": se,
                          "mean_width": widths[m] / n_studies, "n_studies": n_studies} for m in METHODS])


def pool_partition(seeds: int, steps: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Train the pool and return its run frame and per-seed partition (one row per prior x seed)."""
    from tabsim.stats import seed_partition

    res = ts.run({"preset": "paper", "train": {"seeds": seeds, "steps": steps, "metrics": ["pass1"]},
                  "sweep": {"prior_strength": PRIORS}}, progress=False)
    return res.frame, seed_partition(res.frame, by=["prior_strength"])


def coverage_table(sp: pd.DataFrame, *, n_studies: int, n_resamples: int = 2000) -> pd.DataFrame:
    rows = []
    for k, (p, g) in enumerate(sp.groupby("prior_strength")):
        for j, term in enumerate(TERMS):
            pool = g[term].to_numpy(float)
            cov = coverage(pool, n_studies=n_studies, n_resamples=n_resamples, seed=100 * k + j)
            rows.append(cov.assign(prior_strength=p, term=term, pool_seeds=pool.size,
                                   skewness=float(sps.skew(pool)), excess_kurtosis=float(sps.kurtosis(pool))))
    cols = ["prior_strength", "term", "method", "coverage", "coverage_se", "mean_width", "n_studies", "pool_seeds",
            "skewness", "excess_kurtosis"]
    return pd.concat(rows, ignore_index=True)[cols]


def figure(table: pd.DataFrame):
    import matplotlib.pyplot as plt

    from tabsim.plotting import TERM_COLORS, TERM_MARKERS

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), sharey=True)
    for ax, m in zip(axes, METHODS):
        sub = table[table.method == m]
        for i, (term, g) in enumerate(sub.groupby("term", sort=False)):
            x = g.prior_strength + (i - 1.5) * 0.008
            ax.errorbar(x, g.coverage, yerr=1.96 * g.coverage_se, fmt=TERM_MARKERS.get(term, "o"), ms=4, capsize=2,
                        color=TERM_COLORS[term], label=term)
        ax.axhline(LEVEL, color="k", lw=0.8, ls="--", label=f"nominal {LEVEL:.0%}")
        ax.set(xlabel="prior strength p_s", title=f"{'Student t' if m == 't' else 'BCa bootstrap'}, {N_SEEDS} seeds",
               xticks=PRIORS)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("coverage of the pool mean\n(bars: 95% binomial interval)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False)
    return fig


def main(argv=None):
    args = study_args(__doc__, "128 pool seeds, 100 steps, 400 studies per cell (smoke run)", OUT, argv)
    with study_store(args, "experiments/interval_coverage") as out:
        seeds, steps, n_studies = (128, 100, 400) if args.quick else (512, 200, 2000)
        t0 = time.perf_counter()
        frame, sp = pool_partition(seeds, steps)
        table = coverage_table(sp, n_studies=n_studies)
        write_frame(out / "coverage.csv", table)
        agg = table.groupby("method")["coverage"].agg(["mean", "min", "max"])
        summary = {"study": "interval_coverage", "n_seeds_per_study": N_SEEDS, "level": LEVEL,
                   "pool_seeds": seeds, "steps": steps, "n_studies": n_studies,
                   "coverage_by_method": {m: {k: float(v) for k, v in r.items()} for m, r in agg.iterrows()},
                   "cells": table.to_dict("records")}
        write_study(out, frame, {"coverage": figure(table)}, summary, started=t0, quick=args.quick, seeds=seeds,
                    steps=steps)
        with pd.option_context("display.width", 200, "display.max_rows", 200):
            print(table.round(4).to_string(index=False))
        print(agg.round(4).to_string())


if __name__ == "__main__":
    main()
