"""Compare groups of a run or sweep across its conditions: rliable's aggregates with stratified intervals.

    import tabsim as ts
    cmp = ts.compare("results/estimators", by="algo.estimator")   # a run folder, a Result or a frame
    cmp.frame      # statistic x group (x versus): estimate, low, high
    cmp.profile    # performance profiles: fraction of runs above tau, with bands
    cmp.figure()   # the performance-profile figure

A *group* is a level of ``by`` (an estimator, a preset, an arm); a *condition* is a combination of
the other swept fields (the stratum: seeds are resampled within it); a *run* is one seed of one
group in one condition, scored by ``metric`` at its final evaluated step. The estimators are in
:mod:`tabsim.stats.aggregate`.
"""
from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import numpy as np
import pandas as pd

from tabsim.runtime.run import Result
from tabsim.stats import aggregate as agg
from tabsim.stats.partition import ACC_COLUMNS, DIFFERENCE_TERMS, seed_partition

TERMS = DIFFERENCE_TERMS + ACC_COLUMNS  # partition terms a comparison can score (per seed)
DEFAULT_METRIC, DEFAULT_ARM, DEFAULT_THRESHOLD = "pass1", "true", 1.0
FIXED = ("seed", "arm", "step")


class CompareError(ValueError):
    """A comparison that cannot be made from this input; the message names the field and the allowed values."""


@dataclasses.dataclass(frozen=True)
class Comparison:
    """Aggregates (``frame``), performance profiles (``profile``) and the scores they come from (``scores``)."""

    frame: pd.DataFrame
    profile: pd.DataFrame
    scores: pd.DataFrame
    settings: dict

    def figure(self):
        """The performance-profile figure (:func:`tabsim.plotting.profiles.plot_profile`)."""
        from tabsim.plotting.profiles import plot_profile  # lazy: matplotlib only when a figure is drawn

        return plot_profile(self.profile, metric=self.settings["label"], by=self.settings["by"],
                            ci=self.settings["ci"])

    def write(self, folder: str | Path, *, figure: bool = True, formats=None, **extra) -> list[Path]:
        """Write ``compare.csv``, ``profile.csv``, ``scores.csv``, ``provenance.json`` (the settings and
        ``extra``) and, with ``figure``, ``profile.png`` into ``folder``; returns the paths."""
        from tabsim.files.atomic import write_frame, write_json  # lazy: the files floor only when writing
        from tabsim.files.provenance import provenance

        folder = Path(folder)
        out = [write_frame(folder / f"{name}.csv", getattr(self, attr))
               for name, attr in (("compare", "frame"), ("profile", "profile"), ("scores", "scores"))]
        out.append(write_json(folder / "provenance.json", provenance(compare=self.settings, **extra)))
        if figure:
            from tabsim.plotting.figures import save_figure  # lazy: matplotlib only when a figure is drawn

            out += save_figure(self.figure(), folder / "profile", formats)
        return out


def _source_frame(source) -> pd.DataFrame:
    if isinstance(source, pd.DataFrame):
        return source
    if isinstance(source, Result):
        return source.frame
    if isinstance(source, (str, Path)):
        try:
            return Result.load(source).frame
        except (FileNotFoundError, NotADirectoryError) as err:
            raise CompareError(f"{source}: not a run or sweep folder ({err})") from None
    raise CompareError(f"source must be a run folder, a Result or a DataFrame, got {type(source).__name__}")


def condition_columns(frame: pd.DataFrame, by: str) -> list[str]:
    """The swept fields other than ``by``: a run's frame holds them before its ``seed`` column."""
    cols = list(frame.columns)
    return [c for c in cols[:cols.index("seed")] if c != by] if "seed" in cols else []


def _label(value) -> str:
    return f"{value:g}" if isinstance(value, (float, np.floating)) else str(value)


def _default_arm(frame: pd.DataFrame) -> str:
    arms = [str(a) for a in pd.unique(frame["arm"])]
    return arms[0] if len(arms) == 1 else DEFAULT_ARM


