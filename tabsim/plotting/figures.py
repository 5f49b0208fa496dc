"""Figures drawn from tidy frames, and :func:`save_figure`, which writes each format atomically."""
from __future__ import annotations

import io
from pathlib import Path

import matplotlib.pyplot as plt  # the backend is the user's (headless machines fall back to Agg)
import pandas as pd

from tabsim.files.atomic import atomic_write_bytes
from tabsim.plotting import ARM_STYLES, color_of
from tabsim.plotting.formats import figure_formats


def save_figure(fig, path_stem: str | Path, formats=None) -> list[Path]:
    """Save ``fig`` as ``<stem>.png`` (and ``.pdf`` / ``.svg`` when asked: ``formats`` or
    ``$TABSIM_FIGURE_FORMATS``, see :func:`figure_formats`), each atomically, and close it."""
    stem = Path(path_stem)
    out = []
    for ext in figure_formats(formats):
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, dpi=130, bbox_inches="tight")
        out.append(atomic_write_bytes(stem.with_suffix(f".{ext}"), buf.getvalue()))
    plt.close(fig)
    return out


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
