"""Compare groups of a run or sweep across its conditions: rliable's aggregates with stratified intervals.

    import tabsim as ts
    cmp = ts.compare("results/estimators", by="algo.estimator")   # a run folder, a Result or a frame
    cmp.frame      # statistic x group (x versus): estimate, low, high, and the method that gave them
    cmp.profile    # performance profiles: fraction of runs above tau, with bands
    cmp.curves     # sample efficiency: each group's IQM at each evaluated step, with bands
    cmp.figures()  # rliable's four figures: intervals, probability of improvement, profile, curves

A *group* is a level of ``by`` (an estimator, a preset, an arm); a *condition* is a combination of
the other swept fields (the stratum: seeds are resampled within it); a *run* is one seed of one
group in one condition, scored by ``metric`` at its final evaluated step, raw or normalised per
condition (:mod:`tabsim.stats.normalize`). The estimators are in :mod:`tabsim.stats.aggregate`.
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

from tabsim.base.choices import RESAMPLES_BOUNDS
from tabsim.runtime.loading import KEY_COLUMNS, ResultFolderError
from tabsim.runtime.run import Result
from tabsim.stats import aggregate as agg
from tabsim.stats import normalize as norm
from tabsim.stats.partition import ACC_COLUMNS, DIFFERENCE_TERMS, seed_partition
from tabsim.studies.compare_notes import NOT_APPLICABLE, RESAMPLED, annotate

TERMS = DIFFERENCE_TERMS + ACC_COLUMNS  # partition terms a comparison can score (per seed)
DEFAULT_METRIC, DEFAULT_ARM, DEFAULT_THRESHOLD = "pass1", "true", 1.0
MIN_RESAMPLES, MAX_RESAMPLES = RESAMPLES_BOUNDS  # bootstrap resamples; the default is 2,000
MAX_RESAMPLE_BYTES = 1 << 30  # what the resamples of one pair of groups may hold at once
PROGRESS_SECONDS = 5.0  # a line on the resampling's progress at most this often
CURVE_STEPS = 21  # evaluated steps on the sample-efficiency curves: each costs a group's resampling


class CompareError(ValueError):
    """A comparison that cannot be made from this input; the message names the field and the allowed values."""


@dataclasses.dataclass(frozen=True)
class Comparison:
    """Aggregates (``frame``), performance profiles (``profile``) and the scores they come from (``scores``)."""

    frame: pd.DataFrame
    profile: pd.DataFrame
    scores: pd.DataFrame
    settings: dict
    curves: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)

    def figure(self):
        """The performance-profile figure (:func:`tabsim.plotting.profiles.plot_profile`)."""
        return self.figures()["profile"]

    def figures(self) -> dict:
        """rliable's figures by name: ``intervals`` (each aggregate's interval per group), ``improvement``
        (the probabilities of improvement), ``profile`` and, with two or more evaluated steps, ``curves``
        (IQM over training steps); each says the interval method and the normalisation."""
        from tabsim.plotting import compare_figures as cf  # lazy: matplotlib only when a figure is drawn

        s = self.settings
        kw = {"metric": s["label"], "by": s["by"], "ci": s["ci"], "method": s["method"],
              "normalization": s["normalize"]}
        out = {"intervals": cf.plot_intervals(self.frame, **kw), "improvement": cf.plot_improvement(self.frame, **kw),
               "profile": cf.plot_profile(self.profile, **kw)}
        if len(self.curves) and self.curves["step"].nunique() > 1:
            out["curves"] = cf.plot_sample_efficiency(self.curves, **kw)
        return out

    def write(self, folder: str | Path, *, figure: bool = True, formats=None, **extra) -> list[Path]:
        """Write ``compare.csv``, ``profile.csv``, ``scores.csv``, ``curves.csv``, ``provenance.json`` (the
        settings and ``extra``) and, with ``figure``, each of :meth:`figures` as ``NAME.png`` into ``folder``;
        returns the paths."""
        from tabsim.files.atomic import write_frame, write_json  # lazy: the files floor only when writing
        from tabsim.files.provenance import provenance

        folder = Path(folder)
        out = [write_frame(folder / f"{name}.csv", getattr(self, attr))
               for name, attr in (("compare", "frame"), ("profile", "profile"), ("scores", "scores"),
                                  ("curves", "curves")) if name != "curves" or len(self.curves)]
        out.append(write_json(folder / "provenance.json", provenance(compare=self.settings, **extra)))
        if figure:
            from tabsim.plotting.figures import save_figure  # lazy: matplotlib only when a figure is drawn

            for name, fig in self.figures().items():
                out += save_figure(fig, folder / name, formats)
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
            taus=51, random_state: int = 0, log: Callable[[str], None] | None = None, pairs=None,
            normalize: str = "none", conditions: bool = False) -> Comparison:
    """Aggregate ``metric`` per level of ``by`` across conditions and seeds, with stratified bootstrap intervals.

    Args:
      source: a run or sweep folder (refused when its files differ from what was published, as ``tabsim
        verify`` reports them), a :class:`~tabsim.runtime.run.Result` or its tidy frame.
      by: the swept field whose levels are compared (``"algo.estimator"``, ``"preset"``, ``"arm"``, ...).
      metric: a float column of the frame at each run's final step (default ``pass1``), or a partition
        term per seed (``d_null``, ``d_elicit``, ``d_rd``, ``d_naive``, ``d_total``, ``acc_true``, ...);
        a difference term has no optimality gap (:data:`NOT_APPLICABLE`).
      arm: the arm whose ``metric`` is scored (default ``true``, or the run's only arm); not with
        ``by="arm"`` or a partition term.
      threshold: the optimality gap's target, the best value the metric can reach (1.0 for accuracies and
        for normalised scores).
      ci: two-sided level; n_resamples: bootstrap resamples, in [:data:`MIN_RESAMPLES`, :data:`MAX_RESAMPLES`];
        method: ``"rescaled"`` (percentile bounds stretched by ``sqrt(n / (n - 1))``, which covers at the
        nominal rate with few seeds), ``"percentile"`` (rliable's) or ``"bca"``, see
        :mod:`tabsim.stats.aggregate`; conditions: resample the conditions as well as the seeds;
      taus: the performance profile's thresholds: a number of points from the least score to the greatest,
        or the thresholds themselves;
      random_state: the bootstrap's seed; log: called with a line before the resampling and with its
        progress and the time left, every few seconds while it lasts;
      pairs: the ``(x, y)`` groups whose probability of improvement P(x > y) is reported (default: every
        ordered pair);
      normalize: ``"none"``, ``"minmax"`` or ``"arms"`` (:mod:`tabsim.stats.normalize`), per condition.

    Groups may hold different numbers of seeds: each is resampled on its own (the probability of
    improvement resamples the two groups independently), and each reports its own ``n_seeds``.

    Returns:
      :class:`Comparison`; its ``frame`` has one row per (statistic, group[, versus]), each with the
      interval method, the normalisation and a ``note`` where an estimate needs one.
    """
    frame = _source_frame(source)
    allowed = condition_columns(frame, "") + ["arm"]
    if not isinstance(by, str) or by not in allowed:
        raise CompareError(f"by: {by!r} is not a swept field of the run; allowed: {', '.join(map(str, allowed))}")
    if not isinstance(random_state, (int, np.integer)) or isinstance(random_state, bool) or random_state < 0:
        raise CompareError(f"random_state: {random_state!r} must be an integer >= 0 (the bootstrap's seed)")
    if normalize not in norm.NORMALIZATIONS:
        raise CompareError(f"normalize: {normalize!r} is not a normalisation; allowed: {', '.join(norm.NORMALIZATIONS)}")
    runs, conds = _runs(frame, by, metric, arm)
    scale = _scale(frame, runs, by, conds, metric, arm, normalize)
    scores = _matrices(scale(runs), by, conds, metric)
    grid = _grid(taus, scores)
    pairs = _pairs(pairs, scores)
    check_resamples(n_resamples, scores)
    steps = {} if metric in TERMS else _step_matrices(frame, by, conds, metric, arm, scale, scores)
    try:
        opts = {"ci": ci, "n_resamples": n_resamples, "method": method, "conditions": conditions}
        table, profile, curves = _statistics(scores, threshold=threshold, grid=grid, pairs=pairs, steps=steps,
                                             skip=NOT_APPLICABLE.get(metric, {}), random_state=random_state,
                                             log=log, **opts)
    except ValueError as err:
        raise CompareError(str(err)) from None
    label = metric if metric in TERMS or by == "arm" else f"{metric} ({arm or _default_arm(frame)})"
    n_cond = next(iter(scores.values())).shape[1]
    n_seeds = {name: int(m.shape[0]) for name, m in scores.items()}
    settings = {"by": by, "metric": metric, "label": label, "arm": _arm_of(frame, by, metric, arm),
                "threshold": threshold, "ci": ci, "n_resamples": n_resamples, "method": method,
                "resampled": RESAMPLED[bool(conditions)], "normalize": normalize,
                "normalization": norm.DESCRIPTIONS[normalize], "random_state": random_state, "conditions": conds,
                "groups": list(scores), "pairs": [list(p) for p in pairs], "taus": [float(t) for t in grid],
                "n_conditions": n_cond, "n_seeds": n_seeds,
                "not_reported": dict(NOT_APPLICABLE.get(metric, {}))}
    table = annotate(table, settings)
    names = labels(pd.unique(runs[by]))
    long = scale(runs).rename(columns={by: "group"}).assign(group=lambda d: d["group"].map(names))
    return Comparison(frame=table, profile=profile, scores=long.reset_index(drop=True), settings=settings,
                      curves=curves)


def _arm_of(frame, by, metric, arm) -> str:
    """The arm scored: '' where the groups are the arms, 'all' for a partition term (it combines them)."""
    return "" if by == "arm" else "all" if metric in TERMS else (arm or _default_arm(frame))


def _grid(taus, scores) -> np.ndarray:
    values = np.concatenate([m.ravel() for m in scores.values()])
    if isinstance(taus, (int, np.integer)) and not isinstance(taus, bool):
        if taus < 2:
            raise CompareError(f"taus: {taus!r} must be an integer >= 2 (points of the performance profile)")
        return np.linspace(values.min(), values.max(), int(taus))
    try:
        grid = np.asarray(taus, dtype=float)
    except (TypeError, ValueError):
        grid = np.array([])
    if grid.ndim != 1 or grid.size < 1 or not np.isfinite(grid).all():
        raise CompareError(f"taus: {taus!r} must be an integer >= 2 or a list of finite thresholds")
    return np.unique(grid)


def _pairs(pairs, scores) -> list[tuple[str, str]]:
    if pairs is None:
        return list(itertools.permutations(scores, 2))
    out = []
    for pair in pairs:
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise CompareError(f"pairs: {pair!r} must be two groups (x, y)")
        x, y = (str(g) for g in pair)
        for g in (x, y):
            if g not in scores:
                raise CompareError(f"pairs: {g!r} is not a group; allowed: {', '.join(scores)}")
        if x == y:
            raise CompareError(f"pairs: ({x}, {y}) compares a group with itself; name two groups")
        out.append((x, y))
    return list(dict.fromkeys(out))


def _scale(frame, runs, by, conds, metric, arm, normalize) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """The normalisation as a function of a runs frame (``score`` per row): the same map per condition
    (and group, for ``arms``) at every step, taken from the final step."""
    if normalize == "none":
        return lambda rows: rows
    keys = list(conds) if normalize == "minmax" or by == "arm" else [by, *conds]
    if normalize == "arms":
        if metric in TERMS:
            raise CompareError(f"normalize: 'arms' does not apply to {metric!r}, a partition term (already a "
                               "difference of arms); choose minmax or none")
        have = {str(a) for a in pd.unique(frame["arm"])}
        if not {"frozen", "true"} <= have:
            raise CompareError(f"normalize: 'arms' needs the frozen and true arms; the run has {', '.join(sorted(have))}")
        last = frame.groupby([c for c in [by, *conds] if c != "arm"] or ["arm"], observed=True)["step"].transform("max")
        ref = frame[frame["step"] == last].rename(columns={metric: "score"}).assign(_all=0)
        maps = norm.reference_maps(ref, keys or ["_all"], low="frozen", high="true")
    else:
        maps = norm.minmax_maps(runs.assign(_all=0), keys or ["_all"])

    def scale(rows):
        try:
            return norm.apply_maps(rows.assign(_all=0), maps, keys or ["_all"]).drop(columns="_all")
        except ValueError as err:
            raise CompareError(f"normalize {normalize!r}: {err}") from None
    return scale


def _step_matrices(frame, by, conds, metric, arm, scale, scores) -> dict[int, dict[str, np.ndarray]]:
    """Each evaluated step's score matrices (for the sample-efficiency curves): the steps at which every
    run of every group has a value, at most :data:`CURVE_STEPS` of them evenly spread (the last kept)."""
    rows = _pick_arm(frame, by, arm)[[by, *conds, "seed", "step", metric]].rename(columns={metric: "score"})
    rows = rows[rows.groupby("step")["score"].transform(lambda v: v.notna().all())]
    steps = np.sort(pd.unique(rows["step"]))
    if len(steps) > CURVE_STEPS:
        rows = rows[rows["step"].isin(steps[np.unique(np.linspace(0, len(steps) - 1, CURVE_STEPS).round().astype(int))])]
    out = {}
    for step, at in rows.groupby("step", sort=True):
        try:
            got = _matrices(scale(at.drop(columns="step")), by, conds, metric)
        except CompareError:
            continue
        if all(got[g].shape == scores[g].shape for g in scores):
            out[int(step)] = got
    return out


def _statistics(scores: dict[str, np.ndarray], *, threshold, grid, pairs, steps, skip, random_state, log, **opts):
    """The aggregates, the probabilities of improvement, the profiles and the curves, as (table, profile,
    curves), said to ``log`` as they go: one resampling job at a time, its share of the work counted in
    runs resampled."""
    seeds = np.random.SeedSequence(random_state).spawn(len(scores) ** 2)
    profile_seeds = np.random.SeedSequence([random_state, 1]).spawn(len(scores))
    curve_seeds = np.random.SeedSequence([random_state, 2]).spawn(max(1, len(steps)))
    rows, parts, points = [], [], []
    every = list(itertools.permutations(scores, 2))

    def aggregate(k, name, m):
        got = agg.aggregate_intervals(m, threshold=threshold, random_state=np.random.default_rng(seeds[k]), **opts)
        rows.extend((stat, name, "", *got[stat]) for stat in agg.AGGREGATES if stat not in skip)

    def improvement(k, x, y):
        got = agg.improvement_interval(scores[x], scores[y], random_state=np.random.default_rng(seeds[k]), **opts)
        rows.append(("probability_of_improvement", x, y, *got))

    def profile(k, name, m):
        frac, lo, hi = agg.profile_intervals(m, grid, random_state=np.random.default_rng(profile_seeds[k]), **opts)
        parts.append(pd.DataFrame({"group": name, "tau": grid, "fraction": frac, "low": lo, "high": hi}))

    def curve(k, step, ms):
        rng = np.random.default_rng(curve_seeds[k])
        for name, m in ms.items():
            points.append((step, name, *agg.aggregate_intervals(m, threshold=threshold, random_state=rng,
                                                                **opts)["iqm"]))

    # (work, job) in runs resampled: a pair's comparisons cost about a sixth of a run each, a profile's run
    # one and a half (timed at 6 to 200 seeds x 1 to 50 conditions)
    jobs = ([(m.size, functools.partial(aggregate, k, name, m)) for k, (name, m) in enumerate(scores.items())]
            + [(scores[x].size * scores[y].shape[0] / 6, functools.partial(improvement, every.index((x, y))
                                                                           + len(scores), x, y)) for x, y in pairs]
            + [(1.5 * m.size, functools.partial(profile, k, name, m)) for k, (name, m) in enumerate(scores.items())]
            + [(sum(m.size for m in ms.values()), functools.partial(curve, k, step, ms))
               for k, (step, ms) in enumerate(steps.items())])
    if log is not None:
        log(f"resampling: {opts['n_resamples']} resamples of {len(scores)} groups and {len(pairs)} pairs"
            + (f", IQM at {len(steps)} steps" if steps else ""))
    _run_jobs(jobs, log)
    table = pd.DataFrame(rows, columns=["statistic", "group", "versus", "estimate", "low", "high"])
    curves = pd.DataFrame(points, columns=["step", "group", "iqm", "low", "high"])
    return table, pd.concat(parts, ignore_index=True), curves


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
