"""Outputs of an audit: CSV tables, a Markdown report, a figure and provenance, written all-or-nothing.

Names in the inputs (models, benchmarks, notes) are the paper's, so every output treats them as
data: a CSV cell that a spreadsheet would run as a formula (``=1+1``, ``+``, ``-``, ``@``, tab,
carriage return first) is prefixed with ``'``, and ``|`` and line breaks are escaped in the
Markdown report so that they cannot break its tables.
"""
from __future__ import annotations

import math
import time
import unicodedata
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from tabsim.audit.claims import SHARE_TERMS, range_text, share_notes, term_claim
from tabsim.audit.core import AuditResult
from tabsim.audit.estimate import TERM_HELP
from tabsim.audit.figure import MAX_MODEL_ROWS, PLOT_TERMS, TERM_COLORS, figure_note, plot_terms
from tabsim.files.atomic import atomic_write_text, write_frame, write_json
from tabsim.files.markdown import md
from tabsim.files.provenance import provenance
from tabsim.plotting.figures import save_figure
from tabsim.runtime.manifest import file_sha256
from tabsim.runtime.store import RunStore, writing_into

__all__ = ["PLOT_TERMS", "TERM_COLORS", "csv_safe", "formula_led", "md", "plot_terms", "render_report", "write_outputs"]
FORMULA_LEAD = ("=", "+", "-", "@", "\t", "\r")
# Lookalikes a spreadsheet may normalise to a formula character (NFKC folds the full-width, small,
# superscript and subscript forms); minus signs and dashes that NFKC keeps are named here.
FORMULA_LOOKALIKES = "\u2212\u2010\u2011\u2012\u2013\u2014\u2015\u2796\u2795\u2797\u2e3a\u2e3b\ufe58"


def formula_led(text: str) -> bool:
    """True when ``text`` could run as a spreadsheet formula: its first character (after any leading
    whitespace, control or invisible format characters) is ``= + - @`` or a lookalike of one, or it
    starts with a tab or carriage return."""
    if text.startswith(FORMULA_LEAD):
        return True
    head = text.lstrip()
    while head and unicodedata.category(head[0]) in ("Cc", "Cf", "Zs", "Zl", "Zp"):
        head = head[1:].lstrip()
    if not head:
        return False
    # the character as a spreadsheet may read it: NFKC first (superscript minus -> U+2212), then the lookalikes
    c = unicodedata.normalize("NFKC", head[0])[:1] or head[0]
    return c in "=+-@" or c in FORMULA_LOOKALIKES or unicodedata.category(c) == "Pd"
TAGS = {"simulator": " (simulator: model-based)", "logical": " (logical)"}


