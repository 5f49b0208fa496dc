"""Performance profiles (rliable's score distributions): the fraction of runs scoring above tau, per group."""
from __future__ import annotations

import matplotlib.pyplot as plt  # the backend is the user's (headless machines fall back to Agg)
import pandas as pd

from tabsim.plotting.palette import color_of


def plot_profile(profile: pd.DataFrame, *, metric: str = "pass1", by: str = "group", ci: float = 0.95):
    """One line per group (its project colour) of the fraction of runs with ``metric`` above tau, with its
    pointwise bootstrap band.

    Args:
      profile: columns ``group, tau, fraction, low, high`` (``tabsim.compare(...).profile``).
      metric: the x axis's name; by: the legend's title; ci: the bands' level, for the axis label.
    """
    fig, ax = plt.subplots(figsize=(5.8, 3.6))
    for i, (group, rows) in enumerate(profile.groupby("group", sort=False)):
        c = color_of(str(group), i)
        ax.plot(rows["tau"], rows["fraction"], color=c, lw=1.6, label=str(group))
        ax.fill_between(rows["tau"], rows["low"], rows["high"], color=c, alpha=0.2, lw=0)
    ax.set_xlabel(f"{metric} threshold tau")
    ax.set_ylabel(f"fraction of runs with score > tau\n(band: {ci:.0%} stratified bootstrap)", fontsize=9)
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(title=by, fontsize=8, title_fontsize=8, frameon=False)
    fig.tight_layout()
    return fig
