"""A staging folder's finished chunks in two append-only files: saving a chunk costs the same at the
thousandth chunk as at the first.

``chunks/chunks.pack`` holds the chunks' bytes (Arrow IPC streams, one after another) and ``chunks/manifest.jsonl``
names them, one JSON line per chunk after a header line::

    {"schema": "tabsim.chunks/2", "key": "<the run's key>"}
    {"name": "<job>-00003", "job": "<job>", "index": 3, "offset": 20439, "size": 6813, "sha256": "..."}

Saving a chunk appends its bytes to the pack, then its line to the manifest: a line only ever names
bytes already written. A later line for a name replaces an earlier one (a chunk recomputed on resume).

Nothing is synced to disk per chunk: a killed process loses nothing it wrote (the kernel holds it), and
whatever a power cut tears (a last line cut short, a line pointing past the pack's end, bytes that no
longer hash to their line) fails verification on resume and is recomputed; a line that does not parse
is skipped. When the log is opened for writing, the manifest is rewritten once, whole, from the lines
that parsed (so a torn line never runs into the next one).

Everything read here is opened without blocking and must be a regular file of bounded size
(:func:`tabsim.runtime.manifest.open_regular`): a FIFO, a socket or a device put in the folder is refused at once, never waited on.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

from tabsim.files.atomic import atomic_write_bytes
from tabsim.runtime.manifest import CHUNK_MANIFEST, UntrustedFile, open_regular, pread_all, read_regular

CHUNK_SCHEMA = "tabsim.chunks/2"
PACK = "chunks.pack"
MAX_MANIFEST_BYTES = 256 << 20  # about a million chunks' lines
MAX_CHUNK_BYTES = 4 << 30
_FIELDS = {"job": str, "index": int, "offset": int, "size": int, "sha256": str}


def _write_all(fd: int, data, path: Path) -> None:
    view = memoryview(data).cast("B")
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError as err:
        raise OSError(err.errno, err.strerror, str(path)) from None


def _entry(line: bytes) -> tuple[str, dict] | None:
    """``(name, entry)`` of one manifest line, or None when it does not parse (a torn or edited line)."""
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    entry = {k: obj.get(k) for k in _FIELDS}
    if not all(type(entry[k]) is t for k, t in _FIELDS.items()):
        return None
    if entry["offset"] < 0 or not 0 <= entry["size"] <= MAX_CHUNK_BYTES:
        return None
    return obj["name"], entry


def read_manifest(folder: str | Path, key) -> tuple[dict[str, dict], str | None]:
    """``({chunk name: entry}, problem)`` of the chunk manifest in ``folder`` for the run ``key``.

    No entries when the manifest is absent, unreadable or another run's; ``problem`` then says why (None
    when absent or whole). Lines that do not parse are skipped: their chunks count as missing."""
    path = Path(folder) / CHUNK_MANIFEST
    try:
        data = read_regular(path, MAX_MANIFEST_BYTES)
    except FileNotFoundError:
        pack = Path(folder) / PACK
        return {}, (f"{CHUNK_MANIFEST} is missing" if pack.is_file() and pack.stat().st_size else None)
    except UntrustedFile as err:
        return {}, str(err)
    except OSError as err:
        return {}, f"{CHUNK_MANIFEST} cannot be read ({err.strerror or err})"
    lines = data.split(b"\n")
    try:
        head = json.loads(lines[0])
    except ValueError:
        head = None
    if not isinstance(head, dict) or head.get("schema") != CHUNK_SCHEMA:
        return {}, f"{CHUNK_MANIFEST} is not a tabsim chunk manifest ({CHUNK_SCHEMA})"
    if head.get("key") != key:
        return {}, f"{CHUNK_MANIFEST} was written for another run (key {head.get('key')})"
    entries = {}
    for line in lines[1:]:
        got = _entry(line) if line.strip() else None
        if got is not None:
            entries[got[0]] = got[1]
    return entries, None


def saved_chunks(folder: str | Path) -> int:
    """How many chunk lines the manifest in ``folder`` holds (whole lines: a count of progress, nothing verified)."""
    try:
        data = read_regular(Path(folder) / CHUNK_MANIFEST, MAX_MANIFEST_BYTES)
    except OSError:
        return 0
    return max(0, data.count(b"\n") - 1)


class ChunkLog:
    """The pack and manifest of one staging folder's ``chunks/``: append a chunk's bytes, record its line,
    read a chunk back verified against its line.

    Args:
      folder: the ``chunks`` folder (created on the first write).
      key: the run's key, written in the manifest's header.
      entries: what :func:`read_manifest` found there (resume), or ``{}``.
    """

    def __init__(self, folder: str | Path, key, entries: dict[str, dict] | None = None):
        self.folder, self.key = Path(folder), key
        self.entries: dict[str, dict] = dict(entries or {})
        self._pack: int | None = None  # read-write, appending
        self._lines: int | None = None
        self._end = 0
        self._lock = threading.Lock()

    def _open(self) -> None:
        """Open both files for appending: keep the pack if it is a regular file (else start an empty one, and
        forget every entry), then rewrite the manifest whole from the entries kept."""
        self.close()  # what a failed earlier open left
        self.folder.mkdir(parents=True, exist_ok=True)
        pack = self.folder / PACK
        try:
            fd = open_regular(pack, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        except UntrustedFile:
            atomic_write_bytes(pack, b"")  # renamed over the FIFO (or whatever it was)
            self.entries.clear()
            fd = open_regular(pack, os.O_RDWR | os.O_APPEND)
        self._pack, self._end = fd, os.fstat(fd).st_size
        head = json.dumps({"schema": CHUNK_SCHEMA, "key": self.key}, default=str)
        body = "".join(_line(name, e) for name, e in self.entries.items())
        manifest = self.folder / CHUNK_MANIFEST
        atomic_write_bytes(manifest, (head + "\n" + body).encode())
        self._lines = open_regular(manifest, os.O_WRONLY | os.O_APPEND)

    def write(self, data) -> dict:
        """Append a chunk's bytes to the pack; ``{"offset", "size", "sha256"}`` for its manifest line."""
        with self._lock:
            if self._lines is None:
                self._open()
            size = memoryview(data).nbytes
            offset = self._end
            self._end += size  # past even a write that fails half-way: the next chunk never overlaps it
            _write_all(self._pack, data, self.folder / PACK)
        return {"offset": offset, "size": size, "sha256": hashlib.sha256(data).hexdigest()}

    def record(self, name: str, entry: dict) -> None:
        """Append the manifest line naming chunk ``name`` (bytes already in the pack)."""
        with self._lock:
            if self._lines is None:
                self._open()
            _write_all(self._lines, _line(name, entry).encode(), self.folder / CHUNK_MANIFEST)
            self.entries[name] = entry

    def read(self, entry: dict) -> bytes:
        """The bytes ``entry`` names, checked against its length and SHA-256.

        Raises:
          UntrustedFile: saying why they cannot be trusted (missing pack, past its end, another hash).
        """
        with self._lock:
            fd = self._pack
            try:
                fd = open_regular(self.folder / PACK) if fd is None else fd
            except FileNotFoundError:
                raise UntrustedFile(f"{PACK} is missing") from None
            try:
                if entry["offset"] + entry["size"] > os.fstat(fd).st_size:
                    raise UntrustedFile(f"{PACK} ends before it")
                data = pread_all(fd, entry["size"], entry["offset"])
            finally:
                if fd != self._pack:
                    os.close(fd)
        if hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise UntrustedFile("SHA-256 differs from the manifest")
        return data

    def close(self) -> None:
        """Close both files (idempotent; the entries stay readable through a fresh descriptor)."""
        for fd in (self._pack, self._lines):
            if fd is not None:
                os.close(fd)
        self._pack = self._lines = None


def _line(name: str, entry: dict) -> str:
    return json.dumps({"name": name, **{k: entry[k] for k in _FIELDS}}, separators=(",", ":")) + "\n"


__all__ = ["ChunkLog", "read_manifest", "saved_chunks", "CHUNK_SCHEMA", "PACK",
           "MAX_MANIFEST_BYTES", "MAX_CHUNK_BYTES"]