def csv_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy whose text cells cannot run as spreadsheet formulas (OWASP "CSV injection").

    A string cell starting with ``= + - @``, a lookalike of one (full-width ``＝ ＋ － ＠``, small,
    superscript and subscript forms, Unicode minus signs and dashes, also behind leading spaces or
    invisible characters), a tab or a carriage return gets a leading ``'``. Numbers are left alone
    (a negative gain stays a number).
    """
    out = frame.copy()
    for col in out.columns:
        if not pd.api.types.is_numeric_dtype(out[col]):
            out[col] = out[col].map(lambda x: "'" + x if isinstance(x, str) and formula_led(x) else x)
    return out


def _num(x, nd=1) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "?"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.{nd}f}"


def _cell(t: pd.Series, nd=1) -> str:
    """``est [lo, hi]`` for a point-identified term, ``in [lo, hi] (tag)`` for a bounded one."""
    if t["identified"] == "point":
        return f"{_num(t['estimate'], nd)} [{_num(t['low'], nd)}, {_num(t['high'], nd)}]"
    return f"in [{_num(t['low'], nd)}, {_num(t['high'], nd)}]{TAGS.get(t['bound_source'], '')}"


def _md_table(header, rows) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def _key(r) -> tuple:
    return (r["source"], r["model"], r["benchmark"], r["train_set"])


def _what(r) -> str:
    """``model / benchmark (train set)``, escaped."""
    return f"{md(r['model'])} / {md(r['benchmark'])}" + (f" (trained on {md(r['train_set'])})" if r["train_set"] else "")


def _flag(r, name: str) -> bool:
    """A boolean column of the row (False where an older result lacks it)."""
    v = r.get(name)
    return isinstance(v, (bool, np.bool_)) and bool(v)


def _verdict_tag(r) -> str:
    """The verdict with what it rests on: ``X (simulator: model-based)`` when the simulator decides it."""
    return f"{r['verdict']}{TAGS['simulator'] if _flag(r, 'verdict_model_based') else ''}"


def _verdict_cell(r) -> str:
    v = f"**{_verdict_tag(r)}**"
    if _flag(r, "fragile"):
        v += f"; fragile: {r['fragile_note']}"
    if r["verdict"] == "INCONCLUSIVE" and r["point_verdict"] and r["point_verdict"] != "INCONCLUSIVE":
        v += f" (point estimates: {r['point_verdict']})"
    if r["verdict_if_independent"] != r["verdict"]:
        v += f"; {r['verdict_if_independent']} if samples were independent"
    return v


def _assumptions(res: AuditResult) -> list:
    info, a = res.info, res.audit
    L = ["", "## Assumptions", "",
         "- Each accuracy is a proportion over the benchmark's items, and the **item is the sampling unit**: "
         "the variance is p(1 - p) / n_items (plus-one proportion). An avg@k score averages k correlated samples "
         "of each item, so counting n_items x k independent trials understates its variance; that optimistic "
         "interval is in the `*_low_trials`/`*_high_trials` columns and `verdict_if_independent`, and a verdict "
         "stands only if it holds under the item interval. Per-item results (item x sample correctness) give the "
         "exact clustered variance and the paired covariance of arms scored on the same items.",
         "- Arms evaluated on the same items are positively correlated in reality; without per-item results they "
         "are treated as independent, which makes intervals of differences conservative.",
         "- Differences: Wald intervals. Ratios (shares, rd_fraction): Fieller intervals, unbounded (-inf, inf) "
         "when the denominator is not distinguishable from 0."]
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
            f"{md(r.source)} {md(r.model)} {md(r.benchmark)} {r.arm}: sd "
            f"{np.std([float(x) for x in str(r.seeds).split(';')], ddof=1):.2f} over {len(str(r.seeds).split(';'))} "
            "seeds" for r in seeded.itertuples())
        L.append(f"  Seed spread where the inputs report seeds: {spreads}. Single-run tables carry a spread of this "
                 "order on top of their binomial intervals.")
    if info.get("fragile_seed_sd"):
        L.append("- **Fragile** verdicts: a verdict is marked fragile when an assumed seed sd up to 1 point from the "
                 f"one used ({', '.join(f'{x:g}' for x in info['fragile_seed_sd'])}) changes it; the summary, "
                 "`fragile`/`fragile_note` in `audit.csv` and the figure's labels say so.")
    cal_info = info.get("calibration")
    if cal_info and not (a["bound_source"] == "simulator").any():
        L += _calibration_unused(cal_info, a)
    elif cal_info:
        L += _calibration_text(cal_info, a)
        reg = info.get("measurements") or []
        if reg:
            L.append("- Measured null effects (the registry of published random-reward runs, "
                     "`tabsim.audit.measured`) overrule simulator bounds they contradict: "
                     + "; ".join(f"{md(m['source'])} {md(m['model'])} {md(m['benchmark'])} d_null {m['d_null']:+g}"
                                 for m in reg) + ".")
    elif not info.get("calibrate", True):
        L.append("- Simulator calibration switched off (`--no-calibration`): bounds are logical only.")
    return L


def _calibration_unused(cal_info: dict, a: pd.DataFrame) -> list:
    """The calibration ran but bounds no row: say so, and why, instead of describing simulator bounds."""
    when = (f"computed in {cal_info['seconds']} s" if cal_info["cache"] == "computed"
            else f"from the {cal_info['cache']} cache")
    return [f"- **Missing arms are bounded logically only**: each missing arm anywhere in [0, 100]. A simulator "
            f"calibration was run ({when}, key {cal_info['digest']}) but bounds no row: " + _logical_why(a) + "."]


def _logical_why(a: pd.DataFrame) -> str:
    """``model / benchmark: why`` of each row with a missing arm that the simulator does not bound."""
    why = []
    for _, r in a[(a["missing_arms"] != "") & (a["bound_source"] != "simulator")].iterrows():
        reason = r["bound_note"] or ("no simulated structure is consistent with the reported arms"
                                     if r["n_candidates"] else "no simulated structure reaches the base")
        why.append(f"{_what(r)}: {md(reason)}")
    return "; ".join(why)


def _bounds_used(a: pd.DataFrame) -> list:
    """Which bound each row with a missing arm rests on: the simulator's, or the logical one and why."""
    gaps = a[a["missing_arms"] != ""]
    sim = int((gaps["bound_source"] == "simulator").sum())
    L = [f"  **Bounds used**: simulator-calibrated for {sim} of the {len(gaps)} rows with a missing arm"]
    if sim < len(gaps):
        L[0] += (f"; logical (each missing arm anywhere in [0, 100]) for the other {len(gaps) - sim}: "
                 + _logical_why(a))
    L[0] += "."
    return L


