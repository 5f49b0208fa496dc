"""``report.md`` and ``report.json`` of a complete pre-registered run.

Every hypothesis appears with its verdict (SUPPORTED / NOT SUPPORTED / INCONCLUSIVE), estimate,
interval and the rule that decided it, whatever the outcome. Amendments and other departures from
the plan are listed as deviations; exploratory results are labelled as such.

An "Integrity" section says what vouches for the record: the signatures of the lock and of the
results (verified; a bad one refuses the report), the code compared with the locked code, the git
commit holding the plan and whether it precedes the run, and seeds shared with a pilot or an
exploratory run. What could not be checked is listed under "Limitations".
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

from tabsim.files.atomic import atomic_write_text, write_json
from tabsim.files.markdown import md
from tabsim.prereg import integrity, signing
from tabsim.prereg.hashing import file_sha256, read_json
from tabsim.prereg.locking import (
    check_amendments,
    lock_path,
    parse_time,
    read_amendments,
    read_lock,
    verify_lock_signature,
)
from tabsim.prereg.manipulation import level_text
from tabsim.prereg.recheck import recheck_analysis
from tabsim.prereg.schema import PreregError
from tabsim.prereg.status import RESULTS, STATUS, read_status


def load_complete(out: str | Path, public_key: str | None = None) -> dict:
    """``results.json`` of a run folder, after checking that the run completed and is unaltered.

    Args:
      out: the run folder.
      public_key: a pinned fingerprint (:func:`signing.pinned`): the results and the lock must be
        signed with it. None accepts unsigned results and any valid signature.

    Raises:
      PreregError: an incomplete run, a result file changed after completion, a bad signature
        (naming the file), or a signature by another key than the pinned one.
    """
    return load_run(out, public_key)[0]


def load_run(out: str | Path, public_key: str | None = None) -> tuple[dict, dict]:
    """``(results, status)`` of a complete run folder, verified as :func:`load_complete` describes.

    Besides the digests and signatures: a confirmatory run under a signed lock must be signed by the
    lock's key (no downgrade to unsigned results); the amendments it records must be signed as
    :func:`tabsim.prereg.locking.check_amendments` demands; its copy of the lock and amendments must
    be those beside the plan, when the plan is found; and the analysis is recomputed from
    ``data.parquet`` and must agree with ``results.json`` (:func:`tabsim.prereg.recheck.recheck_analysis`).
    """
    out = Path(out)
    public_key = signing.parse_pin(public_key) if public_key else None
    status = read_status(out)
    if status is None:
        raise PreregError(f"{out}: no {STATUS}; not a pre-registered run folder")
    state = status.get("state")
    if state != "complete":
        extra = f" ({status.get('error')})" if status.get("error") else ""
        raise PreregError(f"{out}: the run is not complete (state {state!r}{extra}); an incomplete run has no "
                          f"report. Rerun `tabsim prereg run` into this folder")
    for name, digest in (status.get("files") or {}).items():
        p = out / name
        if not p.is_file():
            raise PreregError(f"{out}: {name} is missing although the run was marked complete")
        if file_sha256(p) != digest:
            raise PreregError(f"{out}: {name} changed after the run completed (sha256 mismatch)")
    if not status.get("files"):
        raise PreregError(f"{out}: {STATUS} lists no result files; not a complete run")
    sig = status.get("signature")
    if sig is not None:
        signing.verify(sig, signing.STATUS_DOMAIN, {k: v for k, v in status.items() if k != "signature"},
                       str(out / STATUS))
    signing.check_pin(sig, public_key, str(out / STATUS), "results record")
    results = read_json(out / RESULTS, "results")
    if not isinstance(results, dict) or not isinstance(results.get("prereg"), dict):
        raise PreregError(f"{out / RESULTS}: corrupted results (no prereg record)")
    if results["prereg"].get("sha256") != status.get("prereg_sha256"):
        raise PreregError(f"{out}: {RESULTS} and {STATUS} name different plans (sha256 "
                          f"{str(results['prereg'].get('sha256'))[:12]} vs {str(status.get('prereg_sha256'))[:12]})")
    lock = results["prereg"].get("lock")
    if lock:
        where = f"{out / RESULTS} (its copy of the lock)"
        verify_lock_signature(lock, where)
        amendments = results["prereg"].get("amendments") or []
        check_amendments(amendments, lock, f"{out / RESULTS} (its copy of the amendments)")
        if results.get("mode") == "confirmatory":
            signing.check_pin(lock.get("signature"), public_key, where, "lock")
            _no_downgrade(lock, sig, out)
        _same_as_beside_the_plan(results, lock, amendments, out)
    recheck_analysis(results, out)
    return results, status


def _no_downgrade(lock: dict, sig, out: Path) -> None:
    """A signed lock demands results signed by the same key."""
    lock_fp = (lock.get("signature") or {}).get("fingerprint")
    if lock_fp is None:
        return
    if not sig:
        raise signing.SignatureError(f"{out / STATUS}: the results are unsigned, but the lock is signed by key "
                                     f"{signing.short(lock_fp)}; a run under a signed lock must be signed by the same "
                                     f"key (`tabsim prereg run --key`)")
    if sig.get("fingerprint") != lock_fp:
        raise signing.SignatureError(f"{out / STATUS}: the results are signed by key "
                                     f"{signing.short(sig.get('fingerprint'))}, the lock by another key "
                                     f"{signing.short(lock_fp)}; a run under a signed lock must be signed by the "
                                     f"lock's key")


def _same_as_beside_the_plan(results: dict, lock: dict, amendments: list, out: Path) -> None:
    """The lock and amendments copied into ``results.json`` are those beside the plan (when it is found)."""
    plan = _plan_file(results, out)
    if plan is None or not lock_path(plan).is_file():
        return
    beside = read_lock(plan)
    if {k: v for k, v in beside.items() if k != "normalized"} != lock:
        raise PreregError(f"{out / RESULTS}: its copy of the lock is not {lock_path(plan)} (locked "
                          f"{beside['locked_at_utc']}, self_sha256 {beside['self_sha256'][:12]}; the copy says "
                          f"{lock.get('locked_at_utc')}, {str(lock.get('self_sha256'))[:12]})")
    log = [a.get("self_sha256") for a in read_amendments(plan, beside)]
    if [a.get("self_sha256") for a in amendments] != log[:len(amendments)]:
        raise PreregError(f"{out / RESULTS}: its amendments are not those recorded beside the plan in "
                          f"{plan.name}.amendments.json")


def _plan_file(results: dict, out: Optional[Path]) -> Optional[Path]:
    """The plan file of a run, looked for beside the run folder, then at the recorded path."""
    recorded = Path(results["prereg"]["file"])
    # beside the run folder first: a study folder copied elsewhere (plan, lock, results) checks its own plan
    candidates = ([out.parent / recorded.name] if out is not None else []) + \
        ([recorded] if recorded.is_absolute() else []) + [recorded]
    return next((p for p in candidates if p.is_file()), None)


def _when(iso: str) -> str:
    return iso.replace("+00:00", "Z")


def assess(results: dict, status: Optional[dict] = None, out: str | Path | None = None,
           public_key: Optional[str] = None) -> dict:
    """What vouches for a run: signatures, code, plan commit, seeds.

    ``status`` and ``out`` are the run folder's verified ``status.json`` and path (with them the
    results signature is reported and the recorded plan commit re-checked in git); without them
    only what ``results.json`` records is used.

    Returns:
      ``{"lock_signature", "results_signature", "public_key_pinned", "code", "plan_commit",
      "seeds", "deviations": [...], "limitations": [...]}``: each check a dict with ``state`` and
      ``text``; deviations and limitations are ``{"kind", "text"}``.
    """
    out = Path(out) if out is not None else None
    pre, recorded = results["prereg"], results.get("integrity")
    confirmatory = results["mode"] == "confirmatory"
    devs, lims = [], []
    res: dict = {"public_key_pinned": public_key}

    lk = pre.get("lock") or {}
    lock_fp = (lk.get("signature") or {}).get("fingerprint")
    if not lk:
        res["lock_signature"] = {"state": "no lock", "text": "no lock (exploratory run)"}
    elif lock_fp:
        res["lock_signature"] = {"state": "verified", "fingerprint": lock_fp,
                                 "text": f"signed by key {signing.short(lock_fp)}, verified"
                                         + (" (the pinned key)" if public_key == lock_fp else "")}
    else:
        old = lk.get("schema") == "tabsim.prereg.lock/1"
        res["lock_signature"] = {"state": "unsigned",
                                 "text": "UNSIGNED" + (" (old-format lock: unsigned, no code digest)" if old else "")}
        lims.append({"kind": "unsigned lock",
                     "text": ("old-format lock, unsigned, no code digest: " if old else "the lock is unsigned: ")
                             + "its hashes guard against accidents only; anyone who edits the plan can recompute "
                               "them and rewrite the lock"})
    res_fp = (status or {}).get("signature", {}).get("fingerprint") if status else None
    if status is None:
        res["results_signature"] = {"state": "not checked", "text": "not checked (status.json not read)"}
    elif res_fp:
        res["results_signature"] = {"state": "verified", "fingerprint": res_fp,
                                    "text": f"status.json signed by key {signing.short(res_fp)}, verified"
                                            + (" (the pinned key)" if public_key == res_fp else "")}
        if lock_fp and lock_fp != res_fp:
            devs.append({"kind": "signature", "text": f"the results are signed by key {signing.short(res_fp)}, the "
                                                      f"lock by another key {signing.short(lock_fp)}"})
    else:
        res["results_signature"] = {"state": "unsigned", "text": "UNSIGNED"}
        lims.append({"kind": "unsigned results",
                     "text": "the results are unsigned: anyone can edit results.json and recompute the digests in "
                             "status.json"})
    if (lock_fp or res_fp) and public_key is None:
        lims.append({"kind": "no pinned key",
                     "text": "signatures were checked against the keys stored in the files; no public key was pinned "
                             "(--public-key or TABSIM_PREREG_PUBKEY), so a forger re-signing with their own key "
                             "would not be caught"})

    code = (recorded or {}).get("code")
    if code is None:
        res["code"] = {"state": "not recorded", "text": "not recorded by this run (older tabsim)"}
        lims.append({"kind": "code", "text": "the run recorded no code digest: whether it used the locked code is "
                                             "unknown"})
    else:
        run = code["run"]
        versions = ", ".join(f"{k} {v}" for k, v in run["versions"].items() if v)
        if code["locked_sha256"] is None:
            res["code"] = {"state": "no locked digest", "sha256": run["sha256"],
                           "text": f"source sha256 {run['sha256'][:12]} ({run['n_files']} files; {versions}); the "
                                   f"lock has no code digest to compare with"}
            if confirmatory:
                lims.append({"kind": "code", "text": "the lock has no code digest: whether the run used the code of "
                                                     "the lock's time is unknown"})
        elif code["same_as_lock"]:
            res["code"] = {"state": "same", "sha256": run["sha256"],
                           "text": f"same as at the lock: source sha256 {run['sha256'][:12]} ({run['n_files']} "
                                   f"files; {versions})"}
        else:
            what = integrity.describe_changes(code["changes"])
            res["code"] = {"state": "changed", "sha256": run["sha256"], "changes": code["changes"],
                           "text": f"CHANGED since the lock: {what}"}
            if confirmatory:
                devs.insert(0, {"kind": "code change",
                                "text": f"the code differed from the locked code ({what}); the run was allowed with "
                                        f"--allow-code-change, so its estimates may not be those the locked code "
                                        f"gives", "changes": code["changes"]})

    if confirmatory:
        res["plan_commit"] = _commit_check(results, recorded, out, devs, lims)
        res["seeds"] = _seed_check(results, recorded, out, devs, lims)
    return {**res, "deviations": devs, "limitations": lims}


def _commit_check(results, recorded, out, devs, lims) -> dict:
    started = results["started_utc"]
    rec = (recorded or {}).get("plan_commit")
    note = ""
    if rec is None:
        plan = _plan_file(results, out) if out is not None else None
        if plan is None:
            lims.append({"kind": "commit check", "text": "the run recorded no plan commit and the plan file was not "
                                                         "found: the commit check could not be made"})
            return {"state": "not checked", "text": "not recorded by this run; the plan file was not found"}
        rec = integrity.plan_commit(plan, results["prereg"]["sha256"])
        note = " (not recorded by the run; checked when the report was written)"
    state = rec["state"]
    if state == "no repository":
        lims.append({"kind": "commit check", "text": "the plan is not in a git repository: the commit check (plan "
                                                     "committed before the results) could not be made"})
        return {"state": state, "text": f"could not be checked: the plan is not in a git repository{note}"}
    if state == "not committed":
        text = (f"the locked plan (sha256 {rec['sha256'][:12]}) was not committed in its git repository before the "
                f"run{note}: git cannot show that it preceded the results")
        devs.append({"kind": "commit check", "text": text})
        return {"state": state, "text": text}
    commit, when = rec["commit"], rec["commit_time_utc"]
    recheck = integrity.recheck_commit(rec, out) if (out is not None and not note) else None
    if recheck is not None and recheck["state"] in ("mismatch", "unknown commit"):
        devs.append({"kind": "commit check", "text": f"the recorded plan commit does not hold up: {recheck['text']}"})
        return {"state": recheck["state"], "commit": commit, "text": f"FAILED: {recheck['text']}"}
    if not integrity.commit_precedes(rec, started):
        text = (f"plan first committed in {commit[:7]} at {_when(when)}, after the run started at {_when(started)}"
                f"{note}: git does not show that the plan preceded the results")
        devs.append({"kind": "commit check", "text": text})
        return {"state": "after the run", "commit": commit, "commit_time_utc": when, "text": text}
    extra = "" if recheck is None or recheck["state"] != "no repository" else f"; {recheck['text']}"
    return {"state": "before the run", "commit": commit, "commit_time_utc": when,
            "text": f"plan committed in {commit[:7]} at {_when(when)}, before the run started at {_when(started)}"
                    f"{note}{extra}"}


def _seed_check(results, recorded, out, devs, lims) -> dict:
    seeds = results.get("seeds") or integrity.design_seeds(results["plan"])
    sources = (recorded or {}).get("earlier_seeds")
    note = ""
    if sources is None:
        plan = _plan_file(results, out) if out is not None else None
        sources = integrity.earlier_seeds(plan, before_utc=results["started_utc"]) if plan is not None else []
        note = " (not recorded by the run; read beside the plan when the report was written)"
    parts, overlaps = [], []
    for src in sources:
        if src["seeds"] is None:
            lims.append({"kind": "seeds", "text": f"{src['source']} records no seeds: overlap with the confirmatory "
                                                  f"seeds not checked"})
            continue
        common = sorted(set(seeds) & set(src["seeds"]))
        if common:
            overlaps.append({"source": src["source"], "seeds": common})
            devs.append({"kind": "seed reuse", "source": src["source"], "seeds": common,
                         "text": f"seeds {integrity.seed_ranges(common)} of the confirmatory run were already used by "
                                 f"{'the pilot ' if src['kind'] == 'pilot' else 'the '}{src['source']}: those results are not independent of what "
                                 f"shaped the plan"})
        else:
            parts.append(f"{src['source']} ({integrity.seed_ranges(src['seeds'])})")
    text = f"confirmatory seeds {integrity.seed_ranges(seeds)}; "
    if overlaps:
        text += "REUSED from " + "; ".join(f"{o['source']} ({integrity.seed_ranges(o['seeds'])})" for o in overlaps)
    elif parts:
        text += "no overlap with " + "; ".join(parts)
    else:
        text += "no pilot or exploratory seeds recorded beside the plan"
    return {"state": "overlap" if overlaps else "no overlap", "overlaps": overlaps, "text": text + note}


def _f(x, spec: str = ".4f") -> str:
    if x is None:
        return "n/a"
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:{spec}}"


def _cond(c: dict) -> str:
    return ", ".join(f"{k}={level_text(v)}" for k, v in c.items()) or "all"


def _p(x, floor: float = 0.0) -> str:
    if x is None:
        return "n/a"
    return f"<={max(floor, 1e-9):.2g}" if x <= max(floor, 1e-9) else f"{x:.3g}"


def deviations(results: dict, checks: Optional[dict] = None) -> list[dict]:
    """Departures from the locked plan: amendments, unlocked runs, failed checks, timeline problems,
    and those of :func:`assess` (``checks``): changed code, a plan committed late, reused seeds."""
    out = []
    pre = results["prereg"]
    if results["mode"] != "confirmatory":
        out.append({"kind": "unlocked run", "text": "run in exploratory mode without a verified lock: no result "
                                                    "below is confirmatory"})
    for a in pre.get("amendments") or []:
        out.append({"kind": "amendment", "n": a["n"], "time_utc": a["amended_at_utc"], "reason": a["reason"],
                    "changed_fields": a["changed_fields"], "old_sha256": a["old_sha256"],
                    "new_sha256": a["new_sha256"],
                    "text": f"amendment {a['n']} ({a['amended_at_utc']}): {a['reason']} -- changed "
                            f"{', '.join(a['changed_fields'])}"})
    lk = pre.get("lock")
    started = parse_time(results["started_utc"], "results.json started_utc")
    if lk and parse_time(lk["locked_at_utc"], "the lock's locked_at_utc") >= started:
        out.append({"kind": "timeline", "text": f"the lock ({lk['locked_at_utc']}) does not precede the run "
                                                f"({results['started_utc']})"})
    for a in pre.get("amendments") or []:
        if parse_time(a["amended_at_utc"], f"amendment {a['n']}'s amended_at_utc") >= started:
            out.append({"kind": "timeline", "text": f"amendment {a['n']} ({a['amended_at_utc']}) does not precede "
                                                    f"the run ({results['started_utc']})"})
    for c in results["analysis"]["checks"]:
        if not c["passed"]:
            out.append({"kind": "failed check", "text": f"manipulation check {c['id']} failed: {c['rule']} "
                                                        f"(observed {_f(c['value'])})"})
    if checks:
        code = [d for d in checks["deviations"] if d["kind"] == "code change"]
        out = code + out + [d for d in checks["deviations"] if d["kind"] != "code change"]
    return out


def strict_failures(rep: dict) -> list[dict]:
    """What ``--strict`` refuses: every deviation, and a plan commit that could not be checked (a plan in
    no git repository, or one not found): nothing then shows that the plan preceded the results."""
    unchecked = [dict(d, kind="commit not checked") for d in rep["limitations"] if d["kind"] == "commit check"]
    return list(rep["deviations"]) + unchecked


def build_report(results: dict, checks: Optional[dict] = None) -> dict:
    """The report as a JSON-ready dict; ``checks`` from :func:`assess` (default: from ``results`` alone)."""
    if checks is None:
        checks = assess(results)
    pre = results["prereg"]
    lk = pre.get("lock") or {}
    hyps = results["analysis"]["hypotheses"]
    labelled = []
    for h in hyps:
        label = "CONFIRMATORY" if (h["kind"] == "confirmatory" and results["mode"] == "confirmatory") else "EXPLORATORY"
        labelled.append({k: h[k] for k in ("id", "statement", "estimand", "condition", "prediction", "rule",
                                           "rule_text", "estimate", "ci_low", "ci_high", "ci_level", "ci_method",
                                           "n_seeds", "p_rule", "p_floor", "p_adjusted", "verdict", "reason", "source",
                                           "detail")
                         if k in h} | {"label": label})
    counts = {v: sum(1 for h in labelled if h["verdict"] == v and h["label"] == "CONFIRMATORY")
              for v in ("SUPPORTED", "NOT SUPPORTED", "INCONCLUSIVE")}
    return {
        "schema": "tabsim.prereg.report/1",
        "title": results["title"],
        "mode": results["mode"],
        "prereg_file": pre["file"],
        "prereg_sha256": pre["sha256"],
        "locked_at_utc": lk.get("locked_at_utc"),
        "lock_git_commit": lk.get("git_commit"),
        "lock_tabsim_version": lk.get("tabsim_version"),
        "run_started_utc": results["started_utc"],
        "run_finished_utc": results["finished_utc"],
        "run_git_commit": results["provenance"].get("git_commit"),
        "run_tabsim_version": results["provenance"].get("tabsim_version"),
        "confirmatory_counts": counts,
        "hypotheses": labelled,
        "exploratory": [dict(e, label="EXPLORATORY") for e in results["analysis"]["exploratory"]],
        "checks": results["analysis"]["checks"],
        "integrity": {k: v for k, v in checks.items() if k not in ("deviations", "limitations")},
        "deviations": deviations(results, checks),
        "limitations": checks["limitations"],
        "arm_means": results["analysis"]["arm_means"],
        "analysis_plan": {k: results["analysis_settings"][k]
                          for k in ("metric", "alpha", "correction", "ci_method", "n_resamples", "random_state")},
    }


def render_markdown(rep: dict) -> str:
    """Markdown text of :func:`build_report`'s dict."""
    ln = [f"# Pre-registration report: {rep['title']}", ""]
    ln += [f"- plan: `{rep['prereg_file']}`, sha256 `{rep['prereg_sha256']}`",
           f"- locked: {rep['locked_at_utc'] or 'NOT LOCKED'} (git {rep['lock_git_commit'] or 'n/a'}, "
           f"tabsim {rep['lock_tabsim_version'] or 'n/a'})",
           f"- run: {rep['run_started_utc']} -> {rep['run_finished_utc']} (git {rep['run_git_commit'] or 'n/a'}, "
           f"tabsim {rep['run_tabsim_version']})",
           f"- mode: **{rep['mode']}**",
           f"- analysis: metric {rep['analysis_plan']['metric']}, alpha {rep['analysis_plan']['alpha']}, correction "
           f"{rep['analysis_plan']['correction']}, intervals {_interval_method(rep['analysis_plan'])}",
           ""]
    if any(d["kind"] == "code change" for d in rep["deviations"]):
        ln += ["> **WARNING: the code changed after the lock.** " + rep["integrity"]["code"]["text"]
               + ". The estimates below come from code other than the locked code.", ""]
    ln += ["## Integrity", ""]
    names = {"lock_signature": "lock signature", "results_signature": "results signature", "code": "code",
             "plan_commit": "plan commit", "seeds": "seeds"}
    for key, name in names.items():
        if key in rep["integrity"]:
            ln.append(f"- {name}: {rep['integrity'][key]['text']}")
    pin = rep["integrity"].get("public_key_pinned")
    ln += [f"- pinned public key: {signing.short(pin) if pin else 'none'}", ""]
    c = rep["confirmatory_counts"]
    ln += [f"Confirmatory hypotheses: {c['SUPPORTED']} SUPPORTED, {c['NOT SUPPORTED']} NOT SUPPORTED, "
           f"{c['INCONCLUSIVE']} INCONCLUSIVE.", ""]
    for label in ("CONFIRMATORY", "EXPLORATORY"):
        hs = [h for h in rep["hypotheses"] if h["label"] == label]
        if not hs:
            continue
        ln += [f"## {'Confirmatory hypotheses' if label == 'CONFIRMATORY' else 'Exploratory hypotheses (EXPLORATORY: not confirmatory)'}",
               "", "| id | estimand | condition | estimate | interval | rule | p (adjusted) | verdict |",
               "|---|---|---|---|---|---|---|---|"]
        for h in hs:
            p = "n/a" if h["p_rule"] is None else f"{_p(h['p_rule'], h.get('p_floor', 0))} ({_p(h['p_adjusted'])})"
            ln.append(f"| {md(h['id'])} | {md(h['estimand'])} | {md(_cond(h['condition']))} | {_f(h['estimate'])} | "
                      f"{round(100 * h['ci_level'])}% [{_f(h['ci_low'])}, {_f(h['ci_high'])}] | {md(h['rule_text'])} | "
                      f"{p} | **{h['verdict']}** |")
        ln.append("")
        for h in hs:
            src = f" (source: {h['source']})" if h.get("source") else ""
            ln += [f"- **{h['id']}** ({label.lower()}){src}: {h['statement']}",
                   f"  - **{h['verdict']}**: {h['reason']}. Interval: {h['ci_method']}, {h['n_seeds']} seeds"
                   f"{' per cell' if h['estimand'] == 'interaction_ratio' or h['estimand'].startswith('coefficient:') else ''}."]
        ln.append("")
    if rep["exploratory"]:
        ln += ["## Exploratory analyses (EXPLORATORY: not confirmatory, no correction)", "",
               "| id | estimand | condition | estimate | interval | description |", "|---|---|---|---|---|---|"]
        for e in rep["exploratory"]:
            ln.append(f"| {md(e['id'])} | {md(e['estimand'])} | {md(_cond(e['condition']))} | {_f(e['estimate'])} | "
                      f"{round(100 * e['ci_level'])}% [{_f(e['ci_low'])}, {_f(e['ci_high'])}] | {md(e['description'])} |")
        ln.append("")
    if rep["checks"]:
        ln += ["## Manipulation checks", "", "| id | condition | rule | observed | passed |", "|---|---|---|---|---|"]
        for ch in rep["checks"]:
            ln.append(f"| {md(ch['id'])} | {md(_cond(ch.get('condition', {})))} | {md(ch['rule'])} | {_f(ch['value'])} | "
                      f"{'yes' if ch['passed'] else '**NO**'} |")
        ln.append("")
    ln += ["## Deviations from the plan", ""]
    if rep["deviations"]:
        for d in rep["deviations"]:
            ln.append(f"- **{d['kind']}**: {d['text']}")
    else:
        ln.append("None: the run used the locked plan unchanged (see Integrity and Limitations for what vouches "
                  "for this).")
    ln += ["", "## Limitations of this record", ""]
    if rep["limitations"]:
        for d in rep["limitations"]:
            ln.append(f"- **{d['kind']}**: {d['text']}")
    else:
        ln.append("None: every check above could be made.")
    ln.append("")
    if rep["arm_means"]:
        keys = [k for k in rep["arm_means"][0] if k not in ("arm", "mean", "sem", "count")]
        ln += ["## Descriptive: final metric per condition and arm (mean +/- s.e. over seeds)", "",
               "| " + " | ".join([md(k) for k in keys] + ["arm", "mean", "s.e.", "seeds"]) + " |",
               "|" + "---|" * (len(keys) + 4)]
        for r in rep["arm_means"]:
            ln.append("| " + " | ".join([md(level_text(r[k])) for k in keys] + [md(r["arm"]), _f(r["mean"]), _f(r["sem"], ".2g"),
                                                                      str(r["count"])]) + " |")
        ln.append("")
    return "\n".join(ln)


def write_report(out: str | Path, public_key: Optional[str] = None) -> dict:
    """Write ``report.md`` and ``report.json`` for a complete run folder; return the report dict.

    ``public_key`` pins the key the lock and results must be signed with (a fingerprint, see
    :func:`signing.pinned`; the CLI also reads ``$TABSIM_PREREG_PUBKEY``).
    """
    out = Path(out)
    public_key = signing.parse_pin(public_key) if public_key else None
    results, status = load_run(out, public_key)
    rep = build_report(results, assess(results, status, out, public_key))
    write_json(out / "report.json", rep)
    atomic_write_text(out / "report.md", render_markdown(rep))
    return rep


def _interval_method(plan: dict) -> str:
    """The interval method, with its resampling settings only where it resamples."""
    method = plan["ci_method"]
    if method == "t":
        return "t (Student t over seeds)"
    return f"{method} ({plan['n_resamples']} resamples, random_state {plan['random_state']})"
