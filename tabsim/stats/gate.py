"""Points-vs-bounds gate: which partition terms a pilot identifies as points, signs or bounds.

A term is a ``"point"`` when its interval excludes 0 and is narrower than a pre-set tolerance, a
``"sign"`` when it excludes 0 but is wider, and ``"bounds"`` when it includes 0. Each accuracy lies
in [0, 1], so each difference term lies in [-1, 1]; the reported bounds are the interval intersected
with that logical range. The reference study's gate (docs/science.md) is reported beside it: points
iff the percentile bootstrap interval of ``d_elicit`` excludes 0.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from tabsim.stats import checks as v
from tabsim.stats import intervals
from tabsim.stats.partition import DIFFERENCE_TERMS, check_identity, summarize_partition

CLASSES = ("point", "sign", "bounds")
GATE_TERMS = DIFFERENCE_TERMS + ("bias",)
LOGICAL_RANGE = (-1.0, 1.0)


def classify(ci_low: float, ci_high: float, tolerance: float) -> str:
    """Class of one interval: point, sign or bounds.

    ``"point"`` if ``0 not in [ci_low, ci_high]`` and ``ci_high - ci_low < tolerance``; ``"sign"`` if
    0 is excluded but the width is at least ``tolerance``; ``"bounds"`` if 0 is included.

    Args:
      ci_low: lower bound.
      ci_high: upper bound (>= ci_low).
      tolerance: largest width (exclusive) that still counts as a point (> 0).

    Returns:
      ``"point"``, ``"sign"`` or ``"bounds"``.
    """
    tolerance = v.check_positive(tolerance, "tolerance")
    lo, hi = float(ci_low), float(ci_high)
    if np.isnan(lo) or np.isnan(hi) or lo > hi:
        raise ValueError(f"(ci_low, ci_high) must be an ordered pair of numbers, got ({ci_low!r}, {ci_high!r})")
    if lo <= 0.0 <= hi:
        return "bounds"
    return "point" if hi - lo < tolerance else "sign"


def _note(cls: str, lo: float, hi: float, blo: float, bhi: float, tol: float) -> str:
    if cls == "point":
        return f"point-identified: CI excludes 0 and is narrower than {tol:g}"
    if cls == "sign":
        return f"sign-identified: CI excludes 0 but its width {hi - lo:.3g} is at least {tol:g}"
    clipped = " (clipped to the logical range)" if (blo, bhi) != (lo, hi) else ""
    return (f"bounds only: CI includes 0; the term lies in [{blo:.3g}, {bhi:.3g}], the CI intersected "
            f"with the logical range [{LOGICAL_RANGE[0]:g}, {LOGICAL_RANGE[1]:g}]{clipped}")


def classify_terms(
    seed_df: pd.DataFrame,
    *,
    tolerance: float,
    by: Sequence[str] = (),
    terms: Sequence[str] = GATE_TERMS,
    ci: float = 0.95,
    method: str = "bca",
    n_resamples: int = 2000,
    random_state=0,
) -> pd.DataFrame:
    """Classify each partition term of a pilot as point, sign or bounds.

    ``point``: ``0 not in CI`` and ``width < tolerance``; ``sign``: ``0 not in CI``, wider;
    ``bounds``: ``0 in CI``, reported as ``[max(ci_low, -1), min(ci_high, 1)]``.

    Args:
      seed_df: output of :func:`tabsim.stats.seed_partition` for the pilot.
      tolerance: pre-set largest interval width of a point (> 0), in accuracy units.
      by: group columns.
      terms: difference terms to classify (subset of ``d_null, d_elicit, d_rd, d_naive, d_total,
        bias``).
      ci: two-sided confidence level in (0, 1).
      method: interval method of :func:`tabsim.stats.summarize_partition`.
      n_resamples: bootstrap resamples (>= 100).
      random_state: int seed or ``numpy.random.Generator``.

    Returns:
      DataFrame, one row per (by..., term): ``*by, term, estimate, ci_low, ci_high, width,
      classification, bound_low, bound_high, logical_low, logical_high, ci_level, method, n_seeds,
      reference_gate, note``. ``reference_gate`` (same on every row of a group) is ``"points"`` iff
      the percentile bootstrap interval of ``d_elicit`` excludes 0, else ``"bounds"``.
    """
    tolerance = v.check_positive(tolerance, "tolerance")
    terms = v.as_tuple(terms, "terms")
    bad = [t for t in terms if t not in GATE_TERMS]
    if not terms or bad:
        raise ValueError(f"terms must be a non-empty subset of {list(GATE_TERMS)}, got {list(terms)}")
    by = v.as_tuple(by, "by")
    level = v.check_level(ci)
    summary = summarize_partition(
        seed_df, by=by, ci=level, method=method, n_resamples=n_resamples, random_state=random_state
    )
    summary = summary[summary["term"].isin(terms)].reset_index(drop=True)

    reference = {}
    for key, sub in v.group_items(seed_df, by):
        values = sub.sort_values("seed")["d_elicit"].to_numpy(float)
        rng = v.make_rng(random_state)
        iv = intervals.mean_interval(values, ci=level, method="percentile", n_resamples=n_resamples, random_state=rng)
        reference[tuple(key.values())] = "bounds" if iv.low <= 0.0 <= iv.high else "points"

    lo_r, hi_r = LOGICAL_RANGE
    rows = []
    for rec in summary.to_dict("records"):
        lo, hi = rec["ci_low"], rec["ci_high"]
        cls = classify(lo, hi, tolerance)
        blo, bhi = max(lo, lo_r), min(hi, hi_r)
        rows.append({
            **{b: rec[b] for b in by}, "term": rec["term"], "estimate": rec["estimate"],
            "ci_low": lo, "ci_high": hi, "width": hi - lo, "classification": cls,
            "bound_low": blo, "bound_high": bhi, "logical_low": lo_r, "logical_high": hi_r,
            "ci_level": level, "method": rec["method"], "n_seeds": rec["n_seeds"],
            "reference_gate": reference[tuple(rec[b] for b in by)],
            "note": _note(cls, lo, hi, blo, bhi, tolerance),
        })
    return pd.DataFrame.from_records(rows)


def pilot_replicates(
    seed_df: pd.DataFrame,
    *,
    n_seeds: int,
    n_replicates=None,
    random_state=0,
) -> list[pd.DataFrame]:
    """Split a seed-level frame into disjoint pilots of ``n_seeds`` seeds each.

    Seeds are shuffled once and cut into consecutive blocks; a seed id keeps all its rows (all
    groups), so every pilot covers the whole grid of conditions, like a fresh pilot run would.

    Args:
      seed_df: output of :func:`tabsim.stats.seed_partition`.
      n_seeds: seeds per pilot (>= 2).
      n_replicates: number of pilots (default: as many disjoint pilots as the seeds allow).
      random_state: int seed or ``numpy.random.Generator``.

    Returns:
      List of ``n_replicates`` frames with the columns of ``seed_df``.
    """
    v.check_frame(seed_df, "seed_df")
    v.check_columns(seed_df, ["seed"], name="seed_df")
    n_seeds = v.check_int(n_seeds, "n_seeds", minimum=2)
    seeds = np.unique(seed_df["seed"].to_numpy())
    most = seeds.size // n_seeds
    if n_replicates is None:
        n_replicates = most
    n_replicates = v.check_int(n_replicates, "n_replicates", minimum=1)
    if n_replicates > most:
        raise ValueError(
            f"n_replicates={n_replicates} disjoint pilots of {n_seeds} seeds need "
            f"{n_replicates * n_seeds} seeds; seed_df has {seeds.size} (at most {most} pilots)"
        )
    rng = v.make_rng(random_state)
    order = rng.permutation(seeds)
    return [seed_df[seed_df["seed"].isin(order[i * n_seeds:(i + 1) * n_seeds])].reset_index(drop=True)
            for i in range(n_replicates)]


def gate_stability(
    replicate_frames: Sequence[pd.DataFrame],
    *,
    tolerance: float,
    by: Sequence[str] = (),
    terms: Sequence[str] = GATE_TERMS,
    ci: float = 0.95,
    method: str = "bca",
    n_resamples: int = 2000,
    random_state=0,
) -> pd.DataFrame:
    """Fraction of pilot replications that give each classification, per term.

    ``frac_c = #{replications classified c} / R`` for ``c`` in point, sign, bounds, and the same
    for the reference gate (``frac_reference_points``). A gate that is stable across pilots has one
    fraction near 1.

    Args:
      replicate_frames: seed-level frames of R independent pilots (e.g. from
        :func:`pilot_replicates`).
      tolerance: pre-set largest interval width of a point (> 0).
      by: group columns.
      terms: difference terms to classify.
      ci: two-sided confidence level in (0, 1).
      method: interval method.
      n_resamples: bootstrap resamples per pilot (>= 100).
      random_state: int seed; pilot ``i`` gets an independent child seed.

    Returns:
      DataFrame, one row per (by..., term): ``*by, term, frac_point, frac_sign, frac_bounds,
      modal_classification, frac_reference_points, n_replicates``.
    """
    frames = list(replicate_frames) if not isinstance(replicate_frames, pd.DataFrame) else None
    if not frames:
        raise ValueError("replicate_frames must be a non-empty sequence of seed-level DataFrames")
    for i, fr in enumerate(frames):
        v.check_frame(fr, f"replicate_frames[{i}]")
        check_identity(fr)
    by = v.as_tuple(by, "by")
    if isinstance(random_state, np.random.Generator):
        children = [random_state] * len(frames)
    else:
        v.make_rng(random_state)
        children = [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(int(random_state)).spawn(len(frames))]
    parts = [
        classify_terms(fr, tolerance=tolerance, by=by, terms=terms, ci=ci, method=method,
                       n_resamples=n_resamples, random_state=children[i]).assign(replicate=i)
        for i, fr in enumerate(frames)
    ]
    allc = pd.concat(parts, ignore_index=True)
    keys = [*by, "term"]
    out = allc.groupby(keys, sort=False, dropna=False).agg(
        frac_point=("classification", lambda s: float((s == "point").mean())),
        frac_sign=("classification", lambda s: float((s == "sign").mean())),
        frac_bounds=("classification", lambda s: float((s == "bounds").mean())),
        frac_reference_points=("reference_gate", lambda s: float((s == "points").mean())),
        n_replicates=("replicate", "nunique"),
    ).reset_index()
    fr = out[["frac_point", "frac_sign", "frac_bounds"]].to_numpy()
    out.insert(len(keys) + 3, "modal_classification", np.array(CLASSES)[np.argmax(fr, axis=1)])
    return out
