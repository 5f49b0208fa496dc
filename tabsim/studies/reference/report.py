"""The reference study's ``report.md`` and ``summary.json``."""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from tabsim.studies.reference.analysis import term_row
from tabsim.studies.reference.design import (
    ADDITIVITY_THRESHOLD,
    CI_LEVEL,
    FAMILY_SEED0,
    GATE_TOLERANCE,
    GRID_PRIORS,
    INTERVAL_METHOD,
    POWER_PRIOR,
    SHARE_THRESHOLD,
    STRONG_PRIOR,
    TARGET_HALF_WIDTH,
    WEAK_PRIOR,
    Settings,
    uniform_prior,
)
from tabsim.studies.reference.paper import compare_every_point, dotted_keys, remarks, settings_changes, value_at


def _fmt(x, nd=3) -> str:
    if x is None:
        return "-"
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    if isinstance(x, (float, np.floating)):
        if np.isnan(x):
            return "n/a"
        if np.isinf(x):
            return "inf" if x > 0 else "-inf"
        return f"{x:.{nd}f}"
    return str(x)


def _ci(lo, hi, nd=3) -> str:
    return f"[{_fmt(lo, nd)}, {_fmt(hi, nd)}]"


def md_table(frame: pd.DataFrame, nd: int = 3) -> str:
    cols = list(frame.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(_fmt(v, nd) for v in row) + " |")
    return "\n".join(lines)


def render_report(a: dict, cmp: pd.DataFrame, reasons: dict, s: Settings, cfg, wall: float, prov: dict, *,
                  figures: bool = True) -> str:
    """``report.md``: the headline table, every point beside the paper, then one section per study.

    ``figures``: whether ``figures/`` was written (``--no-figure``: the report names none)."""
    L = _intro(s, cfg, wall, prov, figures)
    L += _headline(cmp, reasons, s, cfg)
    L += _every_point(a, s)
    notes = remarks(a, cfg)
    L += _sweep_section(a, notes)
    L += _factorial_section(a, s, notes)
    L += _gate_section(a, s, cfg, notes)
    L += _families_section(a, s)
    L += _power_section(a, s, figures)
    L += _files_section(prov, figures)
    return "\n".join(L)


def _intro(s: Settings, cfg, wall: float, prov: dict, figures: bool) -> list[str]:
    """The title and the paragraph on sizes, wall time and intervals."""
    sets = ", ".join(f"`{k}={value_at(s.overrides, k)}`" for k in dotted_keys(s.overrides))
    return ["# tabsim reproduce: the reference study (arXiv 2606.05932)\n",
            f"Preset `{s.preset}`, scale `{s.scale}`" + (f", overrides {sets}" if sets else "")
            + f": N={cfg.task.n_prompts} prompts, K={cfg.task.n_answers} answers "
            f"(k={cfg.task.n_correct} correct), G={cfg.train.group_size}, batch {cfg.train.batch_size}; "
            f"{s.seeds} seeds x {s.steps} steps per condition (sweep, crossover grid, gate, families, power), "
            f"{s.factorial_seeds} seeds x {s.factorial_steps} steps per factorial cell. "
            f"Wall time {wall:.1f} s for the studies (compilation{' and figures' if figures else ''} included)"
            + (f", {prov['process_seconds']:.1f} s since the process started (imports included)"
               if prov.get("process_seconds") else "") + ". "
            f"All intervals are {CI_LEVEL:.0%}: Student t over seeds for the partition terms and Fieller for "
            f"their ratios (with {s.seeds} seeds the BCa bootstrap under-covers: about 0.88 against t's 0.95 on "
            f"these very differences, see experiments/interval_coverage); "
            f"seeds are the independent unit (arms of one seed share their random numbers). "
            f"pass@1 is the exact policy mass on the correct answers.\n"]


def _headline(cmp: pd.DataFrame, reasons: dict, s: Settings, cfg) -> list[str]:
    """The headline numbers beside the paper's, with the settings this run changes and each difference."""
    L = ["## Headline numbers: tabsim beside the paper\n",
         "`noise SE` is the standard error of the difference, assuming the paper's 8 seeds had tabsim's "
         "per-seed spread: `se * sqrt(1 + n / 8)`; a difference beyond 1.96 of it is flagged.\n"]
    t = cmp.assign(interval=[_ci(lo, hi) for lo, hi in zip(cmp.ci_low, cmp.ci_high)])
    t = t[["label", "paper", "tabsim", "interval", "noise_se", "z", "beyond_seed_noise"]]
    t.columns = ["quantity", "paper", "tabsim", "tabsim 95% CI", "noise SE", "z", "differs beyond seed noise"]
    L.append(md_table(t) + "\n")
    changes = settings_changes(s, cfg)
    if changes:
        L.append("**This run changes the paper's settings** (" + "; ".join(changes) + "). The headline numbers "
                 "belong to the paper's settings, so differences here are expected and say nothing about the "
                 "reproduction; `tabsim reproduce` without --scale, --steps, --preset or --set runs the paper's "
                 "settings.\n")
    agree = cmp[~cmp.beyond_seed_noise]
    if len(agree):
        L.append("Within the seed noise: " + ", ".join(agree.label) + ".\n")
    for row in cmp[cmp.beyond_seed_noise].itertuples():
        L.append(f"- **{row.label} differs**: tabsim {row.tabsim:.3f} (CI {_ci(row.ci_low, row.ci_high)}) vs the "
                 f"paper's {row.paper:.3f}, a difference of {row.difference:+.3f} = {row.z:+.1f} noise SE. "
                 f"Reason: {reasons[row.quantity]}.")
    L.append("")
    return L