def _pick_arm(frame: pd.DataFrame, by: str, arm: str | None) -> pd.DataFrame:
    arms = [str(a) for a in pd.unique(frame["arm"])]
    if by == "arm":
        if arm is not None:
            raise CompareError("arm: the groups are the arms (by='arm'); leave arm unset")
        return frame
    chosen = arm if arm is not None else _default_arm(frame)
    if chosen not in arms:
        raise CompareError(f"arm: {chosen!r} is not in the run; allowed: {', '.join(arms)}")
    return frame[frame["arm"].astype(str) == chosen]


def _runs(frame: pd.DataFrame, by: str, metric: str, arm: str | None) -> tuple[pd.DataFrame, list[str]]:
    """One row per (group, condition, seed) with its ``score``."""
    conds = condition_columns(frame, by)
    if metric in TERMS:
        if by == "arm":
            raise CompareError(f"metric: {metric!r} is a partition term (it combines the arms); with by='arm' "
                               "choose a column of the frame such as pass1")
        if arm is not None:
            raise CompareError(f"arm: {metric!r} is a partition term (it combines the arms); leave arm unset")
        try:
            per = seed_partition(frame, by=[by, *conds], metric=DEFAULT_METRIC)
        except ValueError as err:
            raise CompareError(f"metric {metric!r}: {err}") from None
        return per[[by, *conds, "seed", metric]].rename(columns={metric: "score"}), conds
    numeric = [c for c in frame.columns[frame.columns.get_loc("step") + 1:] if pd.api.types.is_float_dtype(frame[c])]
    if metric not in numeric:
        raise CompareError(f"metric: {metric!r} is not a metric of the run; allowed: {', '.join(numeric + list(TERMS))}")
    rows = _pick_arm(frame, by, arm)
    last = rows.groupby([by, *conds], observed=True, sort=False)["step"].transform("max")
    rows = rows[rows["step"] == last]
    return rows[[by, *conds, "seed", metric]].rename(columns={metric: "score"}), conds


def _matrices(runs: pd.DataFrame, by: str, conds: list[str], metric: str) -> dict[str, np.ndarray]:
    """Each group's scores as ``[seeds, conditions]``, the conditions in one order for every group."""
    if runs["score"].isna().any():
        raise CompareError(f"metric: {metric!r} has no value at the final step of some runs (NaN); choose a metric "
                           "evaluated at every evaluation step, such as pass1")
    keys = runs[conds].astype(str).agg("|".join, axis=1) if conds else pd.Series("all", index=runs.index)
    wide = runs.assign(_cond=keys).pivot_table(index=[by, "seed"], columns="_cond", values="score", observed=True,
                                               aggfunc="first")
    levels = [lvl for lvl in pd.unique(runs[by])]
    out = {}
    for lvl in levels:
        m = wide.loc[lvl].to_numpy(dtype=float)
        if np.isnan(m).any():
            raise CompareError(f"by: group {_label(lvl)!r} lacks some conditions or seeds that other groups have; "
                               "every group needs every condition")
        out[_label(lvl)] = m
    if len(out) < 2:
        raise CompareError(f"by: {by!r} has one level ({', '.join(out)}); a comparison needs two or more")
    return out


