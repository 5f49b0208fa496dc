"""The reference study's three figures: the prior sweep, the factorial and power.

The figure functions run in the figure pool (:mod:`tabsim.plotting.figure_pool`), whose fork server imports
this module by name before its first job.
"""
from __future__ import annotations

import dataclasses
import types
from pathlib import Path

import numpy as np
import pandas as pd

from tabsim.plotting.palette import (
    ARM_COLORS,
    ARM_STYLES,
    REFERENCE_COLOR,
    TERM_COLORS,
    TERM_MARKERS,
)
from tabsim.plotting.figure_pool import LocalFigures
from tabsim.studies.reference.analysis import arm_intervals
from tabsim.studies.reference.design import ADDITIVITY_THRESHOLD, PAPER, POWER_PRIOR, TARGET_HALF_WIDTH


FIGURES = ("prior_sweep", "factorial", "power")  # the figures' stems, in the order the report lists them


def figures(a: dict, out: Path, pool=None, which=FIGURES, formats=None) -> list[str]:
    """Three figures (PNG; PDF too with ``--pdf``: ``formats``, default the user's) the prior sweep, the factorial,
    power.

    Colours, line styles and markers come from :mod:`tabsim.plotting` (one palette for the project).
    Intervals of a few thousandths are narrower than a marker on an axis spanning the whole pass@1
    range, so each figure shows them twice: as error bars and as numbers (half-widths or printed
    intervals), so the interval is visible whatever its size.

    ``pool``: where they are drawn (a :mod:`tabsim.plotting.figure_pool` pool; default this process, and
    the written paths are returned); with a pool the paths come from its ``wait()``.
    """
    local = pool is None
    if local:
        pool = LocalFigures()
    # result objects travel as plain namespaces: unpickling tabsim.stats' classes would load the
    # statistics stack (scipy.stats, statsmodels) where the figures are drawn
    plain = lambda obj: types.SimpleNamespace(**{f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)})  # noqa: E731
    jobs = {
        "prior_sweep": lambda: pool.submit(f"{__name__}:figure_prior_sweep", arm_intervals(a["sweep_seeds"]),
                                           a["sweep_summary"], plain(a["crossover"]), a["mode_switch"],
                                           stem=out / "figures" / "prior_sweep", formats=formats),
        "factorial": lambda: pool.submit(f"{__name__}:figure_factorial", a["fit"].coefficients, plain(a["ratio"]),
                                         stem=out / "figures" / "factorial", formats=formats),
        "power": lambda: pool.submit(f"{__name__}:figure_power", a["power_curve"], a["power_mde"],
                                     stem=out / "figures" / "power", formats=formats),
    }
    for name in which:
        jobs[name]()
    return pool.wait() if local else []


def figure_prior_sweep(arm_ci: pd.DataFrame, summ: pd.DataFrame, crossover, mode_switch: float):
    """The prior sweep: arms (``arm_ci``, from :func:`arm_intervals`), partition terms with the
    crossover, interval sizes."""
    # lazy: matplotlib on use, here and below: the command's own process draws only when no pool does
    import matplotlib.pyplot as plt
    from matplotlib.ticker import ScalarFormatter

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
    import matplotlib.pyplot as plt  # lazy: see figure_prior_sweep

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
    import matplotlib.pyplot as plt  # lazy: see figure_prior_sweep
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

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