def _every_point(a: dict, s: Settings) -> list[str]:
    """Every sweep point and factorial term beside the paper's reported or implied number."""
    every = compare_every_point(a, s)
    L = ["## Every point beside the paper\n",
         "Every point of the prior sweep and every factorial term. `reported`: a number the paper gives; "
         "`implied`: what its design or its numbers entail (on-policy updates without a clip give d_null = 0; "
         f"d_elicit is negative below the crossover p* = {a['mode_switch']:.3f} and positive above, so the rd "
         "fraction is above 1 below it and below 1 above; |AC| / 0.385 is the largest main coefficient and "
         "|AC| bounds the other interactions when AC is the largest interaction). `agrees`: the tabsim interval "
         "contains the paper's value or lies on its side (`undetermined` when it straddles the claim); reported "
         "values use the seed-noise rule of the table above.\n"]
    ev = every.assign(interval=[_ci(lo, hi) for lo, hi in zip(every.ci_low, every.ci_high)])
    ev = ev[["section", "p_s", "term", "paper", "paper_kind", "tabsim", "interval", "agrees"]].rename(
        columns={"interval": "tabsim 95% CI", "paper_kind": "paper's number is"})
    ev["p_s"] = [("" if not np.isfinite(p) else f"{p:.2f}") for p in ev["p_s"]]
    L.append(md_table(ev) + "\n")
    n_no = int((every.agrees == "no").sum())
    n_und = int((every.agrees == "undetermined").sum())
    L.append(f"{len(every) - n_no - n_und} of {len(every)} comparisons agree, {n_no} disagree, "
             f"{n_und} undetermined.\n")
    return L


def _sweep_section(a: dict, notes: dict) -> list[str]:
    """Section 1: the partition at each prior and the crossover of d_elicit."""
    summ, x = a["sweep_summary"], a["crossover"]
    L = ["## 1. Prior sweep and the crossover\n"]
    wide = summ.pivot(index="prior_strength", columns="term", values="estimate")
    sp = a["sweep_seeds"].groupby("prior_strength")[["acc_frozen", "acc_random", "acc_majority", "acc_true"]].mean()
    rows = []
    for p in wide.index:
        de, dr, rf = (term_row(summ, k, prior_strength=float(p)) for k in ("d_elicit", "d_rd", "rd_fraction"))
        fi = a["fieller"].set_index("prior_strength").loc[p]
        rows.append({"p_s": p, **{c.removeprefix("acc_"): sp.loc[p, c] for c in sp.columns},
                     "d_null": wide.loc[p, "d_null"], "d_elicit": de.estimate,
                     "d_elicit CI": _ci(de.ci_low, de.ci_high),
                     "d_rd": dr.estimate, "d_rd CI": _ci(dr.ci_low, dr.ci_high),
                     "rd fraction": rf.estimate, "Fieller CI": _ci(fi.fieller_low, fi.fieller_high, 2)})
    L.append(md_table(pd.DataFrame(rows)) + "\n")
    L.append("The rd fraction is d_rd / d_naive; the Fieller interval is the "
             "exact t-based set for a ratio of means (unbounded, `-inf..inf`, when d_naive is not significantly "
             "non-zero).\n")
    if np.isfinite(x.estimate):
        L.append(f"**Crossover** (first root of mean d_elicit on the grid {GRID_PRIORS[0]:.2f}..{GRID_PRIORS[-1]:.2f} "
                 f"step 0.05; the interval inverts a t band over paired seeds at the root): p_s = {x.estimate:.3f}, "
                 f"CI {_ci(x.ci_low, x.ci_high)}; {x.root_fraction:.0%} of paired bootstrap resamples have a root "
                 f"on the grid. d_elicit is {x.direction} through it"
                 + (" (negative below: majority reward amplifies a wrong mode there)" if x.direction == "increasing"
                    else "") + f". For reference, the prior's mode "
                 f"becomes a correct answer at p* = k(1+fK)/(k(1+fK)+K-k) = {a['mode_switch']:.3f}.\n")
    else:
        L.append("**Crossover**: mean d_elicit does not change sign on the grid at this size.\n")
    L += [n + "\n" for n in notes["sweep"]]
    return L


