"""Locks and amendments: proof that a plan existed in a given form before its results.

The hash of a plan is the SHA-256 of its *normalised* content (:func:`tabsim.prereg.hashing.plan_hash`):
the canonical JSON (sorted keys, no whitespace) of the parsed YAML document, so comments, key order
and layout do not change it while any value does. ``FILE.lock.json`` stores that hash, the
normalised document itself (to name the fields that changed later), the UTC time, the git commit
and the tabsim version, the digest of the tabsim source and the numerical libraries' versions
(:mod:`tabsim.prereg.integrity`), the commit that holds the plan if it is committed already, plus
a digest of the lock's own content so that a corrupted or hand-edited lock is detected. Hashes
guard against accidents only: anyone who edits the plan can recompute them. ``lock(...,
key=KEYFILE)`` adds an Ed25519 signature (:mod:`tabsim.prereg.signing`) over the lock's content,
which only the key holder can make.

A change after locking is legal only through an amendment (``FILE.amendments.json``): a chained,
timestamped record of old and new hash, the changed fields and a reason, which every report lists
as a deviation. The amendments of a signed lock are signed by the lock's key (each over its record
and the digest of the record before it, the lock for the first): an unsigned amendment, or one
signed by another key, is refused wherever the plan is read.

Times are checked against the clock: a lock or amendment dated later than now (beyond
:data:`CLOCK_SKEW`) is refused.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
from pathlib import Path
from typing import Any

from tabsim import __version__
from tabsim.files.atomic import write_json
from tabsim.files.provenance import git_commit
from tabsim.prereg import integrity, signing
from tabsim.prereg.hashing import canonical_json, normalise, plan_hash, read_json
from tabsim.prereg.schema import PreregError, load_plan, read_document

LOCK_SCHEMA = "tabsim.prereg.lock/2"
# /1: hash, plan, time, commit and version only (no code digest, never signed); still read and reported
LOCK_SCHEMAS = ("tabsim.prereg.lock/1", LOCK_SCHEMA)
AMENDMENTS_SCHEMA = "tabsim.prereg.amendments/1"
CLOCK_SKEW = _dt.timedelta(minutes=5)  # clocks of different machines may disagree by this much


class PlanChangedError(PreregError):
    """The plan no longer matches its lock (plus amendments); the message names every changed field."""


def lock_path(path: str | Path) -> Path:
    path = Path(path)
    return path.with_name(path.name + ".lock.json")


def amendments_path(path: str | Path) -> Path:
    path = Path(path)
    return path.with_name(path.name + ".amendments.json")


def _utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


def parse_time(value, where: str) -> _dt.datetime:
    """A recorded UTC time (ISO 8601 with an offset); :class:`PreregError` naming ``where`` otherwise."""
    try:
        t = _dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        t = None
    if t is None or t.tzinfo is None:
        raise PreregError(f"{where}: {value!r} is not a UTC time with an offset (e.g. 2026-01-02T03:04:05+00:00)")
    return t


def refuse_future(value, where: str, what: str) -> None:
    """Refuse a record dated later than now, beyond :data:`CLOCK_SKEW`."""
    t, now = parse_time(value, where), _dt.datetime.now(_dt.timezone.utc)
    if t > now + CLOCK_SKEW:
        raise PreregError(f"{where}: the {what} is dated {value}, later than now ({now.isoformat(timespec='seconds')}) "
                          f"by more than {int(CLOCK_SKEW.total_seconds() // 60)} minutes of clock skew; a record "
                          f"from the future cannot show what preceded what")


def _self_digest(record: dict) -> str:
    body = {k: v for k, v in record.items() if k != "self_sha256"}
    return hashlib.sha256(canonical_json(body).encode()).hexdigest()


def signed_body(record: dict) -> dict:
    """The part of a lock a signature covers: everything but the stored plan (covered through its
    hash, which :func:`read_lock` checks), the signature and the self-digest. A lock record copied
    into ``results.json`` without its plan can therefore still be verified."""
    return {k: v for k, v in record.items() if k not in ("normalized", "self_sha256", "signature")}


def verify_lock_signature(record: dict, where: str) -> str | None:
    """Verify a lock's signature (None for an unsigned lock); raise :class:`signing.SignatureError` naming ``where``."""
    if record.get("signature") is None:
        return None
    return signing.verify(record["signature"], signing.LOCK_DOMAIN, signed_body(record), where)


