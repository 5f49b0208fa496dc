"""``audit(entries) -> AuditResult``: the partition, intervals, bounds and verdicts of every entry."""
from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import pandas as pd

from tabsim.audit import calibrate as cal
from tabsim.audit import checks
from tabsim.audit import measured as ms
from tabsim.audit.completions import logical_completions, with_null_envelope
from tabsim.audit.entry import EXTRA_ARMS, PARTITION_ARMS, Entry
from tabsim.audit.estimate import (SHARES, TERMS, arm_moments, identified_terms, paired_cov, term_intervals,
                                   term_unions)
from tabsim.audit.verdict import RULES, term_verdict
from tabsim.stats.verdict import INCONCLUSIVE, share_verdict

WIDE_TERMS = ("d_majority", "d_null", "d_elicit", "d_rd", "d_naive", "d_total", "bias", "rd_fraction",
              "elicitation_share", "null_share", "sharpening_share", "rd_share")


@dataclasses.dataclass
class AuditResult:
    """Frames of an audit.

    Attributes:
      audit: one row per entry (model x benchmark x training set): accuracies, terms with bounds, verdicts.
      terms: one row per entry x term: estimate or bounds, set range, logical bounds.
      entries: the normalised inputs (absolute accuracies, variances, seeds).
      calibration: one row per calibrated simulator candidate of entries with missing arms.
      info: options and calibration info (for provenance and the report).
    """

    audit: pd.DataFrame
    terms: pd.DataFrame
    entries: pd.DataFrame
    calibration: pd.DataFrame
    info: dict


def _check_options(ci, seed_sd, threshold, rule, dominance):
    if not isinstance(ci, (int, float)) or not 0.0 < float(ci) < 1.0:
        raise ValueError(f"ci must be a confidence level in (0, 1), got {ci!r}")
    if not isinstance(seed_sd, (int, float)) or not math.isfinite(seed_sd) or seed_sd < 0:
        raise ValueError(f"seed_sd must be a finite number >= 0 (points), got {seed_sd!r}")
    if not isinstance(threshold, (int, float)) or not 0.0 < float(threshold) < 1.0:
        raise ValueError(f"threshold must be a share in (0, 1), got {threshold!r}")
    if not isinstance(dominance, (int, float)) or not 0.0 < float(dominance) < 1.0:
        raise ValueError(f"dominance must be a share in (0, 1), got {dominance!r}")
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")


def _reference(by: dict, threshold: float) -> dict:
    """The reference study's rule on its elicitation share (d_null included) and the rd share."""
    e, r = by["elicitation_share"], by["rd_share"]
    if e["identified"] == "point":
        ep, rp = e["estimate"], r["estimate"]
    else:
        def mid(x):
            ok = math.isfinite(x["set_low"]) and math.isfinite(x["set_high"])
            return 0.5 * (x["set_low"] + x["set_high"]) if ok else 0.0
        ep, rp = mid(e), mid(r)
    if not all(math.isfinite(x) for x in (ep, rp)):
        return {"verdict": INCONCLUSIVE, "point": "", "reason": "d_total is 0 or undefined, so the shares are undefined"}
    sv = share_verdict(ep, rp, elicitation_ci=(e["low"], e["high"]), rd_ci=(r["low"], r["high"]), threshold=threshold)
    return {"verdict": sv.verdict, "point": sv.point_verdict if e["identified"] == "point" else "", "reason": sv.reason}


def _terms_rule(by: dict, threshold: float):
    return term_verdict({s: (by[s]["estimate"], by[s]["low"], by[s]["high"]) for s in SHARES}, threshold=threshold)


