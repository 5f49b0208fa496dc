"""The audit's figure: the terms of every entry, identified values as points, bounds as brackets."""
from __future__ import annotations

import math
import textwrap

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

from tabsim.audit.core import AuditResult
from tabsim.plotting import TERM_COLORS  # one palette for the project

# d_majority = acc(MAJORITY) - acc(FROZEN) = d_null + d_elicit is the one term a base + majority table
# identifies; the palette gives it a colour of its own
PLOT_TERMS = ("d_null", "d_elicit", "d_majority", "d_rd", "d_total")
TITLE = ("Partition of published gains, per model (terms top to bottom: " + ", ".join(PLOT_TERMS)
         + "); simulator bounds are model-based; under each model its verdict")


def plot_terms(res: AuditResult):
    """d_null, d_elicit, d_rd and d_total per model: one row per model, one panel per source x benchmark.

    A horizontal interval chart that stays readable from a handful of entries to a few dozen (the
    figure grows with the number of models). Point-identified terms: a dot with its interval.
    Bounded terms are drawn as bounds, not as values: a bracket ``[ ]`` from the lower to the upper
    bound with no dot (solid for simulator bounds, with the simulated range as a pale band inside;
    dotted for logical bounds); an arrow marks a bound that runs off the panel. Simulator bounds are
    model-based: the legend and the title say so, and each such bracket carries a small "sim" tag.
    """
    t = res.terms
    groups = list(res.audit.groupby(["source", "benchmark", "train_set"], sort=False))
    n = len(groups)
    cols = 1 if n == 1 else 2
    nrows = (n + cols - 1) // cols
    sizes = [len(sub) for _, sub in groups]
    heights = [max(sizes[r * cols:(r + 1) * cols]) for r in range(nrows)]
    row_h = 0.16 * len(PLOT_TERMS) - 0.02  # inches per model (one row per term)
    width = 6.2 * cols
    handles = _legend_handles()
    ncol = 5 if cols > 1 else 3
    legend_in = 0.2 * math.ceil(len(handles) / ncol) + 0.15  # the legend's rows, below the panels
    title = textwrap.fill(TITLE, width=int(width * 12.5))  # about 12.5 characters per inch at 10 pt
    title_in = 0.2 * (title.count("\n") + 1) + 0.15
    height = title_in + sum(0.9 + row_h * h for h in heights) + legend_in
    fig, axes = plt.subplots(nrows, cols, figsize=(width, height),
                             squeeze=False, gridspec_kw={"height_ratios": [0.9 / row_h + h for h in heights]})
    dy = 0.8 / len(PLOT_TERMS)
    for ax, ((src, bench, train), sub) in zip(axes.ravel(), groups):
        models = list(sub["model"])
        rows, vals = [], []
        for i, model in enumerate(models):
            for j, term in enumerate(PLOT_TERMS):
                r = t[(t.source == src) & (t.model == model) & (t.benchmark == bench) & (t.train_set == train)
                      & (t.term == term)].iloc[0]
                y = i + (j - (len(PLOT_TERMS) - 1) / 2) * dy
                rows.append((y, term, r))
                vals += [v for v in (r["low"], r["high"], r["estimate"]) if np.isfinite(v)]
        lo_ax, hi_ax = min(vals + [0.0]), max(vals + [0.0])
        pad = 0.06 * (hi_ax - lo_ax + 1.0)
        lo_ax, hi_ax = lo_ax - pad, hi_ax + pad
        for y, term, r in rows:
            c = TERM_COLORS[term]
            if r["identified"] == "point":
                ax.errorbar(r["estimate"], y, xerr=[[r["estimate"] - r["low"]], [r["high"] - r["estimate"]]],
                            fmt="o", ms=4, color=c, elinewidth=1.2, capsize=0)
                continue
            lo, hi = r["low"], r["high"]
            a, b = max(lo, lo_ax) if np.isfinite(lo) else lo_ax, min(hi, hi_ax) if np.isfinite(hi) else hi_ax
            ls = "-" if r["bound_source"] == "simulator" else ":"
            if r["bound_source"] == "simulator" and np.isfinite(r["set_low"]) and np.isfinite(r["set_high"]):
                ax.plot([r["set_low"], r["set_high"]], [y, y], color=c, lw=5, alpha=0.25, solid_capstyle="butt")
            ax.plot([a, b], [y, y], color=c, lw=1.2, ls=ls)
            if r["bound_source"] == "simulator":
                ax.text(b, y, " sim", fontsize=5.5, color=c, va="center", ha="left")
            for end, edge, inside in ((a, lo, "["), (b, hi, "]")):
                off = not np.isfinite(edge) or (edge < lo_ax if inside == "[" else edge > hi_ax)
                marker = ("<" if inside == "[" else ">") if off else "|"
                ax.plot([end], [y], marker=marker, ms=6 if off else 8, color=c, mew=1.4)
        ax.set_xlim(lo_ax, hi_ax)
        ax.set_ylim(len(models) - 0.5, -0.5)
        ax.axvline(0, color="k", lw=0.6)
        ax.set_yticks(range(len(models)), [_model_label(r) for _, r in sub.iterrows()], fontsize=7)
        for i in range(1, len(models)):
            ax.axhline(i - 0.5, color="grey", lw=0.4, alpha=0.5)
        ax.set_title(f"{src}: {bench}" + (f" ({train})" if train else ""), fontsize=9)
        ax.set_xlabel("change of accuracy (points)", fontsize=8)
        ax.grid(axis="x", alpha=0.3)
    for ax in axes.ravel()[n:]:  # an odd number of panels: the last cell stays empty
        fig.delaxes(ax)
    fig.suptitle(title, fontsize=10)
    # the title and the legend get their own inches, so a one-entry figure has room for its panel too
    # (tight_layout leaves the suptitle its room; the legend's is kept free below the panels)
    fig.tight_layout(rect=(0, legend_in / height, 1, 1))
    fig.legend(handles=handles, loc="lower center", fontsize=7.5, ncol=ncol, frameon=False)
    return fig


SHORT = {"RANDOM_REWARD_DOMINATED": "random-reward dom.", "ELICITATION_DOMINATED": "elicitation dom.",
         "REWARD_DESIGN_DOMINATED": "reward-design dom.", "MIXED": "mixed", "INCONCLUSIVE": "inconclusive"}


def _model_label(r) -> str:
    """The model, and under it its verdict: "(sim)" when the simulator decides it, "fragile" when one
    point of seed spread changes it."""
    tags = [t for t, on in (("sim", r.get("verdict_model_based") is True or r.get("verdict_model_based") == 1),
                            ("fragile", r.get("fragile") is True or r.get("fragile") == 1)) if on]
    v = SHORT.get(r["verdict"], str(r["verdict"]))
    return f"{r['model']}\n{v}" + (f" ({', '.join(tags)})" if tags else "")


def _legend_handles() -> list:
    handles = [Line2D([], [], color=TERM_COLORS[t], marker="o", ls="-", label=t) for t in PLOT_TERMS]
    return handles + [
        Line2D([], [], color="k", marker="o", ls="-", label="identified: estimate and interval"),
        Line2D([], [], color="k", marker="|", ms=8, ls="-", label="simulator bound (model-based, 'sim')"),
        Line2D([], [], color="k", lw=5, alpha=0.25, label="simulated range"),
        Line2D([], [], color="k", marker="|", ms=8, ls=":", label="logical bound (model-free)"),
        Line2D([], [], color="k", marker=">", ls="", label="bound beyond the panel")]
