"""Run a pre-registered study: verify the lock, run the design, analyse, and mark the run complete.

The output folder follows a small protocol (:mod:`tabsim.prereg.status`) so that an interrupted run
can never pass for a finished one: ``status.json`` is written first with ``state: running``; data
and ``results.json`` follow; only then is ``status.json`` rewritten with ``state: complete`` and the
SHA-256 of every result file, signed when a key is given. ``tabsim prereg report`` refuses any folder whose status is not
complete, whose files no longer match those hashes, or whose signature does not verify. Reports
left over from an earlier run in the same folder are deleted before the new run starts.

A confirmatory run also compares the installed tabsim source and library versions with the lock's
(refusing a difference unless ``allow_code_change``), records the commit holding the plan and the
seeds of earlier pilot and exploratory runs (:mod:`tabsim.prereg.integrity`). Exploratory runs
record their seeds and are logged beside the plan.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import sys
import time
from pathlib import Path
from typing import Callable

import pandas as pd

from tabsim.files.atomic import write_frame, write_json
from tabsim.files.provenance import path_anchors, portable_argv, portable_path, provenance
from tabsim.prereg import integrity, locking as lock_mod, report, signing
from tabsim.prereg.analysis import analyse
from tabsim.prereg.hashing import file_sha256, normalise, plan_hash
from tabsim.prereg.schema import Plan, PreregError, design_runs, load_plan
from tabsim.prereg.status import DATA, RESULT_FILES, RESULTS, STATUS
from tabsim.prereg.summary import count
from tabsim.runtime.store import RunStore, job_key
from tabsim.studies.factorial import Factor, run_factorial


def _utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


def _describe(plan: Plan) -> str:
    """``6 cells x 32 seeds x 2 arms, 200 steps``: the size of the design."""
    d = plan.design
    arms = next((f.levels for f in d.factors if f.field == "arm"), None) or d.arms
    cells = math.prod(len(f.levels) for f in d.factors if f.field != "arm")
    n_arms = f" x {len(arms)} arms" if arms else ""
    return f"{cells} cell{'s' * (cells != 1)} x {d.seeds} seeds{n_arms}, {d.steps} steps"


def run_design(plan: Plan, *, progress: bool = False, executor=None, device=None) -> tuple[pd.DataFrame, list[dict]]:
    """Train every cell of the design into one tidy frame.

    Uses the factorial runner (:func:`tabsim.studies.factorial.run_factorial`: one compiled program per
    static combination, traced factors and seeds vmapped). The arm factor is not a runner factor: every arm
    of the design runs (the partition needs them all) and the factor column copies ``arm``.
    ``executor`` is where the chunks run (default in this process; see :mod:`tabsim.runtime.executors`);
    ``device`` where they compute (:func:`tabsim.studies.factorial.run_designs`).

    Returns:
      ``(frame, runs)``: one row per cell x seed x arm x eval step, with a column per design factor;
      ``runs`` records the runner, configs and provenance.
    """
    arm_factor = next((f for f in plan.design.factors if f.field == "arm"), None)
    (_, base), *_ = design_runs(plan)
    base = {k: v for k, v in base.items() if k != "sweep"}
    factors = [Factor(f.name, f.field, tuple(f.levels),
                      labels=tuple(f.labels) if any(isinstance(x, list) for x in f.levels) else None)
               for f in plan.design.factors if f is not arm_factor]
    res = run_factorial(base, factors, progress=progress, name=plan.title, executor=executor, device=device)
    frame = res.frame.copy()
    runs = [{"runner": "tabsim.studies.factorial.run_factorial", "config": res.config, "provenance": res.provenance}]
    frame["arm"] = frame["arm"].astype(str)
    if arm_factor is not None and arm_factor.name != "arm":
        frame[arm_factor.name] = frame["arm"]
    return frame, runs


def run_study(path: str | Path, out: str | Path, *, confirmatory: bool = True, overwrite: bool = False,
              progress: bool = False, write_report: bool = True, resume: bool = False,
              key: str | Path | None = None, public_key: str | None = None,
              allow_code_change: bool = False, executor=None, log: Callable[[str], None] | None = None,
              started: float | None = None, device=None) -> dict:
    """Run the study of the plan at ``path`` into ``out`` and (by default) write its report.

    Args:
      path: the plan (YAML).
      out: output folder.
      confirmatory: require the plan to match its lock (plus amendments); an exploratory run needs
        no lock and is labelled exploratory throughout.
      overwrite: replace a non-empty ``out`` (kept until the new run is published; see :mod:`tabsim.runtime.store`).
      progress: show progress bars.
      write_report: write ``report.md`` / ``report.json`` after the run is complete.
      resume: continue an interrupted run into ``out`` (its finished chunks are reused).
      key: a private key file; signs ``status.json`` (the digests of the result files).
      public_key: the key the lock must be signed with (a public key file or fingerprint; default
        ``$TABSIM_PREREG_PUBKEY``); None accepts an unsigned lock.
      allow_code_change: run although the tabsim source or library versions differ from the
        lock's, recording the change as a deviation (refused otherwise).
      executor: where the training chunks run (default in this process; e.g.
        :class:`tabsim.runtime.dask.DaskExecutor`); the results are the same.
      log: where the phases are said, one line each (``tabsim prereg run``'s phase lines; default: nowhere).
      started: the ``time.perf_counter()`` reading ``results.json``'s ``wall_seconds`` counts from (default:
        this call; ``tabsim prereg run`` gives its process's start, :func:`tabsim.base.host.started_at`).
      device: where the training computes (``"cpu"``, ``"gpu"``, ``"auto"`` or a resolved
        :class:`tabsim.base.defaults.DeviceChoice`; default ``$TABSIM_DEVICE``, else ``"auto"``).

    The run is built in a staging folder beside ``out`` and published whole at the end.

    Returns:
      The ``results.json`` content.
    """
    t0 = time.perf_counter() if started is None else started
    say = log or (lambda msg: None)
    path, out = Path(path), Path(out)
    private = signing.load_private_key(key) if key is not None else None
    pin = signing.pinned(public_key)
    if pin is not None and (private is None or signing.key_fingerprint(private) != pin):
        given = "" if private is None else f" (the key given is {signing.short(signing.key_fingerprint(private))})"
        raise PreregError(f"--key: public key {signing.short(pin)} is pinned, so the results must be signed by it; "
                          f"give its private key with --key{given}")
    plan, doc = load_plan(path)
    sha = plan_hash(doc)
    say(f"checking the plan{' and its lock' if confirmatory else ''} and the code ({path})")
    if confirmatory:
        record = lock_mod.verify(path, public_key=pin)
        lock_fp = (record["lock"].get("signature") or {}).get("fingerprint")
        if lock_fp is not None and (private is None or signing.key_fingerprint(private) != lock_fp):
            given = "" if private is None else f" (the key given is {signing.short(signing.key_fingerprint(private))})"
            raise PreregError(f"--key: the lock of {path} is signed by key {signing.short(lock_fp)}, so the results "
                              f"must be signed by the same key; give its private key with --key{given}")
    else:
        record = {"sha256": sha, "lock": None, "amendments": []}
        try:
            lk = lock_mod.read_lock(path)
            record["lock"] = {k: v for k, v in lk.items() if k != "normalized"}
            record["amendments"] = [{k: v for k, v in a.items() if k != "normalized"}
                                    for a in lock_mod.read_amendments(path, lk)]
        except PreregError:
            pass
    checks = integrity_record(path, doc, sha, record, confirmatory=confirmatory, allow_code_change=allow_code_change)

    mode = "confirmatory" if confirmatory else "exploratory"
    with RunStore(out, overwrite=overwrite, resume=resume, key=job_key("prereg", sha, mode),
                  description=f"tabsim prereg run ({mode})") as store:
        if store.complete:
            return json.loads((out / RESULTS).read_text())
        results = _run_into(store.dir, path, plan, doc, sha, record, confirmatory=confirmatory, progress=progress,
                            checks=checks, private=private, executor=executor, say=say, t0=t0, device=device)
        if write_report:
            say("writing report.md and report.json")
            report.write_report(store.dir, public_key=pin)
    if not confirmatory:
        integrity.log_exploratory_run(path, {"out": portable_path(out, path_anchors(path)),
                                             "started_utc": results["started_utc"], "prereg_sha256": sha,
                                             "seeds": results.get("seeds", integrity.design_seeds(doc))})
    return results


def integrity_record(path: Path, doc: dict, sha: str, record: dict, *, confirmatory: bool,
                     allow_code_change: bool) -> dict:
    """The code comparison, plan commit and earlier seeds of a run (refuses changed code unless allowed, and
    always bytecode that is not its source: the digest would not describe what runs)."""
    if confirmatory:
        integrity.refuse_stale_code(f"{path}: a confirmatory run refuses to start")
    code = integrity.code_digest()
    locked = (record.get("lock") or {}).get("code")
    entry = {"run": code, "locked_sha256": locked.get("sha256") if locked else None, "same_as_lock": None,
             "changes": None, "allowed_change": False, "bytecode_checked": confirmatory}
    if locked:
        diff = integrity.code_changes(locked, code)
        entry["same_as_lock"] = integrity.code_same(diff)
        if not entry["same_as_lock"]:
            entry["changes"] = diff
            if confirmatory and not allow_code_change:
                raise PreregError(
                    f"{path}: the code changed since the lock ({integrity.describe_changes(diff)}); a confirmatory "
                    f"run needs the locked code. Restore it, or rerun with --allow-code-change to record the "
                    f"change as a deviation in the report")
            entry["allowed_change"] = confirmatory
    return {"code": entry, "plan_commit": integrity.plan_commit(path, sha) if confirmatory else None,
            "earlier_seeds": integrity.earlier_seeds(path, before_utc=_utc_now()) if confirmatory else []}


def _run_into(out: Path, path: Path, plan, doc, sha: str, record: dict, *, confirmatory: bool,
              progress: bool, checks: dict, private=None, executor=None, say=None, t0: float | None = None,
              device=None) -> dict:
    """Run the design and write data, results and status into ``out`` (the run's staging folder).

    ``say``: the phase lines; ``t0``: the ``time.perf_counter()`` reading ``wall_seconds`` counts from."""
    say = say or (lambda msg: None)
    started = _utc_now()
    # paths as the repository (or the plan's folder) names them: a result holds no path of this machine
    anchors = path_anchors(path)
    argv = portable_argv(sys.argv, anchors)
    base_status = {"started_utc": started, "prereg_file": portable_path(path, anchors), "prereg_sha256": sha,
                   "mode": "confirmatory" if confirmatory else "exploratory", "seeds": integrity.design_seeds(doc)}
    write_json(out / STATUS, {**base_status, "state": "running"})
    t0 = time.perf_counter() if t0 is None else t0
    try:
        say(f"{_describe(plan)}: compiling, then training (the bar counts chunks)")
        t_train = time.perf_counter()
        frame, runs = run_design(plan, progress=progress, executor=executor, device=device)
        t_train = time.perf_counter() - t_train
        say(f"trained in {t_train:.1f} s; writing the data, then the statistics of "
            f"{count(len(plan.hypotheses), 'hypothesis')} and {count(len(plan.exploratory), 'exploratory analysis')}")
        write_frame(out / DATA, frame)

        analysis = analyse(plan, frame)
        say("statistics done; writing results.json")
        results = {
            "schema": "tabsim.prereg.results/1",
            "title": plan.title,
            "mode": base_status["mode"],
            "prereg": {"file": base_status["prereg_file"], "sha256": sha, "lock": record["lock"],
                       "amendments": record["amendments"]},
            "plan": normalise(doc),
            "analysis_settings": plan.analysis.model_dump(mode="json"),
            "started_utc": started,
            "finished_utc": _utc_now(),
            "wall_seconds": round(time.perf_counter() - t0, 3),  # as of this file, a moment before the report
            "seconds_training": round(t_train, 3),
            "provenance": provenance(prereg_sha256=sha, argv=argv),
            "seeds": base_status["seeds"],
            "integrity": checks,
            "runs": [{**r, "provenance": {**r["provenance"], "argv": argv}} if "argv" in r["provenance"] else r
                     for r in runs],
            "analysis": analysis,
        }
        write_json(out / RESULTS, results)
    except BaseException as err:  # noqa: BLE001 - record the failure, then re-raise
        write_json(out / STATUS, {**base_status, "state": "failed", "failed_utc": _utc_now(),
                                  "error": f"{type(err).__name__}: {err}"})
        raise
    status = {**base_status, "state": "complete", "finished_utc": results["finished_utc"],
              "files": {name: file_sha256(out / name) for name in RESULT_FILES}}
    if private is not None:
        status["signature"] = signing.sign(private, signing.STATUS_DOMAIN, status)
    write_json(out / STATUS, status)
    return results