def _side(entry: Entry, unit: str, *, ci, seed_sd, structs, grid, null_envelope=None) -> dict:
    """Every term of ``entry`` with the arms' variances of one sampling unit."""
    mean, var, note = arm_moments(entry, seed_sd=seed_sd, unit=unit)
    cov = paired_cov(entry)
    present = [a for a in PARTITION_ARMS if a in mean]
    ident = set(identified_terms(present))
    fill_m = np.array([[mean.get(a, 0.0) for a in PARTITION_ARMS]])
    fill_v = np.array([[var.get(a, 0.0) for a in PARTITION_ARMS]])
    point = term_intervals(fill_m, fill_v, ci=ci, cov=cov)
    log_m, log_v = logical_completions(entry, seed_sd=seed_sd, unit=unit)
    logical = term_intervals(log_m, log_v, ci=ci, cov=cov)
    primary, source, calib, alt, sim_u = logical, "logical", None, None, None
    if entry.missing and structs is not None:
        calib = cal.calibrate_entry(entry, structs, grid=grid, ci=ci, seed_sd=seed_sd, unit=unit)
        widen = null_envelope is not None and "random" in entry.missing
        if calib.n_consistent:
            cm, cv = calib.means, calib.variances
            sim_u = term_unions(term_intervals(cm, cv, ci=ci, cov=cov))  # the simulated candidates alone
            if widen:  # the simulator's own d_null reach is a few points; real models moved much further
                cm, cv = with_null_envelope(cm, cv, null_envelope, seed_sd=seed_sd)
            primary, source = term_intervals(cm, cv, ci=ci, cov=cov), "simulator"
        if "majority" in entry.missing:
            other = "offline" if (entry.majority_kind or "online") == "online" else "online"
            c2 = cal.calibrate_entry(entry, structs, grid=grid, ci=ci, seed_sd=seed_sd, majority_kind=other, unit=unit)
            if c2.n_consistent:
                m2, v2 = c2.means, c2.variances
                if widen:
                    m2, v2 = with_null_envelope(m2, v2, null_envelope, seed_sd=seed_sd)
                alt = (other, term_intervals(m2, v2, ci=ci, cov=cov))
    by, free = {}, {}
    logical_u, primary_u = term_unions(logical), term_unions(primary)
    alt_u = term_unions(alt[1]) if alt is not None else None
    for t in TERMS:
        l_lo, l_hi, l_slo, l_shi = logical_u[t]
        rec = {"term": t, "logical_low": l_lo, "logical_high": l_hi}
        if t in ident:
            est, lo, hi = (float(x[0]) for x in point[t])
            rec.update(identified="point", estimate=est, low=lo, high=hi, set_low=est, set_high=est,
                       bound_source="interval")
            free[t] = dict(rec)
        else:
            free[t] = {**rec, "identified": "bounds", "estimate": math.nan, "low": l_lo, "high": l_hi,
                       "set_low": l_slo, "set_high": l_shi, "bound_source": "logical"}
            lo, hi, s_lo, s_hi = primary_u[t]
            rec.update(identified="bounds", estimate=math.nan, low=lo, high=hi, set_low=s_lo, set_high=s_hi,
                       bound_source=source, sim_low=sim_u[t][2] if sim_u else math.nan,
                       sim_high=sim_u[t][3] if sim_u else math.nan)
        if alt_u is not None and t not in ident:
            a_lo, a_hi, _, _ = alt_u[t]
            rec.update(alt_majority_kind=alt[0], alt_low=a_lo, alt_high=a_hi)
        by[t] = rec
    return {"by": by, "free": free, "mean": mean, "var": var, "note": note, "source": source, "calib": calib,
            "ident": ident}


def _unit_label(entry: Entry) -> str:
    if entry.per_item and all(a in entry.per_item for a in entry.arms if a in PARTITION_ARMS):
        return "items (clustered, per-item results)"
    return "items" if entry.protocol != "avg" else f"items (avg@{entry.samples_per_item} without per-item results)"


