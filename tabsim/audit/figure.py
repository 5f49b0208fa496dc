"""The audit's figure: the terms of every entry, identified values as points, bounds as brackets."""
from __future__ import annotations

import functools
import math
import textwrap
import unicodedata

import matplotlib.pyplot as plt
import numpy as np
from matplotlib import font_manager
from matplotlib.ft2font import FT2Font
from matplotlib.lines import Line2D

from tabsim.audit.core import AuditResult
from tabsim.plotting import TERM_COLORS  # one palette for the project

# d_majority = acc(MAJORITY) - acc(FROZEN) = d_null + d_elicit is the one term a base + majority table
# identifies; the palette gives it a colour of its own
PLOT_TERMS = ("d_null", "d_elicit", "d_majority", "d_rd", "d_total")
TITLE = ("Partition of published gains, per model (terms top to bottom: " + ", ".join(PLOT_TERMS)
         + "); simulator bounds are model-based; under each model its verdict")


# Above this many rows the per-model chart would be hundreds of inches tall (its height grows with the
# models); the figure then shows each term's distribution over the rows instead, at a fixed size.
MAX_MODEL_ROWS = 100


def plot_terms(res: AuditResult):
    """The audit's figure: :func:`plot_models` up to ``MAX_MODEL_ROWS`` rows, else :func:`plot_distributions`."""
    if len(res.audit) > MAX_MODEL_ROWS:
        return plot_distributions(res)
    return plot_models(res)


def figure_note(n_rows: int) -> str:
    """What ``terms.png`` shows for an audit of ``n_rows`` rows (for the log and the report)."""
    if n_rows > MAX_MODEL_ROWS:
        return (f"terms.png shows each term's distribution over the {n_rows} rows (a chart per model is drawn up to "
                f"{MAX_MODEL_ROWS} rows); terms.csv has every row's values")
    return "terms.png shows the terms per model"


def drawable(text) -> str:
    """Text from the inputs as the figure's font can draw it, as plain text (no mathtext).

    A character the font lacks is drawn as its compatibility form when the font has that (full-width
    ``＝`` as ``=``), else as ``U+XXXX``: matplotlib would warn once per missing glyph and draw a box.
    ``$`` is escaped so that a name cannot switch on mathtext.
    """
    have = _charmap()
    out = []
    for ch in str(text):
        if ch in "\n\t" or ord(ch) in have:
            out.append(ch)
            continue
        alt = unicodedata.normalize("NFKC", ch)
        out.append(alt if alt and all(ord(c) in have for c in alt) else f"U+{ord(ch):04X}")
    return "".join(out).replace("$", r"\$")


@functools.lru_cache(maxsize=None)
def _charmap() -> frozenset:
    """Code points of the font matplotlib draws text with."""
    path = font_manager.findfont(font_manager.FontProperties())
    return frozenset(FT2Font(path).get_charmap())


def plot_distributions(res: AuditResult):
    """Each term's distribution over many rows: a histogram of the point estimates per term (one panel
    each), and how many rows only bound it. The cost grows linearly with the rows; the size is fixed."""
    t = res.terms
    fig, axes = plt.subplots(len(PLOT_TERMS), 1, figsize=(7.0, 1.6 * len(PLOT_TERMS) + 1.0), squeeze=False)
    for ax, term in zip(axes[:, 0], PLOT_TERMS):
        rows = t[t["term"].to_numpy() == term]
        point = rows["identified"].to_numpy() == "point"
        est = rows["estimate"].to_numpy(float)[point]
        est = est[np.isfinite(est)]
        if est.size:
            ax.hist(est, bins=min(60, max(10, int(np.sqrt(est.size)))), color=TERM_COLORS[term], alpha=0.8)
        ax.axvline(0, color="k", lw=0.6)
        ax.set_title(f"{term}: {est.size} point estimates; {int((~point).sum())} rows bounded only (not drawn)",
                     fontsize=8)
        ax.set_ylabel("rows", fontsize=7)
        ax.tick_params(labelsize=7)
    axes[-1, 0].set_xlabel("change of accuracy (points)", fontsize=8)
    fig.suptitle(textwrap.fill(f"Partition of published gains over {len(res.audit)} rows: each term's point "
                               f"estimates (more than {MAX_MODEL_ROWS} rows: no chart per model; terms.csv has "
                               "each row)", width=90), fontsize=9)
    fig.tight_layout()
    return fig


