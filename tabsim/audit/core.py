"""``audit(entries) -> AuditResult``: the partition, intervals, bounds and verdict of every entry."""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from tabsim.audit import calibrate as cal
from tabsim.audit.estimate import TERMS, arm_moments, identified_terms, term_intervals
from tabsim.audit.schema import EXTRA_ARMS, PARTITION_ARMS, Entry
from tabsim.stats.verdict import INCONCLUSIVE, share_verdict

WIDE_TERMS = ("d_majority", "d_null", "d_elicit", "d_rd", "d_naive", "d_total", "bias", "rd_fraction",
              "elicitation_share", "rd_share")


@dataclasses.dataclass
class AuditResult:
    """Frames of an audit.

    Attributes:
      audit: one row per entry (model x benchmark): accuracies, terms with bounds, verdict.
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


def _check_options(ci, seed_sd, threshold):
    if not isinstance(ci, (int, float)) or not 0.0 < float(ci) < 1.0:
        raise ValueError(f"ci must be a confidence level in (0, 1), got {ci!r}")
    if not isinstance(seed_sd, (int, float)) or not math.isfinite(seed_sd) or seed_sd < 0:
        raise ValueError(f"seed_sd must be a finite number >= 0 (points), got {seed_sd!r}")
    if not isinstance(threshold, (int, float)) or not 0.0 < float(threshold) < 1.0:
        raise ValueError(f"threshold must be a share in (0, 1), got {threshold!r}")


def _union(iv: dict, term: str) -> tuple:
    est, lo, hi = iv[term]
    if est.size == 0:
        return (math.nan,) * 4
    with np.errstate(invalid="ignore"):
        finite = est[np.isfinite(est)]
    s_lo, s_hi = (float(finite.min()), float(finite.max())) if finite.size else (math.nan, math.nan)
    return float(np.min(lo)), float(np.max(hi)), s_lo, s_hi


def _verdict(e_point, r_point, e_ci, r_ci, threshold):
    if not all(math.isfinite(x) for x in (e_point, r_point)):
        return {"verdict": INCONCLUSIVE, "point_verdict": "", "verdict_reason":
                "d_total is 0 or undefined, so the shares are undefined"}
    sv = share_verdict(e_point, r_point, elicitation_ci=e_ci, rd_ci=r_ci, threshold=threshold)
    return {"verdict": sv.verdict, "point_verdict": sv.point_verdict, "verdict_reason": sv.reason}


def audit_entry(entry: Entry, *, ci: float = 0.95, seed_sd: float = 0.0, threshold: float = 0.60,
                structs: Optional[list] = None, grid: Optional[cal.CalibrationGrid] = None) -> dict:
    """Audit one entry.

    Args:
      entry: validated entry.
      ci: two-sided level of every interval.
      seed_sd: assumed seed sd (points) of single-run trained arms.
      threshold: share threshold of the verdict (SPEC section 3: 0.60).
      structs: calibration tables (:func:`tabsim.audit.calibrate.structures`); None = logical bounds only.
      grid: the calibration grid (needed with ``structs``).

    Returns:
      dict with keys ``row`` (wide record), ``terms`` (list of records), ``calibration`` (frame or None).
    """
    mean, var, note = arm_moments(entry, seed_sd=seed_sd)
    present = [a for a in PARTITION_ARMS if a in mean]
    ident = set(identified_terms(present))
    fill_m = np.array([[mean.get(a, 0.0) for a in PARTITION_ARMS]])
    fill_v = np.array([[var.get(a, 0.0) for a in PARTITION_ARMS]])
    point = term_intervals(fill_m, fill_v, ci=ci)

    calib = None
    log_m, log_v = cal.logical_completions(entry, seed_sd=seed_sd)
    logical = term_intervals(log_m, log_v, ci=ci)
    primary, source = logical, "logical"
    alt = None
    if entry.missing and structs is not None:
        calib = cal.calibrate_entry(entry, structs, grid=grid, ci=ci, seed_sd=seed_sd)
        if calib.n_consistent:
            primary, source = term_intervals(calib.means, calib.variances, ci=ci), "simulator"
        if "majority" in entry.missing:
            other = "offline" if (entry.majority_kind or "online") == "online" else "online"
            c2 = cal.calibrate_entry(entry, structs, grid=grid, ci=ci, seed_sd=seed_sd, majority_kind=other)
            if c2.n_consistent:
                alt = (other, term_intervals(c2.means, c2.variances, ci=ci))

    base = {"source": entry.source["id"], "model": entry.model, "benchmark": entry.benchmark}
    row = {**base, "paper": entry.source["paper"], "source_notes": entry.source.get("notes", ""), "arxiv": entry.source["arxiv"],
           "version": entry.source["version"], "table": entry.source["table"], "file": entry.file,
           "n_items": entry.n_items, "samples_per_item": entry.decoding,
           "majority_kind": entry.majority_kind or "", "gamma": entry.gamma,
           "arms_present": ",".join(present + [a for a in EXTRA_ARMS if a in entry.arms]),
           "missing_arms": ",".join(entry.missing)}
    for a in PARTITION_ARMS:
        row[f"acc_{a}"] = mean.get(a, math.nan)
        row[f"se_{a}"] = math.sqrt(var[a]) if a in var else math.nan
    for a in EXTRA_ARMS:
        row[f"acc_{a}"] = entry.arms[a].mean if a in entry.arms else math.nan

    term_rows = []
    for t in TERMS:
        l_lo, l_hi, _, _ = _union(logical, t)
        rec = {**base, "term": t, "logical_low": l_lo, "logical_high": l_hi}
        if t in ident:
            est, lo, hi = (float(x[0]) for x in point[t])
            rec.update(identified="point", estimate=est, low=lo, high=hi, set_low=est, set_high=est,
                       bound_source="interval")
        else:
            lo, hi, s_lo, s_hi = _union(primary, t)
            rec.update(identified="bounds", estimate=math.nan, low=lo, high=hi, set_low=s_lo, set_high=s_hi,
                       bound_source=source)
        if alt is not None and t not in ident:
            a_lo, a_hi, _, _ = _union(alt[1], t)
            rec.update(alt_majority_kind=alt[0], alt_low=a_lo, alt_high=a_hi)
        term_rows.append(rec)
    by = {r["term"]: r for r in term_rows}
    for t in WIDE_TERMS:
        r = by[t]
        row[t], row[f"{t}_low"], row[f"{t}_high"] = r["estimate"], r["low"], r["high"]

    e, rr = by["elicitation_share"], by["rd_share"]
    if e["identified"] == "point":
        v = _verdict(e["estimate"], rr["estimate"], (e["low"], e["high"]), (rr["low"], rr["high"]), threshold)
        basis = "interval"
    else:
        mid = lambda r: (0.5 * (r["set_low"] + r["set_high"])  # noqa: E731
                         if math.isfinite(r["set_low"]) and math.isfinite(r["set_high"]) else 0.0)
        v = _verdict(mid(e), mid(rr), (e["low"], e["high"]), (rr["low"], rr["high"]), threshold)
        v["point_verdict"] = ""
        basis = f"{source} bounds"
    row.update(v)
    row["verdict_basis"] = basis
    row["identified"] = "point" if not entry.missing else "bounds"
    row["bounded_terms"] = ",".join(t for t in TERMS if t not in ident)
    row["bound_source"] = "" if not entry.missing else source
    row["n_consistent"] = calib.n_consistent if calib is not None else 0
    row["n_candidates"] = calib.n_candidates if calib is not None else 0
    row["variance_note"] = "; ".join(f"{a}: {n}" for a, n in note.items())
    cand = None
    if calib is not None and calib.n_consistent:
        cand = calib.candidates[calib.candidates["consistent"]].assign(**base)
        cand = cand[list(base) + [c for c in cand.columns if c not in base]]
    return {"row": row, "terms": term_rows, "calibration": cand}


def entries_frame(entries: list[Entry], *, seed_sd: float = 0.0) -> pd.DataFrame:
    """The normalised inputs: one row per entry x reported arm (absolute accuracy, variance, seeds)."""
    recs = []
    for e in entries:
        _, var, note = arm_moments(e, seed_sd=seed_sd)
        for arm, av in e.arms.items():
            recs.append({"source": e.source["id"], "model": e.model, "benchmark": e.benchmark, "arm": arm,
                         "kind": "partition" if arm in PARTITION_ARMS else "extra",
                         "accuracy": av.mean, "gain": av.mean - e.arms["frozen"].mean,
                         "se": math.sqrt(var[arm]) if arm in var else math.nan,
                         "variance": note.get(arm, "binomial (not used by the partition)"),
                         "seeds": ";".join(f"{x:g}" for x in av.seeds) if av.seeds else "",
                         "n_items": e.n_items, "samples_per_item": e.decoding, "values_as_given": e.values,
                         "file": e.file})
        for name, v in e.other.items():
            recs.append({"source": e.source["id"], "model": e.model, "benchmark": e.benchmark, "arm": name,
                         "kind": "other", "accuracy": v, "gain": v - e.arms["frozen"].mean, "se": math.nan,
                         "variance": "not used", "seeds": "", "n_items": e.n_items,
                         "samples_per_item": e.decoding, "values_as_given": e.values, "file": e.file})
    return pd.DataFrame.from_records(recs)


def audit(entries: list[Entry], *, ci: float = 0.95, seed_sd: float = 0.0, threshold: float = 0.60,
          calibrate: bool = True, grid: Optional[cal.CalibrationGrid] = None, cache_dir: Optional[Path] = None,
          progress: bool = False, executor=None) -> AuditResult:
    """Partition, intervals, bounds and verdict for every entry.

    Args:
      entries: from :func:`tabsim.audit.load_entries`.
      ci: two-sided level (0.95).
      seed_sd: assumed seed sd in points of single-run trained arms (0: seed spread ignored).
      threshold: verdict share threshold (0.60).
      calibrate: bound missing arms with the simulator calibration (False: logical bounds only).
      grid: the simulated family (default :class:`CalibrationGrid`).
      cache_dir: on-disk cache of the calibration sweep (None: no disk cache).
      progress: tabsim progress bar for the calibration sweep.
      executor: where the calibration sweep's chunks run (default in this process; e.g.
        :class:`tabsim.runtime.dask.DaskExecutor`); the results are the same.

    Returns:
      :class:`AuditResult`.
    """
    _check_options(ci, seed_sd, threshold)
    grid = grid or cal.CalibrationGrid()
    # simulate only the base-model pass@k / maj@k that some entry reports (exact maj@k is costly)
    need_p = tuple(sorted({k for e in entries for k in e.base_pass_at_k} | set(grid.pass_k)))
    need_m = tuple(sorted({k for e in entries for k in e.base_maj_at_k} | set(grid.maj_k)))
    grid = dataclasses.replace(grid, pass_k=need_p, maj_k=need_m)
    info = {"ci": ci, "seed_sd": seed_sd, "threshold": threshold, "calibrate": calibrate,
            "n_entries": len(entries)}
    structs = None
    if calibrate and any(e.missing for e in entries):
        frame, sim_info = cal.simulate(grid, cache_dir=cache_dir, progress=progress, executor=executor)
        structs = cal.structures(frame)
        cond = ["family", "n_correct", "prior_strength", "format_boost", "heterogeneity", "lr"]
        wide = frame.groupby(cond + ["arm"])["pass1"].mean().unstack("arm")
        d_null = wide["random"] - wide["frozen"]
        info["calibration"] = {**sim_info, "grid": grid.as_dict(), "n_structures": len(structs),
                               "sim_d_null_range": [round(float(d_null.min()), 2), round(float(d_null.max()), 2)]}
    rows, terms, cands = [], [], []
    for e in entries:
        out = audit_entry(e, ci=ci, seed_sd=seed_sd, threshold=threshold, structs=structs, grid=grid)
        rows.append(out["row"])
        terms += out["terms"]
        if out["calibration"] is not None:
            cands.append(out["calibration"])
    return AuditResult(audit=pd.DataFrame.from_records(rows), terms=pd.DataFrame.from_records(terms),
                       entries=entries_frame(entries, seed_sd=seed_sd),
                       calibration=pd.concat(cands, ignore_index=True) if cands else pd.DataFrame(), info=info)