def audit_entry(entry: Entry, *, ci: float = 0.95, seed_sd: float = 0.0, threshold: float = 0.60,
                structs: Optional[list] = None, grid: Optional[cal.CalibrationGrid] = None,
                rule: str = "terms", dominance: float = 0.5, null_envelope: Optional[tuple] = None) -> dict:
    """Audit one entry.

    The intervals take the benchmark item as the sampling unit (conservative for avg@k without
    per-item results); for avg@k entries the independent-samples intervals (``unit="trials"``) are
    given beside them (``low_trials``/``high_trials``, ``verdict_if_independent``) as the optimistic
    case. Verdicts use the conservative intervals.

    Args:
      entry: validated entry.
      ci: two-sided level of every interval.
      seed_sd: assumed seed sd (points) of single-run trained arms.
      threshold: share threshold of the reference rule (0.60).
      structs: calibration tables (:func:`tabsim.audit.calibrate.structures`); None = logical bounds only.
      grid: the calibration grid (needed with ``structs``).
      rule: which rule fills ``verdict``: ``terms`` (the three-term rule, :mod:`tabsim.audit.verdict`)
        or ``reference`` (the reference study's rule); both are always in the row.
      dominance: share above which a term dominates in the three-term rule (0.5: more than the other
        two terms together).
      null_envelope: ``(low, high)`` of ``d_null`` measured in published random-reward runs
        (:func:`tabsim.audit.measured.null_envelope`); a simulator bound on a missing RANDOM arm is
        widened to it. None: the simulator's own reach only.

    Returns:
      dict with keys ``row`` (wide record), ``terms`` (list of records), ``calibration`` (frame or None).
    """
    side = _side(entry, "items", ci=ci, seed_sd=seed_sd, structs=structs, grid=grid, null_envelope=null_envelope)
    opt = None
    if entry.protocol == "avg" and _unit_label(entry).startswith("items (avg"):
        opt = _side(entry, "trials", ci=ci, seed_sd=seed_sd, structs=structs, grid=grid, null_envelope=null_envelope)
    base = {"source": entry.source["id"], "model": entry.model, "benchmark": entry.benchmark,
            "train_set": entry.train_set}
    row = _describe(entry, base, side["mean"], side["var"])
    term_rows = []
    for t in TERMS:
        rec = {**base, **side["by"][t]}
        if opt is not None:
            rec.update(low_trials=opt["by"][t]["low"], high_trials=opt["by"][t]["high"])
        term_rows.append(rec)
    for t in WIDE_TERMS:
        r = side["by"][t]
        row[t], row[f"{t}_low"], row[f"{t}_high"] = r["estimate"], r["low"], r["high"]
        if opt is not None:
            row[f"{t}_low_trials"], row[f"{t}_high_trials"] = opt["by"][t]["low"], opt["by"][t]["high"]
    _add_verdicts(row, side, opt, rule=rule, dominance=dominance, threshold=threshold)
    _add_notes(row, entry, side, null_envelope, ci=ci)
    calib, cand = side["calib"], None
    if calib is not None and calib.n_consistent:
        cand = calib.candidates[calib.candidates["consistent"]].assign(**base)
        cand = cand[list(base) + [c for c in cand.columns if c not in base]]
    return {"row": row, "terms": term_rows, "calibration": cand}


def _describe(entry: Entry, base: dict, mean: dict, var: dict) -> dict:
    """The wide row's first columns: the entry, its source and protocol, its arms' accuracies and errors."""
    row = {**base, "paper": entry.source["paper"], "source_notes": entry.source.get("notes", ""),
           "arxiv": entry.source["arxiv"], "version": entry.source["version"], "table": entry.source["table"],
           "file": entry.file, "n_items": entry.n_items, "n_items_from": entry.n_items_from,
           "samples_per_item": entry.decoding, "sampling_unit": _unit_label(entry), "scale": entry.scale,
           "majority_kind": entry.majority_kind or "", "gamma": entry.gamma,
           "arms_present": ",".join([a for a in PARTITION_ARMS if a in mean] + [a for a in EXTRA_ARMS if a in entry.arms]),
           "missing_arms": ",".join(entry.missing)}
    for a in PARTITION_ARMS:
        row[f"acc_{a}"] = mean.get(a, math.nan)
        row[f"se_{a}"] = math.sqrt(var[a]) if a in var else math.nan
    for a in EXTRA_ARMS:
        row[f"acc_{a}"] = entry.arms[a].mean if a in entry.arms else math.nan
    return row


