"""Figures drawn from tidy frames, and :func:`save_figure`, which writes each format atomically."""
from __future__ import annotations

import io
from pathlib import Path

import matplotlib.pyplot as plt  # the backend is the user's (headless machines fall back to Agg)
import pandas as pd

from tabsim.files.atomic import atomic_write_bytes
from tabsim.plotting.palette import ARM_STYLES, color_of
from tabsim.plotting.formats import figure_formats


SAVE_DPI = 130  # the resolution every figure file is written at


def save_figure(fig, path_stem: str | Path, formats=None) -> list[Path]:
    """Save ``fig`` as ``<stem>.png`` (and ``.pdf`` / ``.svg`` when asked: ``formats`` or
    ``$TABSIM_FIGURE_FORMATS``, see :func:`figure_formats`), each atomically, and close it."""
    stem = Path(path_stem)
    out = []
    for ext in figure_formats(formats):
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, dpi=SAVE_DPI, bbox_inches="tight")
        out.append(atomic_write_bytes(stem.with_suffix(f".{ext}"), buf.getvalue()))
    plt.close(fig)
    return out


def plot_final(frame: pd.DataFrame, *, metric: str = "pass1", by: list[str] | None = None, title: str = "",
               max_panels: int = 12):
    """Final ``metric`` (mean over seeds, bars +/- 1 s.e.) against a swept factor, one line per arm: a
    many-condition sweep in one readable figure, where :func:`plot_curves` would draw a panel per condition.

    The x axis is the factor of ``by`` with the most levels; each combination of the other factors is a
    panel (up to ``max_panels``). Beyond that, each arm is a panel and each combination a line of that
    arm's colour, darker for later combinations.
    """
    by = [c for c in (by or []) if c in frame.columns]
    final = frame[frame["step"] == frame["step"].max()]
    if not by:
        return plot_curves(frame, metric=metric, title=title)
    x = max(by, key=lambda c: final[c].nunique())  # the first of equals: the sweep's order
    rest = [c for c in by if c != x]
    combos = sorted(set(final[rest].itertuples(index=False, name=None))) if rest else [()]
    arms = [str(a) for a in final["arm"].unique()] if not hasattr(final["arm"], "cat") else \
        [str(a) for a in final["arm"].cat.categories if (final["arm"] == a).any()]
    by_arm = len(combos) > max_panels
    panels = arms if by_arm else combos
    n = len(panels)
    cols = 2 if n == 4 else min(n, 3)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 2.8 * rows + 0.6), squeeze=False, sharey=True,
                             sharex=True)
    stats = final.groupby(rest + ["arm", x], observed=True)[metric].agg(["mean", "sem"]).reset_index()
    handles = {}

    def label(names, key):
        return ", ".join(f"{b}={k:g}" if isinstance(k, float) else f"{b}={k}" for b, k in zip(names, key))

    for ax, panel in zip(axes.ravel(), panels):
        if by_arm:
            lines = [(combo, panel) for combo in combos]
            ax.set_title(panel, fontsize=9)
        else:
            lines = [(panel, arm) for arm in arms]
            ax.set_title(label(rest, panel) or f"final {metric}", fontsize=9)
        for j, (combo, arm) in enumerate(lines):
            sel = stats["arm"].astype(str) == arm
            for c, k in zip(rest, combo):
                sel &= stats[c] == k
            s = stats[sel].sort_values(x)
            i = arms.index(arm)
            ls, marker = ARM_STYLES.get(arm, ("-", "o"))
            alpha = 0.35 + 0.65 * (j + 1) / len(lines) if by_arm else 1.0
            hollow = arm == "frozen"  # a large open circle rings an arm drawn at the same points (RANDOM)
            c = color_of(arm, i)
            line = ax.errorbar(s[x], s["mean"], yerr=s["sem"].fillna(0.0), color=c, ls=ls, marker=marker,
                               ms=7 if hollow else 4, mfc="none" if hollow else c, mew=1.2, lw=1.2, capsize=2,
                               alpha=alpha, label=arm, zorder=3 if hollow else 2)
            handles.setdefault(arm, line)
        ax.grid(alpha=0.3)
    for k, ax in enumerate(axes.ravel()):
        if k >= n:
            ax.remove()
        elif k + cols >= n:  # the lowest panel of its column
            ax.set_xlabel(x)
            ax.tick_params(labelbottom=True)
    for r in range(rows):
        axes[r, 0].set_ylabel(f"final {metric} (mean, +/- 1 s.e.)", fontsize=8)
    if by_arm:
        fig.text(0.5, 0.005, f"one line per {', '.join(rest)} combination ({len(combos)}), darker = later in the "
                 "sweep", ha="center", fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.1 if rows == 1 else 0.05, 1, 1))
    if not by_arm:
        fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=min(len(handles), 8), fontsize=8,
                   frameon=False)
    return fig


def plot_curves(frame: pd.DataFrame, *, metric: str = "pass1", by: list[str] | None = None, title: str = ""):
    """Mean ``metric`` against step per arm (band: +/- 1 s.e. over seeds), one panel per condition.

    Every arm has its project colour, line style and marker (:data:`ARM_STYLES`), so arms whose
    curves coincide stay visible; one legend for the figure sits below the panels.
    """
    by = [c for c in (by or []) if c in frame.columns]
    groups = list(frame.groupby(by, observed=True)) if by else [((), frame)]
    n = len(groups)
    cols = n if n <= 5 else 4
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.3 * cols, 2.8 * rows + 0.5), squeeze=False, sharey=True)
    handles = {}
    for ax, (key, g) in zip(axes.ravel(), groups):
        stats = g.groupby(["arm", "step"], observed=True)[metric].agg(["mean", "sem", "count"]).reset_index()
        arms = list(stats.groupby("arm", observed=True))
        span = float(stats["step"].max() - stats["step"].min()) or 1.0
        for i, (arm, s) in enumerate(arms):
            # dodge: arm i is drawn 1% of the step range beside its neighbours, so equal values do not hide
            x = s["step"] + (i - (len(arms) - 1) / 2) * 0.01 * span
            arm = str(arm)
            c = color_of(arm, i)
            ls, marker = ARM_STYLES.get(arm, ("-", "o"))
            n_pts = len(s)
            # markers on a few points only, staggered per arm so coinciding curves show every marker
            every = (i % max(1, n_pts // 6), max(1, n_pts // 6)) if n_pts > 8 else None
            hollow = arm == "frozen"  # a large open circle rings any arm drawn at the same point
            (line,) = ax.plot(x, s["mean"], label=arm, color=c, ls=ls, marker=marker, ms=7 if hollow else 4,
                              markevery=every, mfc="none" if hollow else c, mew=1.2, lw=1.3,
                              zorder=3 if hollow else 2)
            handles.setdefault(arm, line)
            sem = s["sem"].fillna(0.0)
            ax.fill_between(x, s["mean"] - sem, s["mean"] + sem, alpha=0.2, color=c, lw=0)
        key = key if isinstance(key, tuple) else (key,)
        ax.set_title(", ".join(f"{b}={k:g}" if isinstance(k, float) else f"{b}={k}" for b, k in zip(by, key)),
                     fontsize=9)
        ax.set_xlabel("training step")
        ax.grid(alpha=0.3)
    for ax in axes.ravel()[n:]:
        ax.axis("off")
    for r in range(rows):
        axes[r, 0].set_ylabel(f"{metric} (mean over seeds, band +/- 1 s.e.)" if metric == "pass1" else metric,
                              fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.08 if rows == 1 else 0.04, 1, 1))
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=min(len(handles), 8), fontsize=8,
               frameon=False)
    return fig