def _calibration_text(cal_info: dict, a: pd.DataFrame) -> list:
    g, reach = cal_info["grid"], cal_info["reach"]
    fams = ", ".join(f"`{n}` (lr {', '.join(f'{x:g}' for x in lrs)})" for n, lrs in g["families"])
    when = (f"computed in {cal_info['seconds']} s" if cal_info["cache"] == "computed"
            else f"from the {cal_info['cache']} cache")
    L = [f"- Missing arms are bounded by a simulator calibration where it applies: tabsim's bandit "
         f"(N={g['n_prompts']} prompts, K=8 answers, k in {g['n_correct']}, {g['steps']} steps, {g['seeds']} seeds) swept over prior strength "
         f"{g['prior_strength'][0]:g}..{g['prior_strength'][-1]:g} ({len(g['prior_strength'])} levels), format boost "
         f"{g['format_boost']}, heterogeneity {g['heterogeneity']}, families {fams}; {cal_info['n_structures']} "
         f"structures, one vmapped sweep per family ({when}, key {cal_info['digest']}).",
         "  Each structure is calibrated to the entry's base accuracy (prior strength interpolated; five points "
         "across the base's interval) and its training intensity (lr, log-interpolated). A candidate is consistent "
         "when every reported trained arm lies within its Bonferroni-corrected interval of the simulated value; "
         "consistent candidates fill each missing arm with the reported base plus the simulated gain of that arm, and "
         "a bound is the union of the term's intervals over them.", *_bounds_used(a),
         "  **These bounds are model-based** (tagged `(simulator: model-based)` here, `bound_source = simulator` in "
         "the CSVs, solid brackets marked `sim` in the figure): they hold only if the model trains like some "
         "structure of the simulated family. What each family can produce (its reach, points):"]
    for fam, terms in reach.items():
        L.append(f"  - `{fam}`: " + ", ".join(f"{t} [{v[0]:g}, {v[1]:g}]" for t, v in terms.items()))
    L += _outside_reach(a, *cal_info["sim_d_null_range"])
    if not {"reuse", "reuse8"} & {n for n, _ in g["families"]}:
        L.append("  The `paper` family has no clipping, so it produces no random-reward gain from clipping under "
                 "off-policy reuse; `--family reuse` adds a clipped-reuse family.")
    env = cal_info.get("null_envelope")
    if env:
        L.append(f"  The families' own d_null reach is a few points, while published random-reward runs moved real "
                 f"models by much more: every simulator bound on a missing RANDOM arm is widened to the range those "
                 f"runs measured, d_null in [{env[0]:.1f}, {env[1]:.1f}] (the registry's intervals, `null_envelope` "
                 "in `audit.csv`). A family whose reach excludes what a row's model was measured to do bounds "
                 "nothing for that row (`bound_note`).")
    L.append("  The logical bounds in `terms.csv` make no model assumption.")
    return L