def _add_verdicts(row: dict, side: dict, opt: Optional[dict], *, rule: str, dominance: float, threshold: float):
    """Both rules' verdicts, the chosen one's, the optimistic (independent samples) and the model-free ones."""
    by, source = side["by"], side["source"]
    tv, ref = _terms_rule(by, dominance), _reference(by, threshold)
    chosen = {"terms": (tv.verdict, tv.point_verdict, tv.reason),
              "reference": (ref["verdict"], ref["point"], ref["reason"])}
    row["verdict"], row["point_verdict"], row["verdict_reason"] = chosen[rule]
    row["verdict_rule"] = rule
    row.update(term_verdict=tv.verdict, term_point_verdict=tv.point_verdict, reference_verdict=ref["verdict"],
               reference_point_verdict=ref["point"], reference_reason=ref["reason"])
    if opt is not None:
        row["term_verdict_if_independent"] = _terms_rule(opt["by"], dominance).verdict
        row["reference_verdict_if_independent"] = _reference(opt["by"], threshold)["verdict"]
    else:
        row["term_verdict_if_independent"], row["reference_verdict_if_independent"] = tv.verdict, ref["verdict"]
    row["verdict_if_independent"] = row[f"{'term' if rule == 'terms' else 'reference'}_verdict_if_independent"]
    # the verdict the table gives without the simulator: where it differs, the verdict rests on the model
    free = _terms_rule(side["free"], dominance).verdict if rule == "terms" else _reference(side["free"], threshold)["verdict"]
    row["verdict_if_model_free"] = free
    row["verdict_model_based"] = bool(source == "simulator" and free != row["verdict"])
    if row["verdict_model_based"]:
        row["verdict_reason"] = (f"model-based: rests on simulator bounds, which hold only if the model trains like "
                                 f"the simulated family (model-free bounds give {free}); " + row["verdict_reason"])


def _add_notes(row: dict, entry: Entry, side: dict, null_envelope: Optional[tuple], *, ci: float):
    """What the bounds rest on, the calibration's counts, and the notes on variances, format and inputs."""
    source, calib = side["source"], side["calib"]
    row["verdict_basis"] = "interval" if not entry.missing else f"{source} bounds"
    row["identified"] = "point" if not entry.missing else "bounds"
    row["bounded_terms"] = ",".join(t for t in TERMS if t not in side["ident"])
    row["bound_source"] = "" if not entry.missing else source
    row["bound_note"] = ""
    row["null_envelope"] = ""
    if source == "simulator" and null_envelope is not None and "random" in entry.missing:
        row["null_envelope"] = (f"RANDOM filled over the measured d_null range [{null_envelope[0]:.1f}, "
                                f"{null_envelope[1]:.1f}] as well as the simulator's")
    row["n_consistent"] = calib.n_consistent if calib is not None else 0
    row["n_candidates"] = calib.n_candidates if calib is not None else 0
    row["variance_note"] = "; ".join(f"{a}: {n}" for a, n in side["note"].items())
    row["format_note"] = checks.format_note(entry, side["mean"], side["var"], ci=ci)
    row["input_flags"] = " | ".join(entry.flags)


# Seed spread over which a verdict must hold not to be fragile: up to this many points from the one used.
FRAGILE_SEED_SD = 1.0
FRAGILE_STEPS = 4


