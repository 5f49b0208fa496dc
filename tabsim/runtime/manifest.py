"""What a published run folder holds, file by file: the SHA-256 manifest and its re-check.

A store (:mod:`tabsim.runtime.store`) writes ``.tabsim-run.json`` last into every folder it publishes:
the command, the run's key, the chunks reused, written and recomputed, and ``files``, the SHA-256
of every other file in the folder (paths relative to it, ``/``-separated). :func:`check_folder`
recomputes them and names what changed, what is missing and what was added since
(``tabsim verify FOLDER``).
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

MARKER = ".tabsim-run.json"  # written last into the staging folder; a published folder always has it
SCHEMA = "tabsim.run/1"
CHUNK_MANIFEST = "manifest.jsonl"  # in staging/chunks: one line per chunk the store wrote (tabsim.runtime.chunklog)
_BLOCK = 1 << 20
MAX_MARKER_BYTES = 64 << 20  # a marker's digests of about half a million files


class ManifestError(ValueError):
    """A folder cannot be checked: it is not a published tabsim run, or its manifest is unreadable."""


class UntrustedFile(OSError):
    """A file tabsim reads is not a regular file, or is larger than it can be (the message says which)."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: str | Path, flags: int = os.O_RDONLY, mode: int = 0o644) -> int:
    """A file descriptor of ``path`` opened without blocking, after checking that it is a regular file.

    Raises:
      UntrustedFile: ``path`` is a FIFO, socket, device or folder (closed again at once).
      OSError: it cannot be opened (``FileNotFoundError`` when absent).
    """
    fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise UntrustedFile(f"{Path(path).name} is {_kind(st.st_mode)}, not a regular file")
    return fd