def _factorial_section(a: dict, s: Settings, notes: dict) -> list[str]:
    """Section 2: the factorial's ANOVA, coefficients and interaction ratio."""
    fit, ratio = a["fit"], a["ratio"]
    L = ["## 2. The 2x2x2 factorial\n",
         f"Seed-level OLS `{fit.formula}` on final pass@1 ({s.factorial_seeds} seeds per cell), "
         "A = reward (TRUE +1, MAJORITY -1), B = dynamic-sampling filter (on +1, off -1), C = prior "
         f"({STRONG_PRIOR} +1, {WEAK_PRIOR} -1). A coefficient is half the high-minus-low contrast.\n"]
    an = fit.anova.reset_index().rename(columns={"index": "source"})
    L.append("ANOVA (type 3):\n\n" + md_table(an, 4) + "\n")
    co = fit.coefficients[["term", "estimate", "std_err", "ci_low", "ci_high", "p_value", "p_holm"]]
    L.append("Coefficients (Holm-adjusted p over the 7 effects):\n\n" + md_table(co, 4) + "\n")
    L.append(f"**Interaction ratio** max|interaction| / max|main| = |{ratio.max_interaction_term}| / "
             f"|{ratio.max_main_term}| = {ratio.ratio:.3f}, bootstrap CI {_ci(ratio.ci_low, ratio.ci_high)} "
             f"(seeds resampled within cells, {ratio.n_resamples} resamples). Decision against the pre-set "
             f"threshold {ADDITIVITY_THRESHOLD}: **{ratio.decision}** (interval rule); the reference's point rule "
             f"says {ratio.reference_decision}.\n")
    L += [n + "\n" for n in notes["factorial"]]
    return L


def _gate_section(a: dict, s: Settings, cfg, notes: dict) -> list[str]:
    """Section 3: the pilot gate's classes and their stability across pilots."""
    L = ["## 3. Points-vs-bounds pilot gate\n",
         f"One pilot = {s.pilot_seeds} seeds. A term is a point when its t CI excludes 0 and is narrower than "
         f"the pre-set tolerance {GATE_TOLERANCE}, a sign when it excludes 0 but is wider, bounds otherwise "
         "(then the CI intersected with [-1, 1] is the bound). The reference gate: points iff the percentile "
         "CI of d_elicit excludes 0. Strong: p_s = 0.80 with the format boost; uniform: p_s = k/K = "
         f"{uniform_prior(cfg):.2f} with format_boost 0 (every answer equally likely, near the crossover).\n"]
    gp = a["gate_pilot"][["condition", "term", "estimate", "ci_low", "ci_high", "width", "classification",
                          "bound_low", "bound_high", "reference_gate"]]
    L.append(md_table(gp) + "\n")
    st = a["gate_stability"][["condition", "term", "frac_point", "frac_sign", "frac_bounds", "modal_classification",
                              "frac_reference_points", "n_replicates"]]
    L.append(f"Stability over {s.pilot_replicates} disjoint pilots of {s.pilot_seeds} seeds (t CIs): "
             "fraction of pilots giving each class.\n\n" + md_table(st, 2) + "\n")
    L += [n + "\n" for n in notes["gate"]]
    return L


def _families_section(a: dict, s: Settings) -> list[str]:
    """Section 4: the two simulated families and their share verdicts."""
    L = ["## 4. Simulated families and verdicts\n",
         f"Rule (the reference study's, docs/science.md): elicitation share > {SHARE_THRESHOLD} -> ELICITATION_DOMINATED, else rd share > "
         f"{SHARE_THRESHOLD} -> REWARD_DESIGN_DOMINATED, else MIXED; on the Fieller intervals a deciding share "
         f"that straddles {SHARE_THRESHOLD} gives INCONCLUSIVE. Families use fresh seeds "
         f"({FAMILY_SEED0}..{FAMILY_SEED0 + s.seeds - 1}).\n"]
    v = a["verdicts"].assign(elicitation_ci=lambda d: [_ci(lo, hi) for lo, hi in
                                                       zip(d.elicitation_ci_low, d.elicitation_ci_high)],
                             rd_ci=lambda d: [_ci(lo, hi) for lo, hi in zip(d.rd_ci_low, d.rd_ci_high)])
    v = v[["family", "elicitation_share", "elicitation_ci", "rd_share", "rd_ci", "verdict", "point_verdict", "reason"]]
    L.append(md_table(v) + "\n")
    return L