def _fragility_sds(seed_sd: float) -> list:
    """Seed sds within ``FRAGILE_SEED_SD`` of ``seed_sd`` (>= 0), in steps of a quarter point."""
    step = FRAGILE_SEED_SD / FRAGILE_STEPS
    out = [seed_sd + k * step for k in range(-FRAGILE_STEPS, FRAGILE_STEPS + 1) if k != 0]
    return [round(s, 6) for s in out if s >= 0]


def _entry_row(entry: Entry, **kw) -> dict:
    """:func:`audit_entry`'s row alone (its terms and calibration dropped at once)."""
    return {"row": audit_entry(entry, **kw)["row"]}


def _audit_rows(entries, structs, reach, registry, *, seed_sd, rows_only: bool = False, **kw) -> list:
    """:func:`audit_entry` of every entry (``rows_only``: its row alone), simulator bounds that a measurement
    contradicts set aside."""
    one = _entry_row if rows_only else audit_entry
    outs = [one(e, structs=structs, seed_sd=seed_sd, **kw) for e in entries]
    if structs is not None:
        # a family whose reach excludes what the row's model was measured to do bounds nothing for it
        for i, why in checks.families_excluded(entries, [o["row"] for o in outs], reach, registry,
                                               ci=kw["ci"]).items():
            keep = [st for st in structs if st.key["family"] not in why]
            if len(keep) == len(structs) or not keep:
                continue  # none excluded, or all: outside_family's logical fallback below
            outs[i] = one(entries[i], structs=keep, seed_sd=seed_sd, **kw)
            r = outs[i]["row"]
            r["bound_note"] = "families set aside: " + "; ".join(why.values())
            r["verdict_reason"] = f"{r['bound_note']}; {r['verdict_reason']}"
        for i, why in checks.outside_family(entries, [o["row"] for o in outs], reach, registry,
                                            ci=kw["ci"]).items():
            outs[i] = one(entries[i], structs=None, seed_sd=seed_sd, **kw)  # logical bounds only
            r = outs[i]["row"]
            r["bound_note"] = why
            r["verdict_reason"] = f"simulator bound set aside ({why}); {r['verdict_reason']}"
    return outs


# Entries timed before an audit to estimate its length (the cost per entry is about constant: linear in rows).
PROBE_ENTRIES = 8


def _estimate(entries: list, passes: int, **kw) -> str:
    """``expected about N s``: a few entries audited and timed, times the entries, times the passes
    (the verdicts, then their fragility at other seed sds)."""
    probe = entries[:PROBE_ENTRIES]
    if not probe:
        return "nothing to compute"
    t0 = time.perf_counter()
    for e in probe:
        audit_entry(e, **kw)
    per = (time.perf_counter() - t0) / len(probe)
    return (f"expected about {_duration(per * len(entries) * passes)} ({passes} passes over the entries: the verdicts, "
            "then their fragility)")


def _duration(seconds: float) -> str:
    return "1 s or less" if seconds < 1.0 else f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def entries_frame(entries: list[Entry], *, seed_sd: float = 0.0) -> pd.DataFrame:
    """The normalised inputs: one row per entry x reported arm (absolute accuracy, variance, seeds)."""
    recs = []
    for e in entries:
        _, var, note = arm_moments(e, seed_sd=seed_sd)
        common = {"source": e.source["id"], "model": e.model, "benchmark": e.benchmark, "train_set": e.train_set}
        tail = {"n_items": e.n_items, "samples_per_item": e.decoding, "values_as_given": e.values,
                "scale_as_given": e.scale, "file": e.file}
        for arm, av in e.arms.items():
            recs.append({**common, "arm": arm, "kind": "partition" if arm in PARTITION_ARMS else "extra",
                         "accuracy": av.mean, "gain": av.mean - e.arms["frozen"].mean,
                         "se": math.sqrt(var[arm]) if arm in var else math.nan,
                         "variance": note.get(arm, "binomial (not used by the partition)"),
                         "seeds": ";".join(f"{x:g}" for x in av.seeds) if av.seeds else "", **tail})
        for name, v in e.other.items():
            recs.append({**common, "arm": name, "kind": "other", "accuracy": v, "gain": v - e.arms["frozen"].mean,
                         "se": math.nan, "variance": "not used", "seeds": "", **tail})
    return pd.DataFrame.from_records(recs)