def _outside_reach(a: pd.DataFrame, lo_d: float, hi_d: float) -> list:
    """The reported d_null whose estimate lies outside the families' reach ``[lo_d, hi_d]``: outside it only
    when the interval is too, else named as reaching into it."""
    out, near = [], []
    for _, r in a.iterrows():
        d = r["d_null"]
        if not (isinstance(d, float) and math.isfinite(d)) or lo_d <= d <= hi_d:
            continue
        c = term_claim({"estimate": d, "low": r["d_null_low"], "high": r["d_null_high"]}, "d_null")
        named = f"{md(r['source'])} {md(r['model'])} {md(r['benchmark'])} {c.quoted(signed=True)}"
        (out if c.high < lo_d or c.low > hi_d else near).append(named)
    if not (out or near):
        return []
    reach = f"[{lo_d:g}, {hi_d:g}]"
    text = "  "
    if out:
        text += (f"**Reported d_null outside every simulated family's reach** {reach}, interval and all: "
                 f"{', '.join(out)}. ")
    if near:
        text += f"Outside the reach at the estimate only, the interval reaching into it: {', '.join(near)}. "
    return [text + "Simulator bounds on d_null cannot contain values outside the reach; rows whose bound contradicts a "
            "d_null measured for the same model and benchmark, or whose model was measured outside every family's "
            "reach, fall back to logical bounds (see `bound_note`)."]


def _rule_text(info: dict) -> list:
    return ["", "Verdicts, on the item-unit intervals:", "",
            f"- `term_verdict` (three-term rule): a term dominates when its share of d_total (null_share, "
            f"sharpening_share, rd_share, which sum to 1) lies above {info['dominance']:g} over its whole interval: "
            "RANDOM_REWARD_DOMINATED (d_null: what a reward with no information gives, random-reward or structural "
            "gains), ELICITATION_DOMINATED (d_elicit), REWARD_DESIGN_DOMINATED (d_rd); MIXED when no share exceeds "
            "it (or two do, offset by a negative third); INCONCLUSIVE when a share's interval straddles it.",
            f"- `reference_verdict` (the reference study's rule): its elicitation share (MAJORITY - FROZEN) / d_total "
            f"includes d_null; > {info['threshold']:g} -> ELICITATION_DOMINATED, else rd share > "
            f"{info['threshold']:g} -> REWARD_DESIGN_DOMINATED, else MIXED; INCONCLUSIVE when the deciding interval "
            "straddles the threshold. A random-reward gain counts as elicitation under this rule.",
            f"- `verdict` is the {'three-term' if info['rule'] == 'terms' else 'reference'} rule (`--rule`)."]


def render_report(res: AuditResult, *, files, command: str) -> str:
    """The Markdown report of an audit."""
    a, terms, info = res.audit, res.terms, res.info
    tt = {(r["source"], r["model"], r["benchmark"], r["train_set"], r["term"]): r for _, r in terms.iterrows()}

    def term(row, name):
        return tt[_key(row) + (name,)]

    lvl = f"{100 * info['ci']:g}%"
    L = ["# Audit of published RLVR results", "", f"Command: `{md(command)}`", "", "Inputs:", ""]
    L += [f"- `{md(f)}` (sha256 {file_sha256(f)[:16]})" for f in files]
    L += ["", "## How to read it", "", "The partition of the gain of TRUE over FROZEN, in accuracy points:", ""]
    L += [f"- `{t}` = {TERM_HELP[t]}" for t in ("d_null", "d_elicit", "d_rd", "d_total", "d_naive", "d_majority",
                                                 "rd_fraction", "null_share", "sharpening_share", "rd_share",
                                                 "elicitation_share")]
    L += ["", "The three shares sum to 1, so a share above 1 or below 0 is no error: it happens when one term is "
          "negative. A random reward that costs accuracy (d_null < 0) gives a negative null share, and then the other "
          "two shares add up to more than 1; a share above 1 means that term alone gained more than the total, the "
          "rest being lost elsewhere."]
    L += ["", f"A cell `x [lo, hi]` is a point estimate with its {lvl} interval (the term is identified by the table). "
          "A cell `in [lo, hi]` is a bound: the table lacks an arm the term needs. `(simulator: model-based)` bounds "
          "come from the simulator calibration and hold only for models that train like the simulated family; "
          "`(logical)` bounds put the missing arm anywhere in [0, 100]."]
    L += _rule_text(info)
    L += _assumptions(res)

    L += ["", "## Summary", ""]
    rows = []
    for _, r in a.iterrows():
        rows.append([md(r["source"]), md(r["model"]), md(r["benchmark"]), md(r["train_set"]) or "-",
                     md(r["samples_per_item"])]
                    + [_cell(term(r, t)) for t in ("d_null", "d_elicit", "d_rd", "d_total")]
                    + [_cell(term(r, t), 2) for t in ("null_share", "sharpening_share", "rd_share")]
                    + [_verdict_cell(r), r["reference_verdict"], r["verdict_basis"]])
    L.append(_md_table(["source", "model", "benchmark", "trained on", "protocol", "d_null", "d_elicit", "d_rd",
                        "d_total", "null share", "elicit share", "rd share", "verdict", "reference rule",
                        "verdict from"], rows))
    for src, sub in a.groupby("source", sort=False):
        L += _source_section(src, sub, term)
    L += ["", "## Files", "",
          "- `audit.csv`: one row per model x benchmark x training set (accuracies, terms with interval or bound "
          "columns `<term>_low/_high`, both verdicts, notes).",
          "- `terms.csv`: one row per row x term (estimate or bounds, the range of the completions' values "
          "(`set_low`/`set_high`) and of the simulated candidates' alone (`sim_low`/`sim_high`), logical bounds).",
          "- `entries.csv`: the normalised inputs (absolute accuracies, standard errors, seeds).",
          "- `calibration.csv`: every consistent simulator candidate of the rows with missing arms.",
          f"- `terms.png` (and `terms.pdf` with `--pdf`): {figure_note(len(a)).removeprefix('terms.png shows ')}; "
          "`provenance.json`: versions, options, input hashes.", ""]
    return "\n".join(L)


