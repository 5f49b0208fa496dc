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
import functools
import itertools
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from tabsim.runtime.loading import KEY_COLUMNS, ResultFolderError
from tabsim.runtime.run import Result
from tabsim.stats import aggregate as agg
from tabsim.stats.partition import ACC_COLUMNS, DIFFERENCE_TERMS, seed_partition

TERMS = DIFFERENCE_TERMS + ACC_COLUMNS  # partition terms a comparison can score (per seed)
DEFAULT_METRIC, DEFAULT_ARM, DEFAULT_THRESHOLD = "pass1", "true", 1.0
MIN_RESAMPLES, MAX_RESAMPLES = 100, 100_000  # bootstrap resamples; the default is 2,000
MAX_RESAMPLE_BYTES = 1 << 30  # what the resamples of one pair of groups may hold at once
PROGRESS_SECONDS = 5.0  # a line on the resampling's progress at most this often


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
        frame = source
    elif isinstance(source, Result):
        frame = source.frame
    elif isinstance(source, (str, Path)):
        try:  # a published folder, checked against its manifest first (what `tabsim verify` checks)
            return Result.load(source).frame
        except ResultFolderError as err:
            raise CompareError(str(err)) from None
    else:
        raise CompareError(f"source must be a run folder, a Result or a DataFrame, got {type(source).__name__}")
    lacking = [c for c in KEY_COLUMNS if c not in frame.columns]
    if lacking:
        raise CompareError(f"source: the frame has no {', '.join(lacking)} column; a run's frame holds its swept "
                           f"fields, then {', '.join(KEY_COLUMNS)}, then its metrics")
    return frame


def condition_columns(frame: pd.DataFrame, by: str) -> list[str]:
    """The swept fields other than ``by``: a run's frame holds them before its ``seed`` column."""
    cols = list(frame.columns)
    return [c for c in cols[:cols.index("seed")] if c != by] if "seed" in cols else []


def labels(levels) -> dict:
    """A distinct text for each level: numbers as ``:g`` prints them, with more digits where two would
    print alike (0.3000001 and 0.3000002), never merging two levels into one group."""
    levels = list(levels)
    for digits in range(6, 18):
        out = {lvl: f"{lvl:.{digits}g}" if isinstance(lvl, (float, np.floating)) else str(lvl) for lvl in levels}
        if len(set(out.values())) == len(levels):
            return out
    return {lvl: repr(lvl) for lvl in levels}  # as Python prints them: distinct for distinct floats


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
    """Each group's scores as ``[seeds, conditions]``, the conditions in one order for every group; groups
    and conditions keyed by their values (two levels that print alike stay two groups)."""
    if runs["score"].isna().any():
        raise CompareError(f"metric: {metric!r} has no value at the final step of some runs (NaN); choose a metric "
                           "evaluated at every evaluation step, such as pass1")
    twice = runs.duplicated([by, *conds, "seed"])
    if twice.any():
        raise CompareError(f"source: {int(twice.sum())} run(s) appear more than once (the same {by}, condition and "
                           "seed); a run's frame holds each once")
    wide = runs.assign(_all=0).pivot_table(index=[by, "seed"], columns=conds or ["_all"], values="score",
                                           observed=True, aggfunc="first")
    names = labels(pd.unique(runs[by]))
    out = {}
    for lvl, name in names.items():
        m = wide.loc[lvl].dropna(how="all").to_numpy(dtype=float)
        if np.isnan(m).any():
            raise CompareError(f"by: group {name!r} lacks some conditions that other groups have (for some or all "
                               "of its seeds); every seed of every group needs every condition")
        out[name] = m
    if len(out) < 2:
        raise CompareError(f"by: {by!r} has one level ({', '.join(out)}); a comparison needs two or more")
    return out