def plot_models(res: AuditResult):
    """d_null, d_elicit, d_rd and d_total per model: one row per model, one panel per source x benchmark.

    A horizontal interval chart that stays readable from a handful of entries to a few dozen (the
    figure grows with the number of models). Point-identified terms: a dot with its interval.
    Bounded terms are drawn as bounds, not as values: a bracket ``[ ]`` from the lower to the upper
    bound with no dot (solid for simulator bounds, with the simulated range as a pale band inside and,
    paler, the range with RANDOM also over the measured d_null range where that widened it;
    dotted for logical bounds); an arrow marks a bound that runs off the panel. Simulator bounds are
    model-based: the legend and the title say so, and each such bracket carries a small "sim" tag.
    """
    # one lookup table, built once: a row's terms in constant time
    t = {(r["source"], r["model"], r["benchmark"], r["train_set"], r["term"]): r
         for r in res.terms.to_dict("records")}
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
                r = t[(src, model, bench, train, term)]
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
            if r["bound_source"] == "simulator":
                _ranges(ax, r, y, c)
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
        ax.set_title(drawable(f"{src}: {bench}" + (f" ({train})" if train else "")), fontsize=9)
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


def _ranges(ax, r: dict, y: float, c) -> None:
    """The pale bands inside a simulator bound: the simulated candidates' range of point values, and, paler,
    the range with RANDOM also over the measured d_null range where that widened it."""
    sim = (r.get("sim_low", np.nan), r.get("sim_high", np.nan))
    both = (r["set_low"], r["set_high"])
    if not np.all(np.isfinite(sim)):  # an older result: one range
        sim = both
    if np.all(np.isfinite(both)) and tuple(both) != tuple(sim):
        ax.plot(both, [y, y], color=c, lw=5, alpha=0.1, solid_capstyle="butt")
    if np.all(np.isfinite(sim)):
        ax.plot(sim, [y, y], color=c, lw=5, alpha=0.3, solid_capstyle="butt")


SHORT = {"RANDOM_REWARD_DOMINATED": "random-reward dom.", "ELICITATION_DOMINATED": "elicitation dom.",
         "REWARD_DESIGN_DOMINATED": "reward-design dom.", "MIXED": "mixed", "INCONCLUSIVE": "inconclusive"}


def _model_label(r) -> str:
    """The model, and under it its verdict: "(sim)" when the simulator decides it, "fragile" when one
    point of seed spread changes it."""
    tags = [t for t, on in (("sim", r.get("verdict_model_based") is True or r.get("verdict_model_based") == 1),
                            ("fragile", r.get("fragile") is True or r.get("fragile") == 1)) if on]
    v = SHORT.get(r["verdict"], str(r["verdict"]))
    return f"{drawable(r['model'])}\n{v}" + (f" ({', '.join(tags)})" if tags else "")


def _legend_handles() -> list:
    handles = [Line2D([], [], color=TERM_COLORS[t], marker="o", ls="-", label=t) for t in PLOT_TERMS]
    return handles + [
        Line2D([], [], color="k", marker="o", ls="-", label="identified: estimate and interval"),
        Line2D([], [], color="k", marker="|", ms=8, ls="-", label="simulator bound (model-based, 'sim')"),
        Line2D([], [], color="k", lw=5, alpha=0.3, label="simulated range"),
        Line2D([], [], color="k", lw=5, alpha=0.1, label="with RANDOM over measured d_null"),
        Line2D([], [], color="k", marker="|", ms=8, ls=":", label="logical bound (model-free)"),
        Line2D([], [], color="k", marker=">", ls="", label="bound beyond the panel")]
