"""Warnings an audit attaches to its rows: format repair, and simulator bounds a real model contradicts.

* :func:`format_note`: a gain that format repair can explain (a format arm close to the true arm,
  or a base far below the model's known level on the benchmark);
* :func:`format_across`: the same base model scoring far lower on an easier benchmark of the same
  table than on a harder one (answer-format failures, not missing skill);
* :func:`outside_family`: rows whose simulator bound on ``d_null`` excludes a ``d_null`` measured for
  the same model and benchmark (by another input or in the registry of published null-reward runs,
  :mod:`tabsim.audit.measured`), or whose model was measured outside every family's reach: the
  simulated families cannot represent that model, so those rows fall back to logical bounds.
"""
from __future__ import annotations

import math
import re

from tabsim.audit import benchmarks as bm
from tabsim.audit.claims import Claim, Note
from tabsim.audit.entry import Entry
from tabsim.audit.estimate import binomial_var, fieller, z_value

# A format arm whose gain is at least this share of the true arm's gain could be most of the story.
FORMAT_SHARE = 0.5
# A base this many points (and 3 standard errors) below the model's known level is a format failure.
BASE_GAP = 10.0


def model_key(name: str) -> str:
    """Model names compared across sources: case, spaces and punctuation dropped."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def bench_key(name: str) -> str:
    b = bm.lookup(name)
    return b.name if b is not None else model_key(name)


def format_note(entry: Entry, mean: dict, var: dict, *, ci: float = 0.95) -> str:
    """Why format repair could explain the entry's gain ("" when nothing points to it); every number in it
    carries its interval at level ``ci``, the ratio of the two gains its Fieller interval."""
    return "; ".join(n.text for n in format_notes(entry, mean, var, ci=ci))


def format_notes(entry: Entry, mean: dict, var: dict, *, ci: float = 0.95) -> list:
    """The :class:`~tabsim.audit.claims.Note` records of :func:`format_note`.

    A format arm is named when its gain is at least ``FORMAT_SHARE`` of the true arm's (at the
    estimates) or not distinguishable from it; the gains share the base, so the ratio's Fieller
    interval takes their covariance ``var(FROZEN)``. A base is named when it lies ``BASE_GAP`` points
    (and 3 standard errors) below the model's known level.
    """
    notes, z = [], z_value(ci)
    base = mean.get("frozen")
    if base is not None and "format" in entry.arms and "true" in mean:
        g_t = mean["true"] - base
        g_f = entry.arms["format"].mean - base
        v_f = float(binomial_var(entry.arms["format"].mean, entry.n_items))
        se = math.sqrt(var["true"] + v_f)
        close = abs(mean["true"] - entry.arms["format"].mean) <= z * se
        if g_t > 0 and g_f > 0 and (g_f >= FORMAT_SHARE * g_t or close):
            vb = var["frozen"]
            gf = _diff("format gain", g_f, v_f + vb, z)
            gt = _diff("true gain", g_t, var["true"] + vb, z)
            r, lo, hi = (float(x) for x in fieller(g_f, g_t, v_f + vb, var["true"] + vb, vb, z))
            ratio = Claim("format gain / true gain", r, lo, hi, percent=True)
            notes.append(Note(f"the format arm's gain {gf.quoted(signed=True)} is {ratio.quoted()} of the true arm's "
                              f"{gt.quoted(signed=True)}" + (" (not distinguishable from it)" if close else "")
                              + ": format repair can explain much of the gain", (gf, ratio, gt)))
    if base is not None and entry.known_base is not None:
        gap = entry.known_base - base
        if gap > max(BASE_GAP, 3.0 * math.sqrt(var["frozen"])):
            c = _diff("known base - base", gap, var["frozen"], z)
            notes.append(Note(f"the base {base:g} is {c.quoted()} points below the model's known {entry.known_base:g} "
                              "on this benchmark: format failures at evaluation can explain the gain", (c,)))
    return notes


def _diff(name: str, est: float, v: float, z: float) -> Claim:
    """A difference with its Wald interval, compared with 0."""
    half = z * math.sqrt(v)
    return Claim(name, est, est - half, est + half, 0.0, 1)


def format_across(entries: list, *, ci: float = 0.95) -> dict:
    """Index -> note for bases far below the same model's base on a harder benchmark of the same source.

    A base is far below when it lies ``BASE_GAP`` points under the other (at the estimates) and the
    difference's interval excludes 0; the note quotes that interval.
    """
    groups: dict = {}
    for i, e in enumerate(entries):
        groups.setdefault((e.source["id"], model_key(e.model), e.train_set), []).append(i)
    out, z = {}, z_value(ci)
    for idx in groups.values():
        for i in idx:
            reg = bm.lookup(entries[i].benchmark)
            if reg is None or not reg.easier_than:
                continue
            b_i = entries[i].arms["frozen"].mean
            for j in idx:
                if j != i and bench_key(entries[j].benchmark) in reg.easier_than:
                    b_j = entries[j].arms["frozen"].mean
                    v = sum(float(binomial_var(entries[k].arms["frozen"].mean, entries[k].n_items)) for k in (i, j))
                    c = _diff("base gap", b_j - b_i, v, z)
                    if b_i < b_j - BASE_GAP and c.side == "above":
                        out[i] = (f"the base {b_i:g} on {entries[i].benchmark} is {c.quoted()} points below the "
                                  f"same model's {b_j:g} on the harder {entries[j].benchmark}: answer-format failures "
                                  "can explain the gain")
    return out


def outside_family(entries: list, rows: list, reach: dict, registry=(), *, ci: float = 0.95) -> dict:
    """Index -> reason for rows whose simulator bound a measured ``d_null`` contradicts.

    Measurements come from the other inputs of the run (an entry that reports RANDOM) and from the
    registry of published null-reward runs (:mod:`tabsim.audit.measured`). A row with simulator
    bounds and no RANDOM arm of its own sets its bound aside when

    * a ``d_null`` measured for the same model and benchmark has an interval that does not overlap the
      row's bound on ``d_null``; or
    * a ``d_null`` measured for the same model (any benchmark) lies, interval and all, outside the reach
      of every simulated family: the families cannot train like this model, on any benchmark.

    Args:
      entries, rows: the run's entries and their audit rows (``d_null``, ``d_null_low``/``_high``,
        ``bound_source``).
      reach: ``{family: {term: [low, high]}}`` of the simulated families.
      registry: :class:`tabsim.audit.measured.NullMeasurement` records (random reward at the
        families' probability).
      ci: level of a registry measurement's interval.
    """
    measured = _measured(entries, rows, registry, ci=ci)
    span = [min(v["d_null"][0] for v in reach.values()), max(v["d_null"][1] for v in reach.values())]
    by_model: dict = {}
    for (mk, _), ms in measured.items():
        by_model.setdefault(mk, []).extend(ms)
    out = {}
    for j, (e, r) in enumerate(zip(entries, rows)):
        if "random" in e.arms or r["bound_source"] != "simulator":
            continue
        for i, src, est, lo, hi, _ in measured.get((model_key(e.model), bench_key(e.benchmark)), []):
            if i != j and (lo > r["d_null_high"] or hi < r["d_null_low"]):
                out[j] = (f"d_null measured at {est:+.1f} [{lo:.1f}, {hi:.1f}] for the same model and benchmark by "
                          f"{src} lies outside this row's simulator bound [{r['d_null_low']:.1f}, "
                          f"{r['d_null_high']:.1f}] (the simulated families together reach d_null in [{span[0]:g}, "
                          f"{span[1]:g}]): the simulator cannot represent this model, so the bounds are logical")
                break
        if j in out:
            continue
        for i, src, est, lo, hi, bench in by_model.get(model_key(e.model), []):
            if i != j and (lo > span[1] or hi < span[0]):
                out[j] = (f"d_null measured at {est:+.1f} [{lo:.1f}, {hi:.1f}] for this model on {bench} by {src} "
                          f"lies outside the reach of every simulated family (d_null in [{span[0]:g}, {span[1]:g}]): "
                          "the simulator cannot train like this model, so the bounds are logical")
                break
    return out


def families_excluded(entries: list, rows: list, reach: dict, registry=(), *, ci: float = 0.95) -> dict:
    """Index -> ``{family: reason}`` for the families that cannot train like the row's model.

    A family is excluded for a row (without a RANDOM arm of its own) when a ``d_null`` measured for the
    row's model, on any benchmark (another input of the run or the registry), lies, interval and all,
    outside that family's reach: a bound from that family's structures would rest on a model the
    measurement rules out, so the row is bounded by the other families only (by none: logical bounds,
    :func:`outside_family`).
    """
    measured = _measured(entries, rows, registry, ci=ci)
    by_model: dict = {}
    for (mk, _), ms in measured.items():
        by_model.setdefault(mk, []).extend(ms)
    out = {}
    for j, e in enumerate(entries):
        if "random" in e.arms:
            continue
        for fam, terms in reach.items():
            lo_f, hi_f = terms["d_null"]
            for i, src, est, lo, hi, bench in by_model.get(model_key(e.model), []):
                if i != j and (lo > hi_f or hi < lo_f):
                    out.setdefault(j, {})[fam] = (f"d_null measured at {est:+.1f} [{lo:.1f}, {hi:.1f}] for this model "
                                                  f"on {bench} by {src} lies outside the `{fam}` family's reach "
                                                  f"[{lo_f:g}, {hi_f:g}]")
                    break
    return out


def _measured(entries: list, rows: list, registry=(), *, ci: float = 0.95) -> dict:
    """(model, benchmark) -> [(index or -1, who, estimate, low, high, benchmark)] of measured ``d_null``."""
    measured: dict = {}
    for i, (e, r) in enumerate(zip(entries, rows)):
        if "random" in e.arms and math.isfinite(r["d_null"]):
            measured.setdefault((model_key(e.model), bench_key(e.benchmark)), []).append(
                (i, e.source["id"], r["d_null"], r["d_null_low"], r["d_null_high"], e.benchmark))
    for m in registry:
        est, lo, hi = m.interval(ci)
        key = (model_key(m.model), bench_key(m.benchmark))
        if not any(who == m.source_id and abs(x - est) < 0.05 for _, who, x, *_ in measured.get(key, [])):
            measured.setdefault(key, []).append((-1, f"{m.source_id} (registered measurement)", est, lo, hi,
                                                 m.benchmark))
    return measured
