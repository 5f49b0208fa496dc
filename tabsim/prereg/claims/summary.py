"""What a set of claim runs says, as one table: claim, the paper's number, tabsim's estimate with its
interval per region, the verdict and where it holds; one figure per claim; and the exact expected
update beside the Monte-Carlo means where a claim has one, both per cell and as each hypothesis's
estimand (so a verdict about a mechanism can be read against the update without sampling noise)."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from tabsim.files.atomic import atomic_write_text
from tabsim.plotting.figures import plot_final, save_figure
from tabsim.prereg import analysis
from tabsim.prereg.claims.execute import ClaimRun
from tabsim.prereg.schema import load_plan

SUMMARY_CSV, SUMMARY_MD = "summary.csv", "summary.md"


def level_note(level: float) -> str:
    """`` (90%)`` for an interval that is not a 95% one (a TOST rule is judged on the ``1 - 2 alpha`` interval)."""
    return "" if abs(level - 0.95) < 1e-9 else f" ({100 * level:.0f}%)"


def _interval(r) -> str:
    return f"{r.estimate:+.3f} [{r.ci_low:+.3f}, {r.ci_high:+.3f}]{level_note(r.level)}"


def summary_row(run: ClaimRun) -> dict:
    """One claim's row of the summary table."""
    c, v = run.claim, run.verdict
    return {"claim": f"{c.id}: {c.title}", "paper": f"arXiv {c.paper.arxiv}", "paper_number": c.paper_number,
            "quantity": c.headline.label,
            "tabsim_estimate": "; ".join(f"{r.region}: {_interval(r)}" for r in v.regions),
            "verdict": v.verdict, "region": v.region_text, "run": "reduced" if run.quick else "confirmatory"}


def summary_table(runs: list[ClaimRun]) -> pd.DataFrame:
    return pd.DataFrame([summary_row(r) for r in runs])


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown_table(frame: pd.DataFrame) -> str:
    """A pipe table of ``frame`` (each cell on one line)."""
    head = "| " + " | ".join(frame.columns) + " |\n|" + "---|" * len(frame.columns) + "\n"
    return head + "".join("| " + " | ".join(_cell(x) for x in row) + " |\n" for row in frame.itertuples(index=False))


def write_summary(out: str | Path, runs: list[ClaimRun], formats=None) -> list[Path]:
    """Write ``summary.csv`` and ``summary.md`` (atomically) and a figure per claim, ``<ID>.png`` (in
    ``formats``: default the user's, :func:`tabsim.plotting.formats.figure_formats`)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    table = summary_table(runs)
    paths = [atomic_write_text(out / SUMMARY_CSV, table.to_csv(index=False)),
             atomic_write_text(out / SUMMARY_MD, markdown_table(table))]
    for run in runs:
        paths += claim_figure(run, out / run.claim.id, formats)
    return paths


def claim_figure(run: ClaimRun, stem: Path, formats=None) -> list[Path]:
    """The claim's figure: the final metric against its region factor, one line per arm (mean +/- 1 s.e.), in
    ``formats`` (default the user's, :func:`tabsim.plotting.formats.figure_formats`)."""
    f = run.claim.figure
    label = "reduced run" if run.quick else "confirmatory run"
    fig = plot_final(run.data(), metric=f.metric, by=list(f.by), title=f"{run.claim.id} ({label}): {run.verdict.verdict}")
    return save_figure(fig, stem, formats)


def _flow_columns(run: ClaimRun) -> dict[str, str]:
    """The expected flow's column -> the design's factor name for the swept and varied fields of the claim.

    The seeds' data carry a column per factor of the plan (named as the factor), the flow one per config
    field (the part after the section's dot, as :func:`tabsim.prereg.claims.execute.expected_flow` writes it);
    a field that is no factor of the plan keeps its own name.
    """
    plan, _ = load_plan(run.claim.plan_path)
    by_field = {f.field: f.name for f in plan.design.factors}
    sweep = next((f for f in plan.design.factors if f.name == run.claim.expected.sweep), None)
    columns = {sweep.field.rpartition(".")[2] if sweep else run.claim.expected.sweep: run.claim.expected.sweep}
    for field in run.claim.expected.vary:
        columns[field.partition(".")[2]] = by_field.get(field, field.partition(".")[2])
    return columns


def expected_beside(run: ClaimRun) -> pd.DataFrame | None:
    """Final metric per cell and arm: the Monte-Carlo mean over seeds beside the exact expected flow (the
    cells named by the plan's factors, so a factor named apart from its field, e.g. ``advantage`` for
    ``algo.estimator``, matches the flow's column of that field)."""
    if run.expected is None or run.claim.expected is None:
        return None
    metric = run.claim.figure.metric
    columns = _flow_columns(run)
    keys = [*columns.values(), "arm"]
    data = run.data()
    final = data[data["step"] == data["step"].max()]
    mc = final.groupby(keys, observed=True)[metric].mean().rename("monte_carlo")
    flow = run.expected.rename(columns=columns)
    exact = flow[flow["step"] == flow["step"].max()].groupby(keys, observed=True)[metric].mean().rename("expected")
    both = pd.concat([mc, exact], axis=1, join="inner").reset_index()
    both["difference"] = both["monte_carlo"] - both["expected"]
    return both


def _flow_as_runs(plan, flow: pd.DataFrame) -> pd.DataFrame | None:
    """The expected flow shaped as the design's tidy frame (a column per factor), as two identical seeds:
    the estimands' code then gives their point estimates unchanged (None when a factor is not in the flow)."""
    frame = flow.copy()
    for f in plan.design.factors:
        column = "arm" if f.field == "arm" else f.field.rpartition(".")[2]
        if column not in frame:
            return None
        frame[f.name] = frame[column].astype(str) if f.field == "arm" else frame[column]
    return pd.concat([frame.assign(seed=0), frame.assign(seed=1)], ignore_index=True)


def expected_estimates(run: ClaimRun) -> dict[str, float]:
    """Each hypothesis's estimand computed from the exact expected flow instead of the seeds, on the
    claim's headline scale (by hypothesis id; empty without a flow or when the flow lacks a factor).

    The same estimand code as the analysis runs on the flow's one trajectory per cell, so the number
    is what the plan's estimate converges to as seeds grow, up to the Monte-Carlo estimate of the
    flow's own sampling-free update (the interval of a run is about the seeds; this has none).
    """
    if run.expected is None or run.quick:
        return {}
    plan, _ = load_plan(run.claim.plan_path)
    frame = _flow_as_runs(plan, run.expected)
    if frame is None:
        return {}
    out, cache = {}, {}
    # a fit on identical seeds has no residual variance: statsmodels' tests of it warn (under a filter of
    # its own, so the warnings are recorded here and dropped)
    with warnings.catch_warnings(record=True), np.errstate(all="ignore"):
        seed_df = analysis.partition_frame(plan, frame)
        for h in plan.hypotheses:
            if h.id in run.claim.bearing:
                est = analysis.estimate(plan, frame, seed_df, h.estimand, h.condition, cache)
                out[h.id] = est.estimate * run.claim.headline.scale
    return out