def audit(entries: list[Entry], *, ci: float = 0.95, seed_sd: float = 0.0, threshold: float = 0.60,
          calibrate: bool = True, grid: Optional[cal.CalibrationGrid] = None, cache_dir: Optional[Path] = None,
          progress: bool = False, executor=None, rule: str = "terms", dominance: float = 0.5,
          measurements=None, null_range: bool = True, log: Callable[[str], None] | None = None,
          device=None, precision: str | None = None) -> AuditResult:
    """Partition, intervals, bounds and verdicts for every entry.

    Args:
      entries: from :func:`tabsim.audit.load_entries`.
      ci: two-sided level (0.95).
      seed_sd: assumed seed sd in points of single-run trained arms (0: seed spread ignored).
      threshold: share threshold of the reference rule (0.60).
      calibrate: bound missing arms with the simulator calibration (False: logical bounds only).
      grid: the simulated family (default :class:`CalibrationGrid`).
      cache_dir: on-disk cache of the calibration sweep (None: no disk cache).
      progress: tabsim progress bar for the calibration sweep.
      executor: where the calibration sweep's chunks run (default in this process; e.g.
        :class:`tabsim.runtime.dask.DaskExecutor`); the results are the same.
      rule: the rule of the ``verdict`` column: ``terms`` (default) or ``reference``.
      dominance: share threshold of the three-term rule (0.5).
      measurements: published null-reward runs that overrule simulator bounds they contradict (default:
        the registry :data:`tabsim.audit.measured.MEASUREMENTS`; ``()`` for none).
      null_range: widen every simulator bound on a missing RANDOM arm to the range of ``d_null`` those
        random-reward runs measured (:func:`tabsim.audit.measured.null_envelope`); False: the simulated
        families' reach only.
      log: where the phases are said, one line each (``tabsim audit``'s phase lines; default: nowhere).
      device, precision: where and in what floating type the calibration sweep computes, as
        :func:`tabsim.runtime.run.run` takes them (``tabsim audit`` passes its ``--device`` and ``--precision``).

    Every row also says whether its verdict is *fragile*: ``fragile`` is true when the verdict changes
    at an assumed seed sd up to 1 point away from ``seed_sd`` (quarter-point steps), and
    ``fragile_note`` names the verdicts it changes to.

    Returns:
      :class:`AuditResult`.
    """
    _check_options(ci, seed_sd, threshold, rule, dominance)
    grid = grid or cal.CalibrationGrid()
    # simulate only the base-model pass@k / maj@k that some entry reports (exact maj@k is costly)
    need_p = tuple(sorted({k for e in entries for k in e.base_pass_at_k} | set(grid.pass_k)))
    need_m = tuple(sorted({k for e in entries for k in e.base_maj_at_k} | set(grid.maj_k)))
    grid = dataclasses.replace(grid, pass_k=need_p, maj_k=need_m)
    info = {"ci": ci, "seed_sd": seed_sd, "threshold": threshold, "calibrate": calibrate, "rule": rule,
            "dominance": dominance, "n_entries": len(entries)}
    say = log or (lambda msg: None)
    structs = None
    if calibrate and any(e.missing for e in entries):
        structs = _calibrate(entries, grid, info, say, cache_dir=cache_dir, progress=progress, executor=executor,
                             log=log, device=device, precision=precision)
    registry = ms.random_measurements(measurements)
    envelope = _record_measurements(registry, info, ci=ci, null_range=null_range, calibrated=structs is not None)
    reach = info["calibration"]["reach"] if structs is not None else None
    kw = dict(ci=ci, threshold=threshold, grid=grid, rule=rule, dominance=dominance, null_envelope=envelope)
    # fragility: the verdict one point of seed spread (more, or less) would give
    info["fragile_seed_sd"] = _fragility_sds(seed_sd)
    say(f"bounds and verdicts of {len(entries)} entries"
        + (" (simulator bounds where an arm is missing)" if structs is not None else "")
        + f": {_estimate(entries, 1 + len(info['fragile_seed_sd']), structs=structs, seed_sd=seed_sd, **kw)}")
    outs = _audit_rows(entries, structs, reach, registry, seed_sd=seed_sd, **kw)
    _mark_fragile(outs, entries, structs, reach, registry, info["fragile_seed_sd"], say, **kw)
    for i, note in checks.format_across(entries, ci=ci).items():
        r = outs[i]["row"]
        r["format_note"] = "; ".join(x for x in (r["format_note"], note) if x)
    rows = [o["row"] for o in outs]
    terms = [t for o in outs for t in o["terms"]]
    cands = [o["calibration"] for o in outs if o["calibration"] is not None]
    return AuditResult(audit=pd.DataFrame.from_records(rows), terms=pd.DataFrame.from_records(terms),
                       entries=entries_frame(entries, seed_sd=seed_sd),
                       calibration=pd.concat(cands, ignore_index=True) if cands else pd.DataFrame(), info=info)


