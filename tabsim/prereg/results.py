"""A complete pre-registered run folder, read and verified before anything reports on it.

The run must be marked complete, its result files must match the digests of ``status.json``, the
signatures (of the results, the lock and the amendments) must verify, a pinned key must be the
signer's, and the analysis recomputed from ``data.parquet`` must agree with ``results.json``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from tabsim.files.provenance import repo_top
from tabsim.prereg import signing
from tabsim.prereg.errors import PreregError
from tabsim.prereg.hashing import file_sha256, read_json
from tabsim.prereg.locking import check_amendments, lock_path, read_amendments, read_lock, verify_lock_signature
from tabsim.prereg.recheck import recheck_analysis
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
    plan = plan_file(results, out)
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


def plan_file(results: dict, out: Optional[Path]) -> Optional[Path]:
    """The plan file of a run, looked for beside the run folder, then at the recorded path: relative to the
    git work tree holding the run folder (runs record it so), or as recorded (an older run's absolute path)."""
    recorded = Path(results["prereg"]["file"])
    top = repo_top(out) if out is not None and not recorded.is_absolute() else None
    # beside the run folder first: a study folder copied elsewhere (plan, lock, results) checks its own plan
    candidates = ([out.parent / recorded.name] if out is not None else []) + \
        ([top / recorded] if top is not None else []) + [recorded]
    return next((p for p in candidates if p.is_file()), None)