def read_regular(path: str | Path, limit: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them (:class:`UntrustedFile` otherwise)."""
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise UntrustedFile(f"{Path(path).name} holds {size} bytes, more than the {limit} allowed")
        return pread_all(fd, size, 0)
    finally:
        os.close(fd)


def pread_all(fd: int, size: int, offset: int) -> bytes:
    """Up to ``size`` bytes of ``fd`` from ``offset`` (fewer only where the file ends first)."""
    parts, got = [], 0
    while got < size:
        block = os.pread(fd, size - got, offset + got)
        if not block:
            break
        parts.append(block)
        got += len(block)
    return b"".join(parts)


def file_sha256(path: str | Path) -> str:
    """SHA-256 (hex) of a regular file's bytes, read in blocks (opened without blocking: a FIFO is refused)."""
    h = hashlib.sha256()
    with os.fdopen(open_regular(path), "rb") as fh:
        for block in iter(lambda: fh.read(_BLOCK), b""):
            h.update(block)
    return h.hexdigest()


def tree_digests(folder: str | Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """``{relative path: sha256}`` of every file under ``folder`` (links not followed), but for the
    top-level entries named in ``skip``."""
    folder = Path(folder)
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder)
        if rel.parts[0] in skip or p.is_symlink() or not p.is_file():
            continue
        try:
            out[rel.as_posix()] = file_sha256(p)
        except UntrustedFile:  # swapped for a FIFO since: no digest, as for one seen before
            continue
    return out


def read_marker(folder: str | Path) -> dict:
    """The ``.tabsim-run.json`` of a published folder; :class:`ManifestError` naming the folder otherwise."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ManifestError(f"{folder}: not a folder")
    path = folder / MARKER
    if not path.is_file():
        raise ManifestError(f"{folder}: no {MARKER}; not a folder published by tabsim (or not complete)")
    try:
        marker = json.loads(read_regular(path, MAX_MARKER_BYTES))
    except (OSError, ValueError, UnicodeDecodeError) as err:
        raise ManifestError(f"{path}: unreadable ({err})") from None
    if not isinstance(marker, dict) or marker.get("schema") != SCHEMA:
        raise ManifestError(f"{path}: not a tabsim run record (expected schema {SCHEMA!r})")
    files = marker.get("files")
    if files is None:
        raise ManifestError(f"{path}: records no file digests (published by an earlier tabsim); nothing to check "
                            f"against")
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise ManifestError(f"{path}: corrupted file manifest (expected path -> sha256)")
    return marker


def check_folder(folder: str | Path) -> dict:
    """Re-check a published folder against the digests recorded when it was published.

    Returns:
      ``{"marker": {...}, "n_files", "changed": [...], "missing": [...], "added": [...]}``, paths
      relative to ``folder``; all three lists empty when every file is as published.

    Raises:
      ManifestError: not a published tabsim folder, or no readable manifest.
    """
    folder = Path(folder)
    marker = read_marker(folder)
    recorded = marker["files"]
    now = tree_digests(folder, skip=(MARKER,))
    # what has no digest is still an addition: a FIFO, socket or device, or a link (never published)
    odd = {p.relative_to(folder).as_posix() for p in folder.rglob("*")
           if p.name != MARKER and (p.is_symlink() or not (p.is_file() or p.is_dir()))}
    return {"marker": marker, "n_files": len(recorded),
            "changed": sorted(k for k in recorded.keys() & now.keys() if recorded[k] != now[k]),
            "missing": sorted(recorded.keys() - now.keys() - odd),
            "added": sorted((now.keys() - recorded.keys())
                            | {f"{k} (a link)" if (folder / k).is_symlink() else f"{k} (not a regular file)"
                               for k in odd})}


def check_unchanged(folder: str | Path, reads: tuple[str, ...] = ()) -> dict:
    """The marker of a published folder whose files are all as published (:func:`check_folder`): what a
    command checks before it reads a published run.

    Args:
      reads: the files the caller reads (relative paths); one of them added since publishing is refused
        too (other additions are not read, and ``tabsim verify`` names them).

    Raises:
      ManifestError: not a published folder, or one naming each file changed, missing or read but added.
    """
    got = check_folder(folder)
    bad = ([f"changed {p}" for p in got["changed"]] + [f"missing {p}" for p in got["missing"]]
           + [f"added {p}" for p in got["added"] if p.split(" (")[0] in reads])  # "X (a link)" replaces X too
    if bad:
        more = f" and {len(bad) - 4} more" if len(bad) > 4 else ""
        raise ManifestError(f"{folder}: differs from the run published at {got['marker'].get('published_utc', '?')} "
                            f"({MARKER}): {', '.join(bad[:4])}{more}; refusing to read it (`tabsim verify "
                            f"{folder}` lists every difference)")
    return got["marker"]


def _placed(path: str | Path) -> Path:
    """``path`` with the links of its folders resolved, not a link in its own name (what a folder holds)."""
    path = Path(path)
    return Path(os.path.realpath(path.parent)) / path.name


def published_folder(path: str | Path) -> Path | None:
    """The nearest folder holding ``path`` (its folders' links resolved) that carries a :data:`MARKER`, or None."""
    return next((p for p in _placed(path).parents if (p / MARKER).is_file()), None)


def check_file(path: str | Path) -> None:
    """A file read from inside a published folder must be as published (a file in none is not checked).

    Raises:
      ManifestError: naming the file, changed or added since its folder was published, or the folder's
        unreadable manifest.
    """
    folder = published_folder(path)
    if folder is None:
        return
    marker = read_marker(folder)
    rel = _placed(path).relative_to(folder).as_posix()
    recorded = None if Path(path).is_symlink() else marker["files"].get(rel)  # tabsim never publishes a link
    when = marker.get("published_utc", "?")
    if recorded is None:
        what = "a link (tabsim publishes none) in" if Path(path).is_symlink() else "added to"
        raise ManifestError(f"{path}: {what} {folder} since it was published at {when} ({MARKER}); refusing to "
                            f"read it (`tabsim verify {folder}` lists every difference)")
    if not Path(path).is_file() or file_sha256(path) != recorded:
        raise ManifestError(f"{path}: changed since {folder} was published at {when} ({MARKER}); refusing to read "
                            f"it (`tabsim verify {folder}` lists every difference)")


__all__ = ["MARKER", "SCHEMA", "CHUNK_MANIFEST", "ManifestError", "UntrustedFile", "open_regular", "read_regular",
           "pread_all", "file_sha256", "tree_digests", "read_marker",
           "check_folder", "check_unchanged", "published_folder", "check_file"]
