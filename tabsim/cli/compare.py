"""``tabsim compare RUN_OR_SWEEP --by FIELD``: aggregates across conditions with stratified bootstrap intervals."""
from __future__ import annotations

import math
import shlex
import threading
from pathlib import Path

import click

from tabsim.base.choices import RESAMPLES_BOUNDS
from tabsim.cli.jsonout import emit, json_option, say
from tabsim.cli.options import check_out, fail, open_store
from tabsim.cli.phases import Phases
from tabsim.cli.completion import complete_factor

MIN_RESAMPLES, MAX_RESAMPLES = RESAMPLES_BOUNDS  # from the ground floor: tabsim.studies.compare loads pandas

STATISTICS = ("mean", "median", "iqm", "optimality_gap")
SILENT_SECONDS = 3.0  # at most this long with no line while the run is read and scored
METHODS = ("rescaled", "percentile", "bca")  # as tabsim.stats.aggregate has them
NORMALIZATIONS = ("none", "minmax", "arms")  # as tabsim.stats.normalize has them


def _taus(text: str | None):
    """``--taus``: a number of points (``51``) or comma-separated thresholds (``0.2,0.5,0.8``)."""
    if text is None:
        return 51
    try:
        if "," not in text:
            return int(text)
        return [float(t) for t in text.split(",")]
    except ValueError:
        raise click.UsageError(f"--taus: {text!r} must be a number of points (an integer >= 2) or comma-separated "
                               "thresholds such as 0.2,0.5,0.8") from None


def _check(threshold: float, ci: float, reps: int) -> None:
    problems = []
    if not math.isfinite(threshold):
        problems.append(f"--threshold: {threshold!r} must be a finite number (the metric's best value)")
    if not (0.0 < ci < 1.0):
        problems.append(f"--ci: {ci!r} must be in (0, 1)")
    if not MIN_RESAMPLES <= reps <= MAX_RESAMPLES:
        problems.append(f"--resamples, --reps: {reps!r} must be an integer in [{MIN_RESAMPLES}, {MAX_RESAMPLES}]")
    if problems:
        raise click.UsageError("; ".join(problems))


def _summary(frame) -> str:
    """Aggregates as ``estimate [low, high]``, one line per group, and the probabilities of improvement."""
    cell = frame.assign(text=[f"{e:.4f} [{lo:.4f}, {hi:.4f}]" for e, lo, hi in
                              zip(frame["estimate"], frame["low"], frame["high"])])
    aggs = cell[cell["statistic"].isin(STATISTICS)].pivot(index="group", columns="statistic", values="text")
    aggs = aggs.reindex(index=list(dict.fromkeys(cell["group"])), columns=list(STATISTICS))
    poi = cell[cell["statistic"] == "probability_of_improvement"]
    aggs = aggs.dropna(axis=1, how="all")  # a statistic not reported for this metric
    lines = [aggs.to_string(), "", "probability of improvement P(row > column):"]
    lines += [f"  {g} > {v}: {t}" for g, v, t in zip(poi["group"], poi["versus"], poi["text"])]
    notes = frame[frame["note"] != ""]
    lines += [f"note: {s} {g}{' > ' + v if v else ''}: {n}" for s, g, v, n in
              zip(notes["statistic"], notes["group"], notes["versus"], notes["note"])]
    return "\n".join(lines)


def _seeds(n_seeds: dict) -> str:
    """``6 seed(s)`` when every group has as many, else each group's: ``seeds grpo 6, rloo 4``."""
    counts = set(n_seeds.values())
    if len(counts) == 1:
        return f"{counts.pop()} seed(s)"
    return "seeds " + ", ".join(f"{g} {n}" for g, n in n_seeds.items())


@click.command("compare")
@click.argument("source", metavar="RUN_OR_SWEEP", type=click.Path(file_okay=False, path_type=Path))
@click.option("--by", required=True, metavar="FIELD", shell_complete=complete_factor,
              help="The swept field whose levels are compared (algo.estimator, preset, arm, ...).")
@click.option("--metric", default="pass1", show_default=True,
              help="A metric column at each run's final step, or a partition term per seed (d_null, d_elicit, d_rd, "
                   "d_naive, d_total).")
@click.option("--arm", default=None, help="The arm whose metric is scored (default: true, or the run's only arm).")
@click.option("--threshold", type=float, default=1.0, show_default=True,
              help="The optimality gap's target: the best value the metric can reach.")
@click.option("--ci", type=float, default=0.95, show_default=True, help="Two-sided interval level.")
@click.option("--resamples", "--reps", "reps", type=int, default=2000, show_default=True,
              help=f"Bootstrap resamples, {MIN_RESAMPLES} to {MAX_RESAMPLES:,} (--reps is the same); a line says the "
                   "time left while they take more than a few seconds.")
