"""What vouches for a pre-registered run: signatures, the code against the locked code, the plan's
commit, and seeds shared with a pilot or an exploratory run.

:func:`assess` records each check's state and text, the deviations it finds and the limitations of
what could be checked; :mod:`tabsim.prereg.report` writes them into the report.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from tabsim.prereg import integrity, signing
from tabsim.prereg.results import plan_file


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
    res["lock_signature"] = _lock_signature(lk, lock_fp, public_key, lims)
    res_fp = (status or {}).get("signature", {}).get("fingerprint") if status else None
    res["results_signature"] = _results_signature(status, res_fp, lock_fp, public_key, devs, lims)
    if (lock_fp or res_fp) and public_key is None:
        lims.append({"kind": "no pinned key",
                     "text": "signatures were checked against the keys stored in the files; no public key was pinned "
                             "(--public-key or TABSIM_PREREG_PUBKEY), so a forger re-signing with their own key "
                             "would not be caught"})
    res["code"] = _code_check((recorded or {}).get("code"), confirmatory, devs, lims)
    if confirmatory:
        res["plan_commit"] = _commit_check(results, recorded, out, devs, lims)
        res["seeds"] = _seed_check(results, recorded, out, devs, lims)
    return {**res, "deviations": devs, "limitations": lims}


def _lock_signature(lk: dict, lock_fp, public_key, lims: list) -> dict:
    """The lock's signature: verified (by :func:`tabsim.prereg.results.load_run`), unsigned, or no lock."""
    if not lk:
        return {"state": "no lock", "text": "no lock (exploratory run)"}
    if lock_fp:
        return {"state": "verified", "fingerprint": lock_fp,
                "text": f"signed by key {signing.short(lock_fp)}, verified"
                        + (" (the pinned key)" if public_key == lock_fp else "")}
    old = lk.get("schema") == "tabsim.prereg.lock/1"
    lims.append({"kind": "unsigned lock",
                 "text": ("old-format lock, unsigned, no code digest: " if old else "the lock is unsigned: ")
                         + "its hashes guard against accidents only; anyone who edits the plan can recompute "
                           "them and rewrite the lock"})
    return {"state": "unsigned", "text": "UNSIGNED" + (" (old-format lock: unsigned, no code digest)" if old else "")}


def _results_signature(status: Optional[dict], res_fp, lock_fp, public_key, devs: list, lims: list) -> dict:
    """The signature of ``status.json``: verified, unsigned, or not checked (no status read)."""
    if status is None:
        return {"state": "not checked", "text": "not checked (status.json not read)"}
    if res_fp:
        if lock_fp and lock_fp != res_fp:
            devs.append({"kind": "signature", "text": f"the results are signed by key {signing.short(res_fp)}, the "
                                                      f"lock by another key {signing.short(lock_fp)}"})
        return {"state": "verified", "fingerprint": res_fp,
                "text": f"status.json signed by key {signing.short(res_fp)}, verified"
                        + (" (the pinned key)" if public_key == res_fp else "")}
    lims.append({"kind": "unsigned results",
                 "text": "the results are unsigned: anyone can edit results.json and recompute the digests in "
                         "status.json"})
    return {"state": "unsigned", "text": "UNSIGNED"}


def _code_check(code: Optional[dict], confirmatory: bool, devs: list, lims: list) -> dict:
    """The run's code against the locked code: the same, changed (a deviation), or not comparable."""
    if code is None:
        lims.append({"kind": "code", "text": "the run recorded no code digest: whether it used the locked code is "
                                             "unknown"})
        return {"state": "not recorded", "text": "not recorded by this run (older tabsim)"}
    run = code["run"]
    versions = ", ".join(f"{k} {v}" for k, v in run["versions"].items() if v)
    if code["locked_sha256"] is None:
        if confirmatory:
            lims.append({"kind": "code", "text": "the lock has no code digest: whether the run used the code of "
                                                 "the lock's time is unknown"})
        return {"state": "no locked digest", "sha256": run["sha256"],
                "text": f"source sha256 {run['sha256'][:12]} ({run['n_files']} files; {versions}); the "
                        f"lock has no code digest to compare with"}
    if code["same_as_lock"]:
        return {"state": "same", "sha256": run["sha256"],
                "text": f"same as at the lock: source sha256 {run['sha256'][:12]} ({run['n_files']} "
                        f"files; {versions})"}
    what = integrity.describe_changes(code["changes"])
    if confirmatory:
        devs.insert(0, {"kind": "code change",
                        "text": f"the code differed from the locked code ({what}); the run was allowed with "
                                f"--allow-code-change, so its estimates may not be those the locked code "
                                f"gives", "changes": code["changes"]})
    return {"state": "changed", "sha256": run["sha256"], "changes": code["changes"],
            "text": f"CHANGED since the lock: {what}"}


def _commit_check(results, recorded, out, devs, lims) -> dict:
    started = results["started_utc"]
    rec = (recorded or {}).get("plan_commit")
    note = ""
    if rec is None:
        plan = plan_file(results, out) if out is not None else None
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
        plan = plan_file(results, out) if out is not None else None
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
