"""Outputs of an audit: CSV tables, a Markdown report, a figure and provenance, written all-or-nothing."""
from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
import pandas as pd

from tabsim.audit.core import AuditResult
from tabsim.audit.estimate import TERM_HELP

PLOT_TERMS = ("d_null", "d_elicit", "d_rd", "d_total")
from tabsim.plotting import TERM_COLORS  # noqa: E402  (one palette for the project)


def _num(x, nd=1) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "?"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.{nd}f}"


def _cell(t: pd.Series, nd=1) -> str:
    """``est [lo, hi]`` for a point-identified term, ``in [lo, hi]`` for a bounded one."""
    if t["identified"] == "point":
        return f"{_num(t['estimate'], nd)} [{_num(t['low'], nd)}, {_num(t['high'], nd)}]"
    tag = "" if t["bound_source"] == "simulator" else " (logical)"
    return f"in [{_num(t['low'], nd)}, {_num(t['high'], nd)}]{tag}"


def _sha(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _md_table(header, rows) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def render_report(res: AuditResult, *, files, command: str) -> str:
    """The Markdown report of an audit."""
    a, terms, info = res.audit, res.terms, res.info
    tt = {(r.source, r.model, r.benchmark, r.term): r for r in terms.itertuples(index=False)}

    def term(row, name):
        return pd.Series(tt[(row["source"], row["model"], row["benchmark"], name)]._asdict())

    ci = info["ci"]
    lvl = f"{100 * ci:g}%"
    L = ["# Audit of published RLVR results", "",
         f"Command: `{command}`", "",
         "Inputs:", ""]
    L += [f"- `{f}` (sha256 {_sha(f)[:16]})" for f in files]
    L += ["", "## How to read it", "",
          "The partition of the gain of TRUE over FROZEN (SPEC section 2), in accuracy points:", ""]
    L += [f"- `{t}` = {TERM_HELP[t]}" for t in ("d_null", "d_elicit", "d_rd", "d_total", "d_naive", "d_majority",
                                                 "rd_fraction", "elicitation_share", "rd_share")]
    L += ["",
          f"A cell `x [lo, hi]` is a point estimate with its {lvl} interval (the term is identified by the table). "
          "A cell `in [lo, hi]` is a bound: the table lacks an arm the term needs (identified = bounds). Bounds come "
          "from the simulator calibration when some simulated structure is consistent with the table, else "
          "`(logical)`: the missing arm anywhere in [0, 100].",
          "",
          f"Verdict (SPEC section 3): elicitation share > {info['threshold']:g} -> ELICITATION_DOMINATED; else rd "
          f"share > {info['threshold']:g} -> REWARD_DESIGN_DOMINATED; else MIXED; applied to the share intervals "
          "(or bounds), INCONCLUSIVE when the deciding interval straddles the threshold "
          "(`tabsim.stats.share_verdict`). The shares need FROZEN, MAJORITY and TRUE only, so a table without a "
          "RANDOM arm still identifies its verdict.",
          "", "## Assumptions", "",
          "- Each accuracy is an independent binomial proportion over n_items x samples_per_item trials "
          "(plus-one proportion in the variance). For avg@k scores this treats the k samples of an item as "
          "independent, which understates their variance. Arms evaluated on the same items are positively "
          "correlated in reality, so treating them as independent makes intervals of differences conservative.",
          "- Differences: Wald intervals. Ratios (shares, rd_fraction): Fieller intervals, unbounded (-inf, inf) "
          "when the denominator is not distinguishable from 0.",
          ]
    if info["seed_sd"] > 0:
        L.append(f"- Seed spread: single-run trained arms get an assumed seed sd of {info['seed_sd']:g} points "
                 "(`--seed-sd`); arms with per-seed values use their own spread.")
    else:
        L.append("- **Seed spread is unknown for single-run tables and is not in these intervals** (`--seed-sd 0`); "
                 "rerun with e.g. `--seed-sd 1` to add one point of seed sd to every single-run trained arm. "
                 "Arms with per-seed values use their own spread (s^2 / S on top of the binomial variance).")
    seeded = res.entries[res.entries["seeds"].astype(str) != ""] if len(res.entries) else res.entries
    if len(seeded):
        spreads = "; ".join(
            f"{r.source} {r.model} {r.benchmark} {r.arm}: sd {np.std([float(x) for x in str(r.seeds).split(';')], ddof=1):.2f} "
            f"over {len(str(r.seeds).split(';'))} seeds" for r in seeded.itertuples())
        L.append(f"  Seed spread where the inputs report seeds: {spreads}. Single-run tables carry a spread of this "
                 "order on top of their binomial intervals.")
    cal_info = info.get("calibration")
    if cal_info:
        g = cal_info["grid"]
        lo_d, hi_d = cal_info["sim_d_null_range"]
        out = [(r["source"], r["model"], r["benchmark"], r["d_null"]) for _, r in a.iterrows()
               if isinstance(r["d_null"], float) and math.isfinite(r["d_null"]) and not lo_d <= r["d_null"] <= hi_d]
        beyond = ("; reported d_null outside that range in these inputs: "
                  + ", ".join(f"{s_} {m_} {b_} {d:+.1f}" for s_, m_, b_, d in out)) if out else ""
        fams = ", ".join(f"`{n}` (lr {', '.join(f'{x:g}' for x in lrs)})" for n, lrs in g["families"])
        L += [f"- Missing arms are bounded by a simulator calibration: tabsim's bandit (N={g['n_prompts']} prompts, "
              f"K=8 answers, k in {g['n_correct']}, {g['steps']} steps, {g['seeds']} seeds) swept over prior "
              f"strength {g['prior_strength'][0]:g}..{g['prior_strength'][-1]:g} ({len(g['prior_strength'])} levels), "
              f"format boost {g['format_boost']}, heterogeneity {g['heterogeneity']}, families {fams}; "
              f"{cal_info['n_structures']} structures, one vmapped sweep per family "
              f"({'computed in ' + str(cal_info['seconds']) + ' s' if cal_info['cache'] == 'computed' else 'from the ' + cal_info['cache'] + ' cache'}, "
              f"key {cal_info['digest']}).",
              "  Each structure is calibrated to the entry's base accuracy (prior strength interpolated; five points "
              "across the base's interval) and its training intensity (lr, log-interpolated). A candidate is "
              "consistent when every reported trained arm lies within its Bonferroni-corrected interval of the "
              "simulated value; consistent candidates fill each missing arm with the reported base plus the "
              "simulated gain of that arm (variance: simulator standard error plus the assumed seed variance), and "
              "a bound is the union of the term's intervals over them. Simulated accuracies are expected pass@1 "
              "(greedy scores are matched to it too).",
              "  These bounds are **model-based**: they hold if the model trains like some structure of the simulated "
              f"family. Over the whole family the simulated d_null (RANDOM minus FROZEN) spans "
              f"{cal_info['sim_d_null_range']} points{beyond}. Random-reward gains from clipping under off-policy "
              "reuse are not produced by the `paper` family (`--family reuse` adds a clipped-reuse family), so "
              "simulator bounds on d_null and on the terms that use it can be too narrow for models that show "
              "them. The logical bounds in `terms.csv` make no model assumption."]
    elif not info.get("calibrate", True):
        L.append("- Simulator calibration switched off (`--no-calibration`): bounds are logical only.")

    L += ["", "## Summary", ""]
    rows = []
    for _, r in a.iterrows():
        rows.append([r["source"], r["model"], r["benchmark"]] +
                    [_cell(term(r, t)) for t in ("d_null", "d_elicit", "d_rd", "d_total")] +
                    [_cell(term(r, t), 2) for t in ("elicitation_share", "rd_share")] +
                    [f"**{r['verdict']}**", r["verdict_basis"], r["identified"]])
    L.append(_md_table(["source", "model", "benchmark", "d_null", "d_elicit", "d_rd", "d_total", "elicitation share",
                        "rd share", "verdict", "verdict from", "identified"], rows))

    for src, sub in a.groupby("source", sort=False):
        r0 = sub.iloc[0]
        ref = ", ".join(x for x in (f"arXiv {r0['arxiv']}" if r0["arxiv"] else "",
                                    f"version {r0['version']}" if r0["version"] else "", r0["table"]) if x)
        L += ["", f"## {r0['paper']} ({ref})", "", f"File `{r0['file']}`; source id `{src}`."]
        if r0["source_notes"]:
            L.append(f"Source notes: {r0['source_notes']}.")
        kinds = sorted(set(sub["majority_kind"]) - {""})
        if kinds:
            L.append(f"Majority arm: {', '.join(kinds)}.")
        acc_rows = []
        for _, r in sub.iterrows():
            accs = [_num(r[f"acc_{x}"]) if not math.isnan(r[f"acc_{x}"]) else "-" for x in
                    ("frozen", "random", "majority", "true")]
            extra = ", ".join(f"{x} {_num(r[f'acc_{x}'])}" for x in ("format", "incorrect", "self_certainty", "entropy")
                              if not math.isnan(r[f"acc_{x}"]))
            acc_rows.append([r["model"], r["benchmark"], r["n_items"], r["samples_per_item"], *accs, extra or "-"])
        L += ["", "Accuracies (percent, absolute):", "",
              _md_table(["model", "benchmark", "items", "samples", "frozen", "random", "majority", "true", "other arms"],
                        acc_rows), ""]
        for _, r in sub.iterrows():
            head = f"- **{r['model']} / {r['benchmark']}**: {r['verdict']}"
            if r["identified"] == "point":
                L.append(head + f" (point-identified; d_naive {_cell(term(r, 'd_naive'))}, rd_fraction "
                                f"{_cell(term(r, 'rd_fraction'), 2)}, bias of the naive estimate "
                                f"{_cell(term(r, 'bias'))}).")
                continue
            ident = [t for t in ("d_majority", "d_null", "d_naive", "d_total", "d_rd", "elicitation_share", "rd_share")
                     if term(r, t)["identified"] == "point"]
            shown = ", ".join(f"{t} {_cell(term(r, t), 2 if 'share' in t else 1)}" for t in ident)
            L.append(head + f". Missing arm(s): {r['missing_arms']}. The table identifies: {shown or 'nothing but the base'}.")
            if r["bound_source"] == "simulator":
                sets = []
                for t in ("d_null", "d_elicit", "d_rd", "d_total"):
                    tr = term(r, t)
                    if tr["identified"] == "bounds":
                        sets.append(f"{t} in [{_num(tr['low'])}, {_num(tr['high'])}] (simulated range "
                                    f"[{_num(tr['set_low'])}, {_num(tr['set_high'])}])")
                L.append(f"  Simulator bounds from {r['n_consistent']} of {r['n_candidates']} calibrated candidates: "
                         + "; ".join(sets) + ".")
                alt = term(r, "d_elicit")
                if "majority" in r["missing_arms"] and isinstance(alt.get("alt_majority_kind"), str):
                    kind = r["majority_kind"] or "online"
                    L.append(f"  The bounds use an {kind} majority arm; with an {alt['alt_majority_kind']} majority "
                             f"arm d_elicit would be in [{_num(alt['alt_low'])}, {_num(alt['alt_high'])}].")
            else:
                why = ("no simulated structure is consistent with the reported arms"
                       if r["n_candidates"] else "no simulator calibration")
                L.append(f"  Logical bounds only ({why}; {r['n_candidates']} candidates tried).")
    L += ["", "## Files", "",
          "- `audit.csv`: one row per model x benchmark (accuracies, terms with interval or bound columns "
          "`<term>_low/_high`, verdict, identified).",
          "- `terms.csv`: one row per model x benchmark x term (estimate or bounds, simulated range, logical bounds).",
          "- `entries.csv`: the normalised inputs (absolute accuracies, standard errors, seeds).",
          "- `calibration.csv`: every calibrated simulator candidate of the rows with missing arms.",
          "- `terms.png` (and `terms.pdf` with `--pdf`): the terms per model; `provenance.json`: versions, options, input hashes.", ""]
    return "\n".join(L)


def plot_terms(res: AuditResult):
    """d_null, d_elicit, d_rd and d_total per model: one row per model, one panel per source x benchmark.

    A horizontal interval chart that stays readable from a handful of entries to a few dozen (the
    figure grows with the number of models). Point-identified terms: a dot with its interval.
    Bounded terms are drawn as bounds, not as values: a bracket ``[ ]`` from the lower to the upper
    bound with no dot (solid for simulator bounds, with the simulated range as a pale band inside;
    dotted for logical bounds); an arrow marks a bound that runs off the panel.
    """
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    t = res.terms
    groups = list(res.audit.groupby(["source", "benchmark"], sort=False))
    n = len(groups)
    cols = 1 if n == 1 else 2
    nrows = (n + cols - 1) // cols
    sizes = [len(sub) for _, sub in groups]
    heights = [max(sizes[r * cols:(r + 1) * cols]) for r in range(nrows)]
    row_h = 0.62  # inches per model (four term rows)
    fig, axes = plt.subplots(nrows, cols, figsize=(6.2 * cols, sum(0.9 + row_h * h for h in heights) + 0.6),
                             squeeze=False, gridspec_kw={"height_ratios": [0.9 / row_h + h for h in heights]})
    dy = 0.8 / len(PLOT_TERMS)
    for ax, ((src, bench), sub) in zip(axes.ravel(), groups):
        models = list(sub["model"])
        rows, vals = [], []
        for i, model in enumerate(models):
            for j, term in enumerate(PLOT_TERMS):
                r = t[(t.source == src) & (t.model == model) & (t.benchmark == bench) & (t.term == term)].iloc[0]
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
            for end, edge, inside in ((a, lo, "["), (b, hi, "]")):
                off = not np.isfinite(edge) or (edge < lo_ax if inside == "[" else edge > hi_ax)
                marker = ("<" if inside == "[" else ">") if off else "|"
                ax.plot([end], [y], marker=marker, ms=6 if off else 8, color=c, mew=1.4)
        ax.set_xlim(lo_ax, hi_ax)
        ax.set_ylim(len(models) - 0.5, -0.5)
        ax.axvline(0, color="k", lw=0.6)
        ax.set_yticks(range(len(models)), models, fontsize=8)
        for i in range(1, len(models)):
            ax.axhline(i - 0.5, color="grey", lw=0.4, alpha=0.5)
        ax.set_title(f"{src}: {bench}", fontsize=9)
        ax.set_xlabel("change of accuracy (points)", fontsize=8)
        ax.grid(axis="x", alpha=0.3)
    for ax in axes.ravel()[n:]:
        ax.axis("off")
    handles = [Line2D([], [], color=TERM_COLORS[t], marker="o", ls="-", label=t) for t in PLOT_TERMS]
    handles += [Line2D([], [], color="k", marker="o", ls="-", label="identified: estimate and interval"),
                Line2D([], [], color="k", marker="|", ms=8, ls="-", label="simulator bound [low, high]"),
                Line2D([], [], color="k", lw=5, alpha=0.25, label="simulated range"),
                Line2D([], [], color="k", marker="|", ms=8, ls=":", label="logical bound"),
                Line2D([], [], color="k", marker=">", ls="", label="bound beyond the panel")]
    fig.suptitle("Partition of published gains, per model (terms top to bottom: " + ", ".join(PLOT_TERMS) + ")",
                 fontsize=10)
    legend_h = 0.55 / fig.get_figheight()
    fig.tight_layout(rect=(0, legend_h * 1.6, 1, 1 - 0.35 / fig.get_figheight()))
    fig.legend(handles=handles, loc="lower center", fontsize=7.5, ncol=5, frameon=False)
    return fig


def write_outputs(res: AuditResult, out_dir, *, files, command: str, provenance_extra: dict | None = None,
                  overwrite: bool = False) -> Path:
    """Write every output into ``out_dir``, published whole (a run store: see :mod:`tabsim.runtime.store`).

    A non-empty ``out_dir`` is refused unless ``overwrite`` (the old contents stay until the new audit
    is published). Inside an open store's staging folder the files are written there directly.
    """
    from tabsim.runtime.store import RunStore, writing_into

    out = Path(out_dir)
    if writing_into(out):
        _write_files(res, out, files=files, command=command, provenance_extra=provenance_extra)
        return out
    with RunStore(out, overwrite=overwrite, description="tabsim audit") as store:
        _write_files(res, store.dir, files=files, command=command, provenance_extra=provenance_extra)
    return out


def _write_files(res: AuditResult, folder: Path, *, files, command: str, provenance_extra: dict | None) -> None:
    from tabsim.files.atomic import atomic_write_text, write_frame, write_json
    from tabsim.files.provenance import provenance
    from tabsim.plotting.figures import save_figure

    write_frame(folder / "audit.csv", res.audit)
    write_frame(folder / "terms.csv", res.terms)
    write_frame(folder / "entries.csv", res.entries)
    write_frame(folder / "calibration.csv", res.calibration)
    atomic_write_text(folder / "report.md", render_report(res, files=files, command=command))
    save_figure(plot_terms(res), folder / "terms")
    write_json(folder / "provenance.json", provenance(
        command=command, inputs=[{"path": str(f), "sha256": _sha(f)} for f in files],
        options={k: v for k, v in res.info.items() if k != "calibration"},
        calibration=res.info.get("calibration"), **(provenance_extra or {})))