def _source_section(src, sub, term) -> list:
    r0 = sub.iloc[0]
    ref = ", ".join(x for x in (f"arXiv {md(r0['arxiv'])}" if r0["arxiv"] else "",
                                f"version {md(r0['version'])}" if r0["version"] else "", md(r0["table"])) if x)
    L = ["", f"## {md(r0['paper'])} ({ref})", "", f"File `{md(r0['file'])}`; source id `{md(src)}`."]
    if r0["source_notes"]:
        L.append(f"Source notes: {md(r0['source_notes'])}.")
    kinds = sorted(set(sub["majority_kind"]) - {""})
    if kinds:
        L.append(f"Majority arm: {', '.join(kinds)}.")
    acc_rows = []
    for _, r in sub.iterrows():
        accs = [_num(r[f"acc_{x}"]) if not math.isnan(r[f"acc_{x}"]) else "-" for x in
                ("frozen", "random", "majority", "true")]
        extra = ", ".join(f"{x} {_num(r[f'acc_{x}'])}" for x in ("format", "incorrect", "self_certainty", "entropy")
                          if not math.isnan(r[f"acc_{x}"]))
        items = f"{r['n_items']}" + (" (registry)" if r["n_items_from"] == "registry" else "")
        acc_rows.append([md(r["model"]), md(r["benchmark"]), md(r["train_set"]) or "-", items,
                         md(r["samples_per_item"]), *accs, extra or "-"])
    L += ["", "Accuracies (percent, absolute):", "",
          _md_table(["model", "benchmark", "trained on", "items", "protocol", "frozen", "random", "majority", "true",
                     "other arms"], acc_rows), ""]
    for _, r in sub.iterrows():
        head = (f"- **{_what(r)}**: {_verdict_tag(r)} (reference rule: {r['reference_verdict']}); sampling unit "
                f"{r['sampling_unit']}")
        follow = []
        odd = share_notes({t: term(r, t) for t in (*SHARE_TERMS, *SHARE_TERMS.values())})
        if odd:
            follow.append("  " + " ".join(n.text for n in odd))
        if _flag(r, "verdict_model_based"):
            follow.append(f"  The verdict rests on the simulator's model-based bounds: with model-free bounds it "
                          f"would be {r['verdict_if_model_free']}.")
        if _flag(r, "fragile"):
            follow.append(f"  **Fragile**: an assumed seed sd up to 1 point from the one used gives "
                          f"{md(r['fragile_note'])}.")
        shares = ", ".join(f"{t} {_cell(term(r, t), 2)}" for t in ("null_share", "sharpening_share", "rd_share"))
        if r["identified"] == "point":
            L.append(head + f". Shares: {shares}; d_naive {_cell(term(r, 'd_naive'))}, rd_fraction "
                            f"{_cell(term(r, 'rd_fraction'), 2)}.")
            L += follow
        else:
            ident = [t for t in ("d_majority", "d_null", "d_naive", "d_total", "d_rd", "rd_share")
                     if term(r, t)["identified"] == "point"]
            shown = ", ".join(f"{t} {_cell(term(r, t), 2 if 'share' in t else 1)}" for t in ident)
            L.append(head + f". Missing arm(s): {r['missing_arms']}. The table identifies: "
                            f"{shown or 'nothing but the base'}. Shares: {shares}.")
            L += follow
            if r["bound_source"] == "simulator":
                sets = [range_text(term(r, t)) for t in PLOT_TERMS if term(r, t)["identified"] == "bounds"]
                L.append(f"  Simulator bounds (model-based) from {r['n_consistent']} of {r['n_candidates']} calibrated "
                         "candidates: " + "; ".join(sets) + ".")
                alt = term(r, "d_elicit")
                if "majority" in r["missing_arms"] and isinstance(alt.get("alt_majority_kind"), str):
                    kind = r["majority_kind"] or "online"
                    L.append(f"  The bounds use an {kind} majority arm; with an {alt['alt_majority_kind']} majority "
                             f"arm d_elicit would be in [{_num(alt['alt_low'])}, {_num(alt['alt_high'])}].")
            elif r["bound_note"]:
                L.append(f"  Logical bounds only: {md(r['bound_note'])}.")
            else:
                why = ("no simulated structure is consistent with the reported arms"
                       if r["n_candidates"] else "no simulator calibration")
                L.append(f"  Logical bounds only ({why}; {r['n_candidates']} candidates tried).")
        if r["verdict_if_independent"] != r["verdict"]:
            L.append(f"  Counting the {md(r['samples_per_item'])} samples of each item as independent trials would "
                     f"give {r['verdict_if_independent']}: that verdict does not hold with the item as the unit.")
        if r["format_note"]:
            L.append(f"  Format: {md(r['format_note'])}.")
        if r["input_flags"]:
            L.append(f"  Input flags: {md(r['input_flags'])}.")
    return L


