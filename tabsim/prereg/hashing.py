"""Canonical JSON and digests: what locks, runs and reports hash, and the bounded JSON reader they share.

The hash of a plan is the SHA-256 of its *normalised* content: the canonical JSON (sorted keys, no
whitespace) of the parsed YAML document, so comments, key order and layout do not change it while
any value does.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
from pathlib import Path
from typing import Any

from tabsim.prereg.errors import PreregError

MAX_JSON_BYTES = 64 * 1024 * 1024


def _plain(obj):
    """The document with YAML-only types (dates, non-string keys) made JSON-plain."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, (_dt.date, _dt.datetime)):
        return obj.isoformat()
    if isinstance(obj, float) and obj != obj:
        raise PreregError("a value is NaN; pre-registrations hold finite numbers only")
    return obj


def canonical_json(doc: Any) -> str:
    """Canonical JSON: sorted keys, no whitespace, UTF-8, finite numbers only."""
    return json.dumps(_plain(doc), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def normalise(doc: dict) -> dict:
    """The plan document as plain JSON data (what is hashed and stored in the lock)."""
    return json.loads(canonical_json(doc))


def plan_hash(doc: dict) -> str:
    """SHA-256 (hex) of the canonical JSON of a parsed plan document."""
    return hashlib.sha256(canonical_json(doc).encode()).hexdigest()


def file_sha256(path: str | Path) -> str:
    """SHA-256 (hex) of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def read_json(path: str | Path, what: str, *, limit: int = MAX_JSON_BYTES):
    """Parse a JSON file of at most ``limit`` bytes; PreregError naming the file otherwise."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as err:
        raise PreregError(f"{path}: cannot read the {what} ({err.strerror or err})") from None
    if size > limit:
        raise PreregError(f"{path}: the {what} is {size} bytes, more than the limit of {limit}")
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise PreregError(f"{path}: corrupted {what} (not valid JSON: {err})") from None
