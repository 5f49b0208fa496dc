"""Figures. Everything here takes tidy frames and writes PNG and PDF (no computation)."""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt  # the backend is the user's (headless machines fall back to Agg)
import pandas as pd

ARM_COLORS = {"frozen": "#7f7f7f", "random": "#ff7f0e", "majority": "#2ca02c", "majority_offline": "#98df8a",
              "incorrect": "#d62728", "format": "#9467bd", "true": "#1f77b4", "noisy": "#17becf"}


def save_figure(fig, path_stem: str | Path) -> list[Path]:
    """Save ``fig`` as ``<stem>.png`` and ``<stem>.pdf`` (atomically) and close it."""
    from tabsim.io import atomic_write_bytes
    import io

    stem = Path(path_stem)
    out = []
    for ext in ("png", "pdf"):
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, dpi=130, bbox_inches="tight")
        out.append(atomic_write_bytes(stem.with_suffix(f".{ext}"), buf.getvalue()))
    plt.close(fig)
    return out


def plot_curves(frame: pd.DataFrame, *, metric: str = "pass1", by: list[str] | None = None, title: str = ""):
    """Mean ``metric`` against step per arm (band: +/- 1 s.e. over seeds), one panel per condition."""
    by = [c for c in (by or []) if c in frame.columns]
    groups = list(frame.groupby(by, observed=True)) if by else [((), frame)]
    n = len(groups)
    cols = min(n, 4)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.8 * rows), squeeze=False, sharey=True)
    for ax, (key, g) in zip(axes.ravel(), groups):
        stats = g.groupby(["arm", "step"], observed=True)[metric].agg(["mean", "sem", "count"]).reset_index()
        for arm, s in stats.groupby("arm", observed=True):
            c = ARM_COLORS.get(str(arm))
            ax.plot(s["step"], s["mean"], label=str(arm), color=c)
            sem = s["sem"].fillna(0.0)
            ax.fill_between(s["step"], s["mean"] - sem, s["mean"] + sem, alpha=0.2, color=c)
        key = key if isinstance(key, tuple) else (key,)
        ax.set_title(", ".join(f"{b}={k:g}" if isinstance(k, float) else f"{b}={k}" for b, k in zip(by, key)),
                     fontsize=9)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    for ax in axes.ravel()[n:]:
        ax.axis("off")
    axes[0, 0].set_ylabel(metric)
    axes[0, 0].legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
