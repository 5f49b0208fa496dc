"""Run claim studies through the pre-registration runner and its run store.

A full run is the confirmatory run of the claim's locked plan into ``<claim>/results`` (refused without
a matching lock; resumable and run on any executor as ``tabsim prereg run`` is). A quick run is the same
design with the claim's small seed and step counts, written as a plan of its own into
``<out>/<ID>/plan.yaml`` and run exploratory into ``<out>/<ID>/run``: it checks the pipeline, not the claim.
Where the exact expected update applies (a bandit, rules without state across steps) the expected flow
of every static cell is computed beside a full run's Monte-Carlo seeds (``<claim>/expected.csv``).
"""
from __future__ import annotations

import copy
import dataclasses
import itertools
import json
from pathlib import Path
from typing import Callable, Optional

import pandas as pd
import yaml

from tabsim.files.atomic import atomic_write_text, read_frame
from tabsim.prereg.claims.catalog import Claim
from tabsim.prereg.claims.verdict import ClaimVerdict, claim_verdict
from tabsim.prereg.hashing import file_sha256
from tabsim.prereg.runner import run_study
from tabsim.prereg.schema import load_plan, read_document
from tabsim.prereg.results import load_run
from tabsim.prereg.status import DATA, RESULTS, read_status
from tabsim.runtime.run import run as run_config

QUICK_PLAN, QUICK_RUN, EXPECTED = "plan.yaml", "run", "expected.csv"


@dataclasses.dataclass(frozen=True)
class ClaimRun:
    """A finished run of one claim: its results, data folder, verdict and expected flow (or None)."""

    claim: Claim
    results: dict
    folder: Path
    verdict: ClaimVerdict
    expected: Optional[pd.DataFrame]
    quick: bool

    def data(self) -> pd.DataFrame:
        return read_frame(self.folder / DATA)


def quick_document(claim: Claim) -> dict:
    """The claim's plan with its quick seed and step counts: the same design, labelled a reduced run."""
    doc = copy.deepcopy(read_document(claim.plan_path))
    doc["title"] = f"{doc['title']} (reduced: {claim.quick.seeds} seeds, {claim.quick.steps} steps)"
    doc["design"] = {**doc["design"], "seeds": claim.quick.seeds, "steps": claim.quick.steps}
    return doc


def expected_flow(claim: Claim, plan_path: Path, *, executor=None, device=None,
                  precision: str | None = None) -> Optional[pd.DataFrame]:
    """The exact expected flow of every static cell of the plan (``claim.expected``), one frame; None without one.
    ``device``, ``precision``: as :func:`tabsim.runtime.run.run` takes them."""
    if claim.expected is None:
        return None
    plan, _ = load_plan(plan_path)
    d = plan.design
    base = copy.deepcopy(d.config)
    base["preset"] = d.preset
    arms = d.arms or [str(x) for f in d.factors if f.field == "arm" for x in f.levels]
    base["arms"] = {**base.get("arms", {}), "arms": list(arms)}
    base["train"] = {**base.get("train", {}), "steps": d.steps, "seed": d.first_seed, "dynamics": "expected"}
    sweep = next(f for f in d.factors if f.name == claim.expected.sweep)
    base["sweep"] = {sweep.field: [float(x) for x in sweep.levels]}
    names = list(claim.expected.vary)
    frames = []
    for levels in itertools.product(*claim.expected.vary.values()):
        cfg = copy.deepcopy(base)
        for name, level in zip(names, levels):
            section, _, key = name.partition(".")
            cfg[section] = {**cfg.get(section, {}), key: level}
        frame = run_config(cfg, progress=False, executor=executor, device=device, precision=precision).final()
        for name, level in zip(names, levels):
            frame[name.partition(".")[2]] = level
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def run_claim(claim: Claim, *, quick: bool = False, out: Path | None = None, resume: bool = False,
              overwrite: bool = False, key=None, public_key=None, executor=None, progress: bool = False,
              log: Callable[[str], None] | None = None, device=None, precision: str | None = None) -> ClaimRun:
    """Run one claim study (full: confirmatory into ``<claim>/results``; quick: reduced into ``out/<ID>``).

    A full run's expected flow is written beside the plan (``expected.csv``, stamped with the plan's SHA-256)
    and reused while the plan is unchanged. ``device``: where the study and the flow compute; ``precision``:
    the flow's floating type (the study's packed job computes in float32).
    """
    say = log or (lambda msg: None)
    if quick:
        where = Path(out) / claim.id
        where.mkdir(parents=True, exist_ok=True)
        plan_path = where / QUICK_PLAN
        atomic_write_text(plan_path, yaml.safe_dump(quick_document(claim), sort_keys=False, allow_unicode=True))
        folder = where / QUICK_RUN
        say(f"{claim.id}: reduced run ({claim.quick.seeds} seeds, {claim.quick.steps} steps) into {folder}")
        results = run_study(plan_path, folder, confirmatory=False, overwrite=True, executor=executor,
                            progress=progress, device=device)
        flow_path = None
    else:
        plan_path, folder = claim.plan_path, claim.results_dir
        say(f"{claim.id}: confirmatory run of {plan_path} into {folder}")
        results = run_study(plan_path, folder, confirmatory=True, resume=resume, overwrite=overwrite, key=key,
                            public_key=public_key, executor=executor, progress=progress, device=device)
        flow_path = claim.folder / EXPECTED
    # the exact flow belongs to the study's record; a reduced run only checks the pipeline
    flow = None if quick else _flow(claim, plan_path, flow_path, executor=executor, say=say, device=device,
                                    precision=precision)
    return ClaimRun(claim, results, folder, claim_verdict(claim, results["analysis"]), flow, quick)


def _flow(claim: Claim, plan_path: Path, flow_path: Path, *, executor, say, device=None,
          precision=None) -> Optional[pd.DataFrame]:
    if claim.expected is None:
        return None
    stamp = file_sha256(plan_path)
    if flow_path.is_file():
        kept = pd.read_csv(flow_path)
        if "plan_sha256" in kept and (kept["plan_sha256"] == stamp).all():
            return kept
    say(f"{claim.id}: the exact expected flow")
    flow = expected_flow(claim, plan_path, executor=executor, device=device, precision=precision)
    flow["plan_sha256"] = stamp
    atomic_write_text(flow_path, flow.to_csv(index=False))
    return flow


def read_claim_run(claim: Claim, *, verify: bool = True, public_key=None) -> Optional[ClaimRun]:
    """The claim's complete confirmatory run as it lies in ``<claim>/results`` (None when there is none).

    ``verify``: check it as ``tabsim prereg report`` does (digests, signatures, the analysis recomputed from
    the data; a failure raises); without it the recorded ``results.json`` of a complete run is read as is.
    """
    status = read_status(claim.results_dir)
    if status is None or status.get("state") != "complete":
        return None
    if verify:
        results, _ = load_run(claim.results_dir, public_key)
    else:
        results = json.loads((claim.results_dir / RESULTS).read_text())
    flow_path = claim.folder / EXPECTED
    flow = pd.read_csv(flow_path) if flow_path.is_file() else None
    return ClaimRun(claim, results, claim.results_dir, claim_verdict(claim, results["analysis"]), flow, False)