def _power_section(a: dict, s: Settings, figures: bool) -> list[str]:
    """Section 5: the power curve, the recommended seed counts and the smallest detectable difference."""
    L = [f"## 5. Power at p_s = {POWER_PRIOR:.2f}\n",
         f"From a pilot of {s.power_seeds} seeds, 1000 simulated studies per seed count (t intervals).\n"]
    pc = a["power_curve"][["term", "n_seeds", "pilot_estimate", "mean_half_width", "detection_rate"]]
    L.append(md_table(pc, 4) + "\n")
    for term, rec in a["power_recommend"].items():
        L.append(f"- {term}: **{rec['n_seeds']} seeds** for a half-width of {TARGET_HALF_WIDTH} "
                 f"(predicted {rec['predicted_half_width']:.4f}; {rec['note']}).")
    L.append("")
    mde = a["power_mde"].pivot(index="n_seeds", columns="term", values="mde").reset_index()
    L.append("Smallest true difference detected with 80% power by a two-sided t test at 5%, from the pilot's "
             f"per-seed spread{' (`figures/power`)' if figures else ''}:\n\n" + md_table(mde, 4) + "\n")
    return L


def _files_section(prov: dict, figures: bool) -> list[str]:
    """The files written and the provenance line."""
    return ["## Files and provenance\n",
            "`summary.json` (headline numbers), `tables/*.csv` (every table above), `data/*.parquet|csv` "
            "(tidy run frames, one row per condition x seed x arm x eval step), "
            + ("`figures/*.png` (and `.pdf` with `--pdf`), " if figures else "no figures (`--no-figure`), ") +
            "`config.json` (settings and designs), `provenance.json`.\n",
            f"tabsim {prov.get('tabsim_version')}, commit `{prov.get('git_commit')}`, jax {prov.get('jax')} on "
            f"{prov.get('backend')}, {prov.get('time_utc')}.\n"]


def summary_json(a: dict, cmp: pd.DataFrame, s: Settings) -> dict:
    """``summary.json``: the promised schema plus the intervals behind every decision."""
    sp = a["sweep_seeds"]
    means = sp.groupby("prior_strength")[["acc_frozen", "acc_random", "acc_majority", "acc_true", "d_null",
                                         "d_elicit", "d_rd", "d_naive"]].mean()
    summ = a["sweep_summary"]
    sweep = []
    for p, r in means.iterrows():
        sweep.append({"prior_strength": float(p), **{k: float(val) for k, val in r.items()},
                      "rd_fraction": float(term_row(summ, "rd_fraction", prior_strength=float(p)).estimate)})
    coefs = a["fit"].coefficients.set_index("term")
    terms = ("A", "B", "C", "AB", "AC", "BC", "ABC")
    fams = []
    ver = a["verdicts"].set_index("family")
    for name, p in (("strong", STRONG_PRIOR), ("weak", WEAK_PRIOR)):
        fams.append({"name": name, "prior_strength": p, "elicitation_share": float(ver.loc[name, "elicitation_share"]),
                     "rd_share": float(ver.loc[name, "rd_share"]), "verdict": str(ver.loc[name, "verdict"])})
    x, ratio = a["crossover"], a["ratio"]
    return {
        "prior_sweep": sweep,
        "factorial": {"coefficients": {t: float(coefs.loc[t, "estimate"]) for t in terms},
                      "interaction_ratio": float(ratio.ratio)},
        "families": fams,
        "intervals": {
            "prior_sweep": summ[summ["term"].isin(["d_null", "d_elicit", "d_rd", "d_naive", "rd_fraction"])][
                ["prior_strength", "term", "estimate", "ci_low", "ci_high"]].to_dict("records"),
            "factorial_coefficients": {t: [float(coefs.loc[t, "ci_low"]), float(coefs.loc[t, "ci_high"])]
                                       for t in terms},
            "interaction_ratio": {"ci": [ratio.ci_low, ratio.ci_high], "threshold": ratio.threshold,
                                  "decision": ratio.decision, "reference_decision": ratio.reference_decision},
            "families": a["verdicts"].to_dict("records"),
        },
        "crossover": {"estimate": x.estimate, "ci": [x.ci_low, x.ci_high], "root_fraction": x.root_fraction,
                      "mode_switch_prior": a["mode_switch"]},
        "gate": a["gate_pilot"][["condition", "term", "classification", "ci_low", "ci_high", "reference_gate"]]
        .to_dict("records"),
        "gate_stability": a["gate_stability"].to_dict("records"),
        "power": {"target_half_width": TARGET_HALF_WIDTH, "recommended": a["power_recommend"]},
        "paper_comparison": cmp.to_dict("records"),
        "paper_comparison_every_point": compare_every_point(a, s).replace({np.nan: None}).to_dict("records"),
        "interval_method": INTERVAL_METHOD,
        "settings": dataclasses.asdict(s),
    }