def check_resamples(n_resamples, scores: dict[str, np.ndarray]) -> None:
    """Refuse more than :data:`MAX_RESAMPLES` resamples, or more than the resamples of the largest group
    can hold in :data:`MAX_RESAMPLE_BYTES` (a pair's resamples are held at once)."""
    if not isinstance(n_resamples, (int, np.integer)) or isinstance(n_resamples, bool) or \
            not MIN_RESAMPLES <= n_resamples <= MAX_RESAMPLES:
        raise CompareError(f"n_resamples: {n_resamples!r} must be an integer in [{MIN_RESAMPLES}, {MAX_RESAMPLES}]")
    cells = max(m.size for m in scores.values())
    most = MAX_RESAMPLE_BYTES // (16 * cells)
    if n_resamples > most:
        raise CompareError(f"n_resamples: {n_resamples} resamples of {cells} runs a group would hold "
                           f"{16 * cells * n_resamples / 2**30:.1f} GiB at once; at most {most} here")


def compare(source, *, by: str, metric: str = DEFAULT_METRIC, arm: str | None = None,
            threshold: float = DEFAULT_THRESHOLD, ci: float = 0.95, n_resamples: int = 2000, method: str = "rescaled",
            taus: int = 51, random_state: int = 0, log: Callable[[str], None] | None = None) -> Comparison:
    """Aggregate ``metric`` per level of ``by`` across conditions and seeds, with stratified bootstrap intervals.

    Args:
      source: a run or sweep folder (refused when its files differ from what was published, as ``tabsim
        verify`` reports them), a :class:`~tabsim.runtime.run.Result` or its tidy frame.
      by: the swept field whose levels are compared (``"algo.estimator"``, ``"preset"``, ``"arm"``, ...).
      metric: a float column of the frame at each run's final step (default ``pass1``), or a partition
        term per seed (``d_null``, ``d_elicit``, ``d_rd``, ``d_naive``, ``d_total``, ``acc_true``, ...).
      arm: the arm whose ``metric`` is scored (default ``true``, or the run's only arm); not with
        ``by="arm"`` or a partition term.
      threshold: the optimality gap's target, the best value the metric can reach (1.0 for accuracies).
      ci: two-sided level; n_resamples: bootstrap resamples, in [:data:`MIN_RESAMPLES`, :data:`MAX_RESAMPLES`];
        method: ``"rescaled"`` (percentile bounds stretched by ``sqrt(n / (n - 1))``, which covers at the
        nominal rate with few seeds) or ``"percentile"`` (rliable's), see :mod:`tabsim.stats.aggregate`;
        taus: points of the performance profile;
      random_state: the bootstrap's seed; log: called with a line before the resampling and with its
        progress and the time left, every few seconds while it lasts.

    Groups may hold different numbers of seeds: each is resampled on its own (the probability of
    improvement resamples the two groups independently), and each reports its own ``n_seeds``.

    Returns:
      :class:`Comparison`; its ``frame`` has one row per (statistic, group[, versus]).
    """
    frame = _source_frame(source)
    allowed = condition_columns(frame, "") + ["arm"]
    if not isinstance(by, str) or by not in allowed:
        raise CompareError(f"by: {by!r} is not a swept field of the run; allowed: {', '.join(map(str, allowed))}")
    if not (isinstance(taus, int) and taus >= 2):
        raise CompareError(f"taus: {taus!r} must be an integer >= 2 (points of the performance profile)")
    if not isinstance(random_state, (int, np.integer)) or isinstance(random_state, bool) or random_state < 0:
        raise CompareError(f"random_state: {random_state!r} must be an integer >= 0 (the bootstrap's seed)")
    runs, conds = _runs(frame, by, metric, arm)
    scores = _matrices(runs, by, conds, metric)
    check_resamples(n_resamples, scores)
    try:
        opts = {"ci": ci, "n_resamples": n_resamples, "method": method}
        table, profile = _statistics(scores, threshold=threshold, taus=taus, random_state=random_state, log=log,
                                     **opts)
    except ValueError as err:
        raise CompareError(str(err)) from None
    n_cond = next(iter(scores.values())).shape[1]
    n_seeds = {name: int(m.shape[0]) for name, m in scores.items()}
    table.insert(0, "metric", metric)
    table["n_conditions"] = n_cond
    table["n_seeds"] = table["group"].map(n_seeds)
    table["n_seeds_versus"] = table["versus"].map(n_seeds).astype("Int64")
    label = metric if metric in TERMS or by == "arm" else f"{metric} ({arm or _default_arm(frame)})"
    settings = {"by": by, "metric": metric, "label": label, "arm": arm, "threshold": threshold, "ci": ci,
                "n_resamples": n_resamples, "method": method, "random_state": random_state, "conditions": conds,
                "groups": list(scores), "n_conditions": n_cond, "n_seeds": n_seeds}
    names = labels(pd.unique(runs[by]))
    long = runs.rename(columns={by: "group"}).assign(group=lambda d: d["group"].map(names))
    return Comparison(frame=table, profile=profile, scores=long.reset_index(drop=True), settings=settings)