def write_outputs(res: AuditResult, out_dir, *, files, command: str, provenance_extra: dict | None = None,
                  overwrite: bool = False, log: Callable[[str], None] | None = None,
                  started: float | None = None, formats=None) -> Path:
    """Write every output into ``out_dir``, published whole (a run store: see :mod:`tabsim.runtime.store`).
    ``formats``: the figure's file formats (default the user's, :func:`tabsim.plotting.formats.figure_formats`).

    A non-empty ``out_dir`` is refused unless ``overwrite`` (the old contents stay until the new audit
    is published). Inside an open store's staging folder the files are written there directly.
    ``log``: where the figure's drawing is said (one line); ``started``: the ``time.perf_counter()`` reading
    provenance's ``wall_seconds`` counts from (``tabsim audit`` gives its process's start; None: not recorded).
    """
    out = Path(out_dir)
    kw = dict(files=files, command=command, provenance_extra=provenance_extra, log=log, started=started,
              formats=formats)
    if writing_into(out):
        _write_files(res, out, **kw)
        return out
    with RunStore(out, overwrite=overwrite, description="tabsim audit") as store:
        _write_files(res, store.dir, **kw)
    return out


def _write_files(res: AuditResult, folder: Path, *, files, command: str, provenance_extra: dict | None,
                 log: Callable[[str], None] | None = None, started: float | None = None, formats=None) -> None:
    write_frame(folder / "audit.csv", csv_safe(res.audit))
    write_frame(folder / "terms.csv", csv_safe(res.terms))
    write_frame(folder / "entries.csv", csv_safe(res.entries))
    write_frame(folder / "calibration.csv", csv_safe(res.calibration))
    atomic_write_text(folder / "report.md", render_report(res, files=files, command=command))
    if log is not None:
        many = len(res.audit) > MAX_MODEL_ROWS
        log("drawing the figure (terms.png)" + (f": {figure_note(len(res.audit))}" if many else ""))
    save_figure(plot_terms(res), folder / "terms", formats)
    # written last: its wall time covers every other file
    wall = {} if started is None else {"wall_seconds": round(time.perf_counter() - started, 3)}
    write_json(folder / "provenance.json", provenance(
        command=command, inputs=[{"path": str(f), "sha256": file_sha256(f)} for f in files],
        options={k: v for k, v in res.info.items() if k != "calibration"},
        calibration=res.info.get("calibration"), **wall, **(provenance_extra or {})))