@click.option("--method", type=click.Choice(METHODS), default="rescaled", show_default=True,
              help="Interval: percentile bounds stretched by sqrt(n/(n-1)) for n seeds (covers at the nominal rate "
                   "with few seeds), rliable's plain percentile interval, or BCa (scipy.stats.bootstrap).")
@click.option("--conditions", "resample_conditions", is_flag=True,
              help="Resample the conditions as well as the seeds within them (rliable's task bootstrap): the "
                   "intervals then speak for other conditions like these.")
@click.option("--normalize", type=click.Choice(NORMALIZATIONS), default="none", show_default=True,
              help="Scores per condition: raw; min-max over all groups' runs; or (score - FROZEN) / (TRUE - FROZEN), "
                   "the arms' means in the condition.")
@click.option("--pairs", nargs=2, multiple=True, metavar="X Y",
              help="Report P(X > Y) for these groups only; repeat for more pairs (default: every ordered pair).")
@click.option("--taus", default=None, metavar="N|T1,T2,...",
              help="The performance profile's thresholds: N points from the least score to the greatest "
                   "(default 51), or the thresholds themselves, comma-separated.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="The bootstrap's random seed.")
@click.option("--out", "-o", type=click.Path(file_okay=False, path_type=Path), default=Path("results/compare"),
              show_default=True, help="Output folder, published whole (a non-empty one is refused without "
                                      "--overwrite); never the run folder, inside it or holding it.")
@click.option("--overwrite", is_flag=True, help="Replace a non-empty --out.")
@click.option("--no-figure", is_flag=True, help="Write no figure.")
@click.option("--pdf", is_flag=True, help="Also write the figure as PDF beside its PNG.")
@click.option("--quiet", "-q", is_flag=True, help="No summary.")
@json_option
def command(source, by, metric, arm, threshold, ci, reps, method, resample_conditions, normalize, pairs, taus, seed, out,
            overwrite, no_figure, pdf, quiet, as_json):
    """Compare the levels of --by across a run's conditions: mean, median, IQM, optimality gap, probability of
    improvement (stratified bootstrap intervals), and a performance profile.

    Conditions are the combinations of the other swept fields; seeds are resampled within each.
    Writes DIR/compare.csv, profile.csv, scores.csv, curves.csv, provenance.json and rliable's figures:
    intervals.png, improvement.png, profile.png and curves.png (IQM over training steps).

    \b
    Example:
      tabsim compare results/estimators --by algo.estimator --out results/estimators_compare
    """
    _check(threshold, ci, reps)
    grid = _taus(taus)
    check_out(out, reads=[("run or sweep it reads", source)])  # before anything is read or computed
    log = Phases(quiet)
    # a line if reading and scoring the run outlast SILENT_SECONDS before the resampling's first line;
    # none before a refusal that comes sooner, which stays one line
    early = threading.Timer(SILENT_SECONDS, log, [f"reading {source} and scoring its runs"])
    early.daemon = True
    early.start()
    # lazy: `tabsim compare --help` loads no pandas, scipy or matplotlib
    from tabsim.studies.compare import CompareError, compare

    def said(line: str) -> None:
        early.cancel()
        log(line)

    try:
        cmp = compare(source, by=by, metric=metric, arm=arm, threshold=threshold, ci=ci, n_resamples=reps,
                      method=method, random_state=seed, log=said, pairs=list(pairs) or None, normalize=normalize,
                      conditions=resample_conditions, taus=grid)
    except CompareError as err:
        early.cancel()
        fail(str(err))
    early.cancel()
    cmd = " ".join(["tabsim compare", shlex.quote(str(source)), "--by", shlex.quote(by), "--metric",
                    shlex.quote(metric), *(["--arm", shlex.quote(arm)] if arm else [])])
    with open_store(out, overwrite=overwrite, resume=False, key=None, description="tabsim compare",
                    reads=[("run or sweep it reads", source)]) as store:
        paths = cmp.write(store.dir, figure=not no_figure, formats=("png", "pdf") if pdf else ("png",),
                          source=str(source), command=cmd)
    files = [p.name for p in paths]
    if not quiet:
        s = cmp.settings
        say(f"{s['label']} by {by}: {s['n_conditions']} condition(s) x {_seeds(s['n_seeds'])}, "
            f"{ci:.0%} stratified bootstrap intervals, method {method} ({reps} resamples of {s['resampled']}); "
            f"{s['normalization']}", as_json)
        for stat, why in s["not_reported"].items():
            say(f"{stat} not reported for {metric}: {why}", as_json)
        say(_summary(cmp.frame), as_json)
        say(f"wrote {out}/{', '.join(files)}", as_json)
    if as_json:
        emit({"command": "tabsim compare", "source": str(source), "out": str(out), "files": files,
              **{k: cmp.settings[k] for k in ("by", "metric", "arm", "threshold", "ci", "n_resamples", "method", "groups",
                                              "conditions", "n_conditions", "n_seeds", "resampled", "normalize",
                                              "pairs", "not_reported")},
              "rows": cmp.frame.to_dict(orient="records")})
