"""The documentation page of the claim studies, written from their confirmatory runs (never by hand).

One section per claim: the quote and its paper, the paper's numbers, the table's setting and what it
cannot represent, the figure, the verdict with the interval of every region, and the exact expected
update beside the Monte-Carlo means where it applies; then the claims that wait, with what they wait
for. ``tabsim claims report`` writes it (``docs/claims.md`` and ``docs/assets/claims/<ID>.png``).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tabsim.files.atomic import atomic_write_text
from tabsim.prereg.claims.catalog import Waiting
from tabsim.prereg.claims.execute import ClaimRun
from tabsim.prereg.claims.summary import (claim_figure, expected_beside, expected_estimates, level_note,
                                          markdown_table, summary_table)

TITLE = "What a controlled simulator says about {count} published claims"
EXACT = "exact expected update"  # the region table's column: the estimand on the expected flow, no seed noise
_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
          "seventeen eighteen nineteen twenty").split()
HEADERS = {"claim": "claim", "paper": "paper", "paper_number": "the paper's number", "quantity": "quantity",
           "tabsim_estimate": "tabsim's estimate [95% interval], per region", "verdict": "verdict",
           "region": "where"}
INTRO = """\
Papers on GRPO variants make mechanistic claims that their own experiments cannot isolate: one training
run per arm, no paired seeds, no control of the base model's prior. A tabular simulator can put such a
claim to a test the paper could not run: paired seeds, a swept prior strength, the exact expected update.
Each study below is a pre-registered plan (`tabsim prereg`; see [pre-registration](prereg.md)) whose lock
was committed before its confirmatory run, reported against the plan. A verdict is one of SUPPORTED,
NOT SUPPORTED, DEPENDS (with where the claim holds and where it fails) and INCONCLUSIVE, and it says no
more than its intervals: a region whose hypothesis was inconclusive is named as unsettled. A verdict is
about the table, not about the paper's models: each section says what the table cannot represent.

This page is written by `tabsim claims report` from the runs' outputs; `tabsim claims run --quick`
runs a reduced version of every study (the same design, a few seeds and steps).
"""


def _quote(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.strip().splitlines())


def _para(text: str) -> str:
    return " ".join(text.split())


def _regions(run: ClaimRun) -> str:
    exact = expected_estimates(run)
    rows = [{"hypothesis": r.hypothesis, "region": r.region, run.claim.headline.label: f"{r.estimate:+.4f}",
             "95% interval": f"[{r.ci_low:+.4f}, {r.ci_high:+.4f}]" + level_note(r.level),
             **({EXACT: f"{exact[r.hypothesis]:+.4f}" if r.hypothesis in exact else ""} if exact else {}),
             "the hypothesis predicts": r.predicted, "hypothesis verdict": r.verdict,
             "the claim there": r.claim} for r in run.verdict.regions]
    note = "" if not exact else (
        f"\n*{EXACT}*: the hypothesis's estimand computed on the exact expected flow (one trajectory per cell, "
        "no seed noise). A gap wider than the interval is not estimation noise but the sampled process's own: "
        "the mean of sampled training runs under a nonlinear update is not the trajectory of its expected "
        "update.\n")
    return markdown_table(pd.DataFrame(rows)) + note


def _expected(run: ClaimRun) -> list[str]:
    both = expected_beside(run)
    if both is None:
        return []
    shown = both.copy()
    for col in ("monte_carlo", "expected", "difference"):
        shown[col] = shown[col].map(lambda x: f"{x:.4f}")
    return ["**The exact expected update beside the Monte-Carlo mean** (final "
            f"{run.claim.figure.metric}; the expected flow iterates the exact expected update, no seed noise):", "",
            markdown_table(shown)]


def claim_section(run: ClaimRun, figure: str) -> str:
    c, v = run.claim, run.verdict
    lines = [f"## {c.id}: {c.title}", "", _quote(c.quote), "",
             f"*{c.paper.authors}, \"{c.paper.title}\", arXiv {c.paper.arxiv}.*", "",
             f"**The paper's numbers.** {_para(c.paper_numbers)}", "",
             f"**The table's setting.** {_para(c.setting)}", "",
             f"![{c.id}: final {c.figure.metric} by {', '.join(c.figure.by)} and arm]({figure})", "",
             f"**Verdict: {v.verdict}**" + (f" ({v.region_text})." if v.region_text else "."), "",
             _regions(run), "", *_expected(run), "",
             f"**What the table cannot represent.** {_para(c.cannot_represent)}", ""]
    if c.waits:
        lines += [f"**What waits.** {_para(c.waits)}", ""]
    lines += [f"The record: `preregistration/claims/{c.id}/` (`plan.yaml`, its lock, `pilot.py`, `results/report.md`).",
              ""]
    return "\n".join(lines)


def render_page(runs: list[ClaimRun], waiting: list[Waiting], figures: dict[str, str]) -> str:
    table = summary_table(runs).drop(columns=["run"]).rename(columns=HEADERS)
    n = len(runs) + len(waiting)
    title = TITLE.format(count=_WORDS[n] if n < len(_WORDS) else n)
    parts = [f"# {title}", "", INTRO, "## Summary", "", markdown_table(table), ""]
    parts += [claim_section(r, figures[r.claim.id]) for r in runs]
    if waiting:
        parts += ["## Claims that wait", "",
                  "Each of these is a published claim the simulator could test once the component named is part "
                  "of tabsim, or one a table cannot represent (why is said).", ""]
        parts.append(markdown_table(pd.DataFrame(
            [{"id": w.id, "claim": w.claim, "paper": w.paper, "status": w.status, "waits for": w.waits_for}
             for w in waiting])))
    return "\n".join(parts).rstrip() + "\n"


def write_page(runs: list[ClaimRun], waiting: list[Waiting], page: str | Path, *, figures_dir: str | Path | None = None,
               draw: bool = True) -> Path:
    """Write the page (and, with ``draw``, each claim's figure into ``figures_dir``: default ``<page dir>/assets/claims``)."""
    page = Path(page)
    figures_dir = Path(figures_dir) if figures_dir is not None else page.parent / "assets" / "claims"
    figures = {}
    for run in runs:
        stem = figures_dir / run.claim.id
        if draw:
            figures_dir.mkdir(parents=True, exist_ok=True)
            claim_figure(run, stem)
        figures[run.claim.id] = Path(stem.with_suffix(".png")).relative_to(page.parent).as_posix() \
            if stem.is_relative_to(page.parent) else stem.with_suffix(".png").as_posix()
    return atomic_write_text(page, render_page(runs, waiting, figures))