def _tabsim_version() -> str:
    return __version__


def changed_fields(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted paths of every field that differs between two documents.

    List items that carry an ``id`` (or ``name``) are matched by it, so ``hypotheses[H1].rule.ci_lower_gt``
    names the same hypothesis wherever it sits in the list.
    """
    if isinstance(old, dict) and isinstance(new, dict):
        return _changed_entries(old, new, sorted(set(old) | set(new), key=str),
                                lambda k: f"{prefix}.{k}" if prefix else str(k))
    if isinstance(old, list) and isinstance(new, list):
        key_of = _list_key(old, new)
        if key_of is not None:
            o = {key_of(x): x for x in old}
            n = {key_of(x): x for x in new}
            out = _changed_entries(o, n, list(o) + [k for k in n if k not in o], lambda k: f"{prefix}[{k}]")
            if not out and [key_of(x) for x in old] != [key_of(x) for x in new]:
                out.append(f"{prefix} (order)")
            return out
        if len(old) != len(new):
            return [prefix or "plan"]
        out = []
        for i, (a, b) in enumerate(zip(old, new)):
            out += changed_fields(a, b, f"{prefix}[{i}]")
        return out
    if type(old) is not type(new) and not (isinstance(old, (int, float)) and isinstance(new, (int, float))
                                           and not isinstance(old, bool) and not isinstance(new, bool)):
        return [prefix or "plan"]
    return [] if old == new else [prefix or "plan"]


def _changed_entries(old: dict, new: dict, keys, path_of) -> list[str]:
    """:func:`changed_fields` over the entries ``keys`` of two mappings; ``path_of(key)`` names an entry."""
    out = []
    for k in keys:
        path = path_of(k)
        if k not in old:
            out.append(f"{path} (added)")
        elif k not in new:
            out.append(f"{path} (removed)")
        else:
            out += changed_fields(old[k], new[k], path)
    return out


def _list_key(old: list, new: list):
    for field in ("id", "name"):
        items = old + new
        if items and all(isinstance(x, dict) and isinstance(x.get(field), str) for x in items):
            keys_o = [x[field] for x in old]
            keys_n = [x[field] for x in new]
            if len(set(keys_o)) == len(keys_o) and len(set(keys_n)) == len(keys_n):
                return lambda x, f=field: x[f]
    return None


def read_lock(path: str | Path) -> dict:
    """Load and verify ``FILE.lock.json``; raise :class:`PreregError` if missing or corrupted."""
    lp = lock_path(path)
    if not lp.is_file():
        raise PreregError(f"{path}: not locked (no {lp.name}); run `tabsim prereg lock {path}` before the study")
    lock = read_json(lp, "lock")
    required = ("schema", "sha256", "normalized", "locked_at_utc", "tabsim_version", "self_sha256")
    if not isinstance(lock, dict) or any(k not in lock for k in required):
        missing = [k for k in required if not isinstance(lock, dict) or k not in lock]
        raise PreregError(f"{lp}: corrupted lock (missing fields {missing})")
    if lock["schema"] not in LOCK_SCHEMAS:
        raise PreregError(f"{lp}: corrupted lock (schema {lock['schema']!r}, expected one of {list(LOCK_SCHEMAS)})")
    if _self_digest(lock) != lock["self_sha256"]:
        raise PreregError(f"{lp}: corrupted lock (its content does not match its self_sha256; the lock was edited)")
    if plan_hash(lock["normalized"]) != lock["sha256"]:
        raise PreregError(f"{lp}: corrupted lock (the stored plan does not hash to the stored sha256)")
    if lock["schema"] == LOCK_SCHEMAS[0] and ("signature" in lock or "code" in lock):
        raise PreregError(f"{lp}: corrupted lock (schema {lock['schema']!r} has no signature or code fields)")
    verify_lock_signature(lock, str(lp))
    refuse_future(lock["locked_at_utc"], str(lp), "lock")
    return lock


def amendment_body(record: dict) -> dict:
    """The part of an amendment its signature covers: all but the stored plan (covered through
    ``new_sha256``), the signature and the self-digest; so a copy without its plan still verifies."""
    return {k: v for k, v in record.items() if k not in ("normalized", "self_sha256", "signature")}


def check_amendments(amendments: list[dict], lock: dict, where: str) -> None:
    """The signatures and chain of amendments (full records or copies without their plans) of ``lock``.

    A signed lock demands that every amendment is signed by the lock's key and names the digest of
    the record before it (``after``: the lock's ``self_sha256`` for the first). Raises
    :class:`signing.SignatureError` naming ``where`` otherwise.
    """
    lock_fp = (lock.get("signature") or {}).get("fingerprint")
    prev = lock.get("self_sha256")
    for i, a in enumerate(amendments, 1):
        sig = a.get("signature")
        if sig is not None:
            fp = signing.verify(sig, signing.AMENDMENT_DOMAIN, amendment_body(a), f"{where} (amendment {i})")
            if lock_fp is not None and fp != lock_fp:
                raise signing.SignatureError(
                    f"{where}: amendment {i} is signed by key {signing.short(fp)}, not by the lock's key "
                    f"{signing.short(lock_fp)}; only the lock's key holder can amend the plan")
            if a.get("after") != prev:
                raise signing.SignatureError(f"{where}: amendment {i} was signed for another lock or history "
                                             f"(it does not follow the record before it)")
        elif lock_fp is not None:
            raise signing.SignatureError(
                f"{where}: amendment {i} is unsigned, but the lock is signed by key {signing.short(lock_fp)}; an "
                f"amendment of a signed lock must be signed by the same key (`tabsim prereg amend --key`)")
        prev = a.get("self_sha256")


def read_amendments(path: str | Path, lock: dict) -> list[dict]:
    """Load ``FILE.amendments.json`` (empty if absent) and verify its chain from the lock."""
    ap = amendments_path(path)
    if not ap.is_file():
        return []
    data = read_json(ap, "amendments log")
    if not isinstance(data, dict) or data.get("schema") != AMENDMENTS_SCHEMA or not isinstance(data.get("amendments"), list):
        raise PreregError(f"{ap}: corrupted amendments log (expected schema {AMENDMENTS_SCHEMA!r} with a list)")
    prev = lock["sha256"]
    for i, a in enumerate(data["amendments"], 1):
        if not isinstance(a, dict) or _self_digest(a) != a.get("self_sha256"):
            raise PreregError(f"{ap}: corrupted amendments log (amendment {i} was edited)")
        if a.get("old_sha256") != prev:
            raise PreregError(f"{ap}: corrupted amendments log (amendment {i} does not follow from the previous hash)")
        if plan_hash(a.get("normalized", {})) != a.get("new_sha256"):
            raise PreregError(f"{ap}: corrupted amendments log (amendment {i}'s plan does not hash to new_sha256)")
        refuse_future(a.get("amended_at_utc"), f"{ap} (amendment {i})", "amendment")
        prev = a["new_sha256"]
    check_amendments(data["amendments"], lock, str(ap))
    return data["amendments"]


def lock(path: str | Path, key: str | Path | None = None) -> dict:
    """Validate the plan and write ``FILE.lock.json`` beside it; refuse if a lock exists.

    Args:
      path: the plan (YAML).
      key: a private key file (``tabsim prereg keygen``) to sign the lock with; unsigned without.

    Returns:
      The lock record.
    """
    path = Path(path)
    lp = lock_path(path)
    if lp.exists():
        raise PreregError(f"{lp} already exists; a lock is never overwritten. Changes after locking need "
                          f"`tabsim prereg amend {path} --reason ...`")
    private = signing.load_private_key(key) if key is not None else None
    _, doc = load_plan(path)
    integrity.refuse_stale_code(f"{path}: cannot lock")
    sha = plan_hash(doc)
    record = {
        "schema": LOCK_SCHEMA,
        "file": path.name,
        "sha256": sha,
        "normalized": normalise(doc),
        "locked_at_utc": _utc_now(),
        "git_commit": git_commit(path.resolve().parent),
        "tabsim_version": _tabsim_version(),
        "code": integrity.code_digest(),
        "plan_commit": integrity.plan_commit(path, sha),
    }
    if private is not None:
        record["signature"] = signing.sign(private, signing.LOCK_DOMAIN, signed_body(record))
    record["self_sha256"] = _self_digest(record)
    # exclusive create: two concurrent `lock` calls cannot both succeed
    tmp = json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    try:
        with open(lp, "x", encoding="utf-8") as fh:
            fh.write(tmp)
    except FileExistsError:
        raise PreregError(f"{lp} already exists; a lock is never overwritten") from None
    return record


def amend(path: str | Path, reason: str, key: str | Path | None = None) -> dict:
    """Record a change to a locked plan: old/new hash, changed fields, reason and UTC time.

    Args:
      path: the plan.
      reason: why it changed (appears in every report).
      key: the private key of the lock's signer; required when the lock is signed (an amendment by
        anyone else is refused), optional for an unsigned lock.

    Returns:
      The amendment record appended to ``FILE.amendments.json``.
    """
    path = Path(path)
    if not reason or not reason.strip():
        raise PreregError("--reason: an amendment needs a non-empty reason")
    private = signing.load_private_key(key) if key is not None else None
    lk = read_lock(path)
    lock_fp = (lk.get("signature") or {}).get("fingerprint")
    if lock_fp is not None and (private is None or signing.key_fingerprint(private) != lock_fp):
        given = "" if private is None else f" (the key given is {signing.short(signing.key_fingerprint(private))})"
        raise PreregError(f"--key: the lock of {path} is signed by key {signing.short(lock_fp)}; only that key can "
                          f"amend it: give its private key with --key{given}")
    history = read_amendments(path, lk)
    _, doc = load_plan(path)
    current = history[-1] if history else lk
    old_hash = current["new_sha256"] if history else lk["sha256"]
    new_hash = plan_hash(doc)
    if new_hash == old_hash:
        raise PreregError(f"{path}: nothing to amend; the file matches the "
                          f"{'last amendment' if history else 'lock'} ({old_hash[:12]})")
    record = {
        "n": len(history) + 1,
        "reason": reason.strip(),
        "old_sha256": old_hash,
        "new_sha256": new_hash,
        "changed_fields": changed_fields(current["normalized"], normalise(doc)),
        "normalized": normalise(doc),
        "amended_at_utc": _utc_now(),
        "git_commit": git_commit(path.resolve().parent),
        "tabsim_version": _tabsim_version(),
        "after": history[-1]["self_sha256"] if history else lk["self_sha256"],
    }
    if private is not None:
        record["signature"] = signing.sign(private, signing.AMENDMENT_DOMAIN, amendment_body(record))
    record["self_sha256"] = _self_digest(record)
    write_json(amendments_path(path), {"schema": AMENDMENTS_SCHEMA, "file": path.name,
                                        "amendments": [*history, record]})
    return record


def verify(path: str | Path, public_key: str | None = None) -> dict:
    """Check that the plan matches its lock (plus any amendments) for a confirmatory run.

    Args:
      path: the plan.
      public_key: the fingerprint the lock must be signed with (:func:`signing.pinned`); None
        accepts an unsigned lock or any valid signature.

    Returns:
      ``{"sha256", "lock": {...}, "amendments": [...]}`` (stored documents left out).

    Raises:
      PreregError: no lock, a corrupted lock or amendments log, a bad signature, a lock not signed
        by the pinned key, or a plan changed since its last recorded version; the message names
        every changed field.
    """
    path = Path(path)
    lk = read_lock(path)
    pin = signing.parse_pin(public_key) if public_key else None
    signing.check_pin(lk.get("signature"), pin, str(lock_path(path)), "lock")
    history = read_amendments(path, lk)
    _, doc = load_plan(path)
    digest = plan_hash(doc)
    recorded = history[-1]["new_sha256"] if history else lk["sha256"]
    if digest != recorded:
        base = history[-1]["normalized"] if history else lk["normalized"]
        fields = changed_fields(base, normalise(doc))
        since = f"amendment {len(history)}" if history else f"the lock of {lk['locked_at_utc']}"
        raise PlanChangedError(
            f"{path} changed since {since} (sha256 {recorded[:12]} -> {digest[:12]}); changed fields:\n  "
            + "\n  ".join(fields)
            + f"\nA confirmatory run needs the locked plan. Revert the change, or record it with "
              f"`tabsim prereg amend {path} --reason \"...\"` (it will be reported as a deviation)."
        )
    return {
        "sha256": digest,
        "lock": {k: v for k, v in lk.items() if k != "normalized"},
        "amendments": [{k: v for k, v in a.items() if k != "normalized"} for a in history],
    }


def document_hash(path: str | Path) -> str:
    """Hash of a plan file's current content (no validation)."""
    return plan_hash(read_document(path))
