"""rliable's figures of a comparison (``tabsim.compare(...)``): interval estimates, probabilities of
improvement, performance profiles with bands, and sample-efficiency curves (IQM over training steps).

Each takes the comparison's tidy frames and says, on the figure, the interval method, the level and
the normalisation of the scores; each group keeps one colour across the four (:func:`colors_for`).
"""
from __future__ import annotations

import matplotlib.pyplot as plt  # the backend is the user's (headless machines fall back to Agg)
import pandas as pd

from tabsim.plotting.palette import colors_for

PANELS = {"median": "Median", "iqm": "IQM", "mean": "Mean", "optimality_gap": "Optimality gap"}


def _how(ci: float, method: str, normalization: str) -> str:
    scores = "raw scores" if normalization in ("none", "") else f"scores normalised: {normalization}"
    return f"{ci:.0%} stratified bootstrap intervals ({method}); {scores}"


def plot_intervals(frame: pd.DataFrame, *, metric: str = "pass1", by: str = "group", ci: float = 0.95,
                   method: str = "rescaled", normalization: str = "none"):
    """One panel per aggregate (median, IQM, mean, optimality gap, those reported), one bar per group:
    the interval, with a tick at the estimate (rliable's ``plot_interval_estimates``)."""
    aggs = frame[frame["statistic"].isin(PANELS)]
    stats = [s for s in PANELS if s in set(aggs["statistic"])]
    groups = list(dict.fromkeys(aggs["group"]))
    colors = colors_for(groups)
    fig, axes = plt.subplots(1, len(stats), figsize=(2.6 * len(stats) + 1.2, 0.45 * len(groups) + 1.6),
                             sharey=True, squeeze=False)
    for ax, stat in zip(axes[0], stats):
        rows = aggs[aggs["statistic"] == stat].set_index("group")
        for i, g in enumerate(groups):
            e, lo, hi = rows.loc[g, ["estimate", "low", "high"]]
            ax.barh(i, hi - lo, left=lo, height=0.6, color=colors[g], alpha=0.75)
            ax.vlines(e, i - 0.3, i + 0.3, color="black", lw=1.5)
        ax.set_title(PANELS[stat] + (" (lower is better)" if stat == "optimality_gap" else ""), fontsize=10)
        ax.grid(axis="x", alpha=0.3)
        ax.tick_params(labelsize=8)
    axes[0][0].set_yticks(range(len(groups)), groups)
    axes[0][0].invert_yaxis()  # the first group on top, as in the summary
    axes[0][0].set_ylabel(by)
    fig.supxlabel(f"{metric}: {_how(ci, method, normalization)}", fontsize=9)
    fig.tight_layout()
    return fig


def plot_improvement(frame: pd.DataFrame, *, metric: str = "pass1", by: str = "group", ci: float = 0.95,
                     method: str = "rescaled", normalization: str = "none"):
    """One bar per pair: P(X > Y) with its interval, against the 0.5 of no difference (rliable's
    ``plot_probability_of_improvement``)."""
    poi = frame[frame["statistic"] == "probability_of_improvement"].reset_index(drop=True)
    colors = colors_for(list(dict.fromkeys(frame["group"])))
    fig, ax = plt.subplots(figsize=(5.8, 0.4 * len(poi) + 1.4))
    for i, (x, y, e, lo, hi) in enumerate(poi[["group", "versus", "estimate", "low", "high"]].itertuples(index=False)):
        ax.barh(i, hi - lo, left=lo, height=0.6, color=colors[x], alpha=0.75)
        ax.vlines(e, i - 0.3, i + 0.3, color="black", lw=1.5)
    ax.set_yticks(range(len(poi)), [f"P({x} > {y})" for x, y in zip(poi["group"], poi["versus"])], fontsize=8)
    ax.axvline(0.5, color="grey", ls="--", lw=1)
    ax.set_xlim(-0.02, 1.02)
    ax.invert_yaxis()
    ax.set_xlabel(f"probability of improvement, {metric} ({by})\n{_how(ci, method, normalization)}", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def plot_profile(profile: pd.DataFrame, *, metric: str = "pass1", by: str = "group", ci: float = 0.95,
                 method: str = "rescaled", normalization: str = "none"):
    """One line per group of the fraction of runs scoring above tau, with its pointwise band, at the
    thresholds computed (rliable's ``plot_performance_profiles``)."""
    fig, ax = plt.subplots(figsize=(5.8, 3.6))
    groups = list(dict.fromkeys(profile["group"]))
    colors = colors_for(groups)
    for g in groups:
        rows = profile[profile["group"] == g]
        drawstyle = "steps-post" if len(rows) < 12 else "default"
        ax.plot(rows["tau"], rows["fraction"], color=colors[g], lw=1.6, label=str(g), drawstyle=drawstyle)
        ax.fill_between(rows["tau"], rows["low"], rows["high"], color=colors[g], alpha=0.2, lw=0,
                        step="post" if drawstyle == "steps-post" else None)
    ax.set_xlabel(f"{metric} threshold tau")
    ax.set_ylabel("fraction of runs with score > tau", fontsize=9)
    ax.set_title(_how(ci, method, normalization), fontsize=8)
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(title=by, fontsize=8, title_fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


def plot_sample_efficiency(curves: pd.DataFrame, *, metric: str = "pass1", by: str = "group", ci: float = 0.95,
                method: str = "rescaled", normalization: str = "none"):
    """Sample efficiency: each group's IQM at each evaluated step with its band (rliable's
    ``plot_sample_efficiency_curve``)."""
    fig, ax = plt.subplots(figsize=(5.8, 3.6))
    groups = list(dict.fromkeys(curves["group"]))
    colors = colors_for(groups)
    for g in groups:
        rows = curves[curves["group"] == g].sort_values("step")
        ax.plot(rows["step"], rows["iqm"], color=colors[g], lw=1.6, marker="o", ms=3, label=str(g))
        ax.fill_between(rows["step"], rows["low"], rows["high"], color=colors[g], alpha=0.2, lw=0)
    ax.set_xlabel("training step")
    ax.set_ylabel(f"IQM of {metric}", fontsize=9)
    ax.set_title(_how(ci, method, normalization), fontsize=8)
    ax.grid(alpha=0.3)
    ax.legend(title=by, fontsize=8, title_fontsize=8, frameon=False)
    ax.margins(x=0.02)
    fig.tight_layout()
    return fig