def _statistics(scores: dict[str, np.ndarray], *, threshold, taus: int, random_state, log, **opts):
    """The aggregates, the probabilities of improvement and the profiles, as (table, profile), said to ``log``
    as they go: one resampling job at a time, its share of the work counted in runs resampled."""
    seeds = np.random.SeedSequence(random_state).spawn(len(scores) ** 2)
    values = np.concatenate([m.ravel() for m in scores.values()])
    grid = np.linspace(values.min(), values.max(), taus)
    profile_seeds = np.random.SeedSequence([random_state, 1]).spawn(len(scores))
    rows, parts = [], []

    def aggregate(k, name, m):
        got = agg.aggregate_intervals(m, threshold=threshold, random_state=np.random.default_rng(seeds[k]), **opts)
        rows.extend((stat, name, "", *got[stat]) for stat in agg.AGGREGATES)

    def improvement(k, x, y):
        got = agg.improvement_interval(scores[x], scores[y], random_state=np.random.default_rng(seeds[k]), **opts)
        rows.append(("probability_of_improvement", x, y, *got))

    def profile(k, name, m):
        frac, lo, hi = agg.profile_intervals(m, grid, random_state=np.random.default_rng(profile_seeds[k]), **opts)
        parts.append(pd.DataFrame({"group": name, "tau": grid, "fraction": frac, "low": lo, "high": hi}))

    pairs = list(itertools.permutations(scores, 2))
    # (work, job) in runs resampled: a pair's comparisons cost about a sixth of a run each, a profile's run
    # one and a half (timed at 6 to 200 seeds x 1 to 50 conditions)
    jobs = ([(m.size, functools.partial(aggregate, k, name, m)) for k, (name, m) in enumerate(scores.items())]
            + [(scores[x].size * scores[y].shape[0] / 6, functools.partial(improvement, k, x, y))
               for k, (x, y) in enumerate(pairs, start=len(scores))]
            + [(1.5 * m.size, functools.partial(profile, k, name, m)) for k, (name, m) in enumerate(scores.items())])
    if log is not None:
        log(f"resampling: {opts['n_resamples']} resamples of {len(scores)} groups and {len(pairs)} pairs")
    _run_jobs(jobs, log)
    table = pd.DataFrame(rows, columns=["statistic", "group", "versus", "estimate", "low", "high"])
    return table, pd.concat(parts, ignore_index=True)


def _run_jobs(jobs, log) -> None:
    """Run each ``(work, job)``; ``log`` how many are done and the time left, at the rate of the jobs after
    the first (which also pays for warming up): after the second when ``every`` seconds or more are left,
    then every ``every`` seconds (:data:`PROGRESS_SECONDS`)."""
    every, total, t0 = PROGRESS_SECONDS, sum(w for w, _ in jobs), time.perf_counter()
    said, done, start, first = t0, 0.0, t0, jobs[0][0]
    for i, (work, job) in enumerate(jobs, start=1):
        job()
        now = time.perf_counter()
        if i == 1:
            start = now
            continue
        done += work
        left = (now - start) * (total - first - done) / max(done, 1e-12)
        if log is not None and i < len(jobs) and (now - said >= every or (i == 2 and left >= every)):
            log(f"resampling: {i} of {len(jobs)} statistics done in {now - t0:.0f} s; about {left:.0f} s left")
            said = now
