"""Run a pre-registered study: verify the lock, run the design, analyse, and mark the run complete.

The output folder follows a small protocol so that an interrupted run can never pass for a finished
one: ``status.json`` is written first with ``state: running``; data and ``results.json`` follow;
only then is ``status.json`` rewritten with ``state: complete`` and the SHA-256 of every result
file. ``tabsim prereg report`` refuses any folder whose status is not complete or whose files no
longer match those hashes. Reports left over from an earlier run in the same folder are deleted
before the new run starts.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import time
from pathlib import Path
from typing import Optional

import pandas as pd

from tabsim.io import provenance, write_frame, write_json
from tabsim.prereg import locking as lock_mod
from tabsim.prereg.schema import Plan, PreregError, _classify_field, design_runs, load_plan

STATUS = "status.json"
RESULTS = "results.json"
DATA = "data.parquet"
REPORT_FILES = ("report.md", "report.json")
RESULT_FILES = (RESULTS, DATA)


def _utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def read_status(out: str | Path) -> Optional[dict]:
    p = Path(out) / STATUS
    if not p.is_file():
        return None
    try:
        return json.loads(p.read_text())
    except json.JSONDecodeError:
        return {"state": "corrupted"}


def run_design(plan: Plan, *, progress: bool = False, executor=None) -> tuple[pd.DataFrame, list[dict]]:
    """Train every cell of the design into one tidy frame.

    Uses the factorial runner (:func:`tabsim.factorial.run_factorial`: one compiled program per
    static combination, traced factors and seeds vmapped) when it is available, else one
    :func:`tabsim.api.run` sweep per static cell. The arm factor is not a runner factor: every arm
    of the design runs (the partition needs them all) and the factor column copies ``arm``.
    ``executor`` is where the chunks run (default in this process; see :mod:`tabsim.executors`).

    Returns:
      ``(frame, runs)``: one row per cell x seed x arm x eval step, with a column per design factor;
      ``runs`` records the runner, configs and provenance.
    """
    arm_factor = next((f for f in plan.design.factors if f.field == "arm"), None)
    try:
        from tabsim.factorial import run_factorial
    except ImportError:
        run_factorial = None
    if run_factorial is not None:
        (_, base), *_ = design_runs(plan)
        base = {k: v for k, v in base.items() if k != "sweep"}
        factors = {f.name: {f.field: list(f.levels)} for f in plan.design.factors if f is not arm_factor}
        res = run_factorial(base, factors, progress=progress, name=plan.title, executor=executor)
        frame = res.frame.copy()
        runs = [{"runner": "tabsim.factorial.run_factorial", "config": res.config, "provenance": res.provenance}]
    else:
        from tabsim.api import run

        frames, runs = [], []
        for levels, cfg in design_runs(plan):
            res = run(cfg, progress=progress, executor=executor)
            part = res.frame.copy()
            for f in plan.design.factors:
                kind, target = _classify_field(f.field)
                if kind == "static":
                    part[f.name] = levels[f.name]
                elif kind == "sweep" and f.name != target:
                    part[f.name] = part[target]
            frames.append(part)
            runs.append({"runner": "tabsim.api.run", "levels": levels, "config": res.config,
                         "provenance": res.provenance})
        frame = pd.concat(frames, ignore_index=True)
    frame["arm"] = frame["arm"].astype(str)
    if arm_factor is not None and arm_factor.name != "arm":
        frame[arm_factor.name] = frame["arm"]
    return frame, runs


def run_study(path: str | Path, out: str | Path, *, confirmatory: bool = True, overwrite: bool = False,
              progress: bool = False, write_report: bool = True, resume: bool = False, executor=None) -> dict:
    """Run the study of the plan at ``path`` into ``out`` and (by default) write its report.

    Args:
      path: the plan (YAML).
      out: output folder.
      confirmatory: require the plan to match its lock (plus amendments); an exploratory run needs
        no lock and is labelled exploratory throughout.
      overwrite: replace a non-empty ``out`` (kept until the new run is published; see :mod:`tabsim.store`).
      progress: show progress bars.
      write_report: write ``report.md`` / ``report.json`` after the run is complete.
      resume: continue an interrupted run into ``out`` (its finished chunks are reused).
      executor: where the training chunks run (default in this process; e.g.
        :class:`tabsim.executors.DaskExecutor`); the results are the same.

    The run is built in a staging folder beside ``out`` and published whole at the end.

    Returns:
      The ``results.json`` content.
    """
    path, out = Path(path), Path(out)
    plan, doc = load_plan(path)
    sha = lock_mod.plan_hash(doc)
    if confirmatory:
        record = lock_mod.verify(path)
    else:
        record = {"sha256": sha, "lock": None, "amendments": []}
        try:
            lk = lock_mod.read_lock(path)
            record["lock"] = {k: v for k, v in lk.items() if k != "normalized"}
            record["amendments"] = [{k: v for k, v in a.items() if k != "normalized"}
                                    for a in lock_mod.read_amendments(path, lk)]
        except PreregError:
            pass
    from tabsim.store import RunStore, job_key

    mode = "confirmatory" if confirmatory else "exploratory"
    with RunStore(out, overwrite=overwrite, resume=resume, key=job_key("prereg", sha, mode),
                  description=f"tabsim prereg run ({mode})") as store:
        if store.complete:
            return json.loads((out / RESULTS).read_text())
        results = _run_into(store.dir, path, plan, doc, sha, record, confirmatory=confirmatory, progress=progress,
                            executor=executor)
        if write_report:
            from tabsim.prereg.report import write_report as _write

            _write(store.dir)
    return results


def _run_into(out: Path, path: Path, plan, doc, sha: str, record: dict, *, confirmatory: bool,
              progress: bool, executor=None) -> dict:
    """Run the design and write data, results and status into ``out`` (the run's staging folder)."""
    started = _utc_now()
    base_status = {"started_utc": started, "prereg_file": str(path), "prereg_sha256": sha,
                   "mode": "confirmatory" if confirmatory else "exploratory"}
    write_json(out / STATUS, {**base_status, "state": "running"})
    t0 = time.perf_counter()
    try:
        frame, runs = run_design(plan, progress=progress, executor=executor)
        write_frame(out / DATA, frame)
        from tabsim.prereg.analysis import analyse

        analysis = analyse(plan, frame)
        results = {
            "schema": "tabsim.prereg.results/1",
            "title": plan.title,
            "mode": base_status["mode"],
            "prereg": {"file": str(path), "sha256": sha, "lock": record["lock"],
                       "amendments": record["amendments"]},
            "plan": lock_mod.normalise(doc),
            "analysis_settings": plan.analysis.model_dump(mode="json"),
            "started_utc": started,
            "finished_utc": _utc_now(),
            "wall_seconds": round(time.perf_counter() - t0, 3),
            "provenance": provenance(prereg_sha256=sha),
            "runs": runs,
            "analysis": analysis,
        }
        write_json(out / RESULTS, results)
    except BaseException as err:  # noqa: BLE001 - record the failure, then re-raise
        write_json(out / STATUS, {**base_status, "state": "failed", "failed_utc": _utc_now(),
                                  "error": f"{type(err).__name__}: {err}"})
        raise
    write_json(out / STATUS, {**base_status, "state": "complete", "finished_utc": results["finished_utc"],
                              "files": {name: file_sha256(out / name) for name in RESULT_FILES}})
    return results