def _calibrate(entries: list, grid, info: dict, say, *, cache_dir, progress, executor, log, device=None,
               precision=None) -> list:
    """The simulated families' sweep, its structures (recorded in ``info["calibration"]`` with their reach)."""
    say(f"calibrating the missing arms of {sum(bool(e.missing) for e in entries)} entries on the simulated "
        f"families {', '.join(name for name, _ in grid.families)}")
    frame, sim_info = cal.simulate(grid, cache_dir=cache_dir, progress=progress, executor=executor, log=log,
                                   device=device, precision=precision)
    structs = cal.structures(frame)
    reach = cal.family_reach(frame)
    info["calibration"] = {**sim_info, "grid": grid.as_dict(), "n_structures": len(structs), "reach": reach,
                           "sim_d_null_range": [min(r["d_null"][0] for r in reach.values()),
                                                max(r["d_null"][1] for r in reach.values())]}
    return structs


def _record_measurements(registry, info: dict, *, ci, null_range: bool, calibrated: bool) -> Optional[tuple]:
    """The measured d_null envelope (None: not used), recorded in ``info`` with the measurements."""
    envelope = ms.null_envelope(registry, ci) if null_range else None
    info["null_envelope"] = [round(x, 2) for x in envelope] if envelope is not None else None
    if calibrated:
        info["calibration"]["null_envelope"] = info["null_envelope"]
    info["measurements"] = [{"model": m.model, "benchmark": m.benchmark, "reward": m.reward, "gamma": m.gamma,
                             "d_null": round(m.gain, 2), "source": m.source_id} for m in registry]
    return envelope


def _mark_fragile(outs: list, entries, structs, reach, registry, sds: list, say, **kw) -> None:
    """``fragile`` and ``fragile_note`` of each row: the verdicts it changes to at the seed sds ``sds``."""
    shifted = {}
    for i, sd in enumerate(sds):
        say(f"fragility: the verdicts again at seed sd {sd:g} ({i + 1} of {len(sds)})")
        shifted[sd] = [o["row"]["verdict"] for o in _audit_rows(entries, structs, reach, registry, seed_sd=sd,
                                                                 rows_only=True, **kw)]
    for i, o in enumerate(outs):
        r = o["row"]
        changed = [(s, v[i]) for s, v in shifted.items() if v[i] != r["verdict"]]
        r["fragile"] = bool(changed)
        r["fragile_note"] = "; ".join(f"{v} at seed sd {s:g}" for s, v in changed)