def compare(source, *, by: str, metric: str = DEFAULT_METRIC, arm: str | None = None,
            threshold: float = DEFAULT_THRESHOLD, ci: float = 0.95, n_resamples: int = 2000, method: str = "rescaled",
            taus: int = 51, random_state: int = 0) -> Comparison:
    """Aggregate ``metric`` per level of ``by`` across conditions and seeds, with stratified bootstrap intervals.

    Args:
      source: a run or sweep folder, a :class:`~tabsim.runtime.run.Result` or its tidy frame.
      by: the column whose levels are compared (``"algo.estimator"``, ``"preset"``, ``"arm"``, ...).
      metric: a float column of the frame at each run's final step (default ``pass1``), or a partition
        term per seed (``d_null``, ``d_elicit``, ``d_rd``, ``d_naive``, ``d_total``, ``acc_true``, ...).
      arm: the arm whose ``metric`` is scored (default ``true``, or the run's only arm); not with
        ``by="arm"`` or a partition term.
      threshold: the optimality gap's target, the best value the metric can reach (1.0 for accuracies).
      ci: two-sided level; n_resamples: bootstrap resamples; method: ``"rescaled"`` (percentile bounds
        stretched by ``sqrt(n / (n - 1))``, which covers at the nominal rate with few seeds) or
        ``"percentile"`` (rliable's), see :mod:`tabsim.stats.aggregate`; taus: points of the performance profile;
      random_state: the bootstrap's seed.

    Returns:
      :class:`Comparison`; its ``frame`` has one row per (statistic, group[, versus]).
    """
    frame = _source_frame(source)
    if not isinstance(by, str) or by in ("seed", "step") or by not in frame.columns:
        allowed = condition_columns(frame, "") + ["arm"]
        raise CompareError(f"by: {by!r} is not a swept field of the run; allowed: {', '.join(map(str, allowed))}")
    if not (isinstance(taus, int) and taus >= 2):
        raise CompareError(f"taus: {taus!r} must be an integer >= 2 (points of the performance profile)")
    runs, conds = _runs(frame, by, metric, arm)
    scores = _matrices(runs, by, conds, metric)
    try:
        opts = {"ci": ci, "n_resamples": n_resamples, "method": method}
        table = _aggregates(scores, threshold=threshold, random_state=random_state, **opts)
        profile = _profiles(scores, taus=taus, random_state=random_state, **opts)
    except ValueError as err:
        raise CompareError(str(err)) from None
    n_cond, n_seeds = next(iter(scores.values())).shape[1], next(iter(scores.values())).shape[0]
    table.insert(0, "metric", metric)
    table["n_conditions"], table["n_seeds"] = n_cond, n_seeds
    label = metric if metric in TERMS or by == "arm" else f"{metric} ({arm or _default_arm(frame)})"
    settings = {"by": by, "metric": metric, "label": label, "arm": arm, "threshold": threshold, "ci": ci,
                "n_resamples": n_resamples, "method": method, "random_state": random_state, "conditions": conds,
                "groups": list(scores), "n_conditions": n_cond, "n_seeds": n_seeds}
    long = runs.rename(columns={by: "group"}).assign(group=lambda d: d["group"].map(_label))
    return Comparison(frame=table, profile=profile, scores=long.reset_index(drop=True), settings=settings)


def _aggregates(scores: dict[str, np.ndarray], *, threshold, random_state, **opts) -> pd.DataFrame:
    seeds = np.random.SeedSequence(random_state).spawn(len(scores) ** 2)
    rows = []
    for k, (name, m) in enumerate(scores.items()):
        got = agg.aggregate_intervals(m, threshold=threshold, random_state=np.random.default_rng(seeds[k]), **opts)
        rows += [(stat, name, "", *got[stat]) for stat in agg.AGGREGATES]
    pairs = list(itertools.permutations(scores, 2))
    for k, (x, y) in enumerate(pairs, start=len(scores)):
        got = agg.improvement_interval(scores[x], scores[y], random_state=np.random.default_rng(seeds[k]), **opts)
        rows.append(("probability_of_improvement", x, y, *got))
    return pd.DataFrame(rows, columns=["statistic", "group", "versus", "estimate", "low", "high"])


def _profiles(scores: dict[str, np.ndarray], *, taus: int, random_state, **opts) -> pd.DataFrame:
    values = np.concatenate([m.ravel() for m in scores.values()])
    grid = np.linspace(values.min(), values.max(), taus)
    seeds = np.random.SeedSequence([random_state, 1]).spawn(len(scores))
    parts = []
    for k, (name, m) in enumerate(scores.items()):
        frac, lo, hi = agg.profile_intervals(m, grid, random_state=np.random.default_rng(seeds[k]), **opts)
        parts.append(pd.DataFrame({"group": name, "tau": grid, "fraction": frac, "low": lo, "high": hi}))
    return pd.concat(parts, ignore_index=True)
