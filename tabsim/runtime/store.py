"""The run store: a run's outputs appear whole, in one rename, or not at all.

Every command that writes builds its outputs in a *staging folder* beside ``--out``
(``.NAME.staging``) and publishes it with one rename when everything is written. A run that is
killed, interrupted or runs out of disk leaves ``--out`` exactly as it was, and the staging folder is
hidden, so nothing that looks complete appears.

* An existing, non-empty ``--out`` is refused unless the user asks for ``overwrite`` (the old
  contents stay in place until the new run is published, then are swapped out atomically) or
  ``resume``.
* A lock file beside ``--out`` (``.NAME.lock``, held with ``flock``) refuses a second process that
  writes to the same ``--out`` while the first runs; the kernel releases it when a process dies.
* Chunks are the unit of progress: each finished chunk of a compiled run is saved (Arrow IPC) into
  ``staging/chunks/``, named by the job's hash and the chunk id, at a constant cost per chunk (two
  appends: :mod:`tabsim.runtime.chunklog`). ``resume`` recomputes only the chunks that are missing and
  gives the same frame, byte for byte, as an uninterrupted run.
* A store trusts only what it wrote: each chunk carries the run's key, its job and its chunk id, and
  its offset, length and SHA-256 go into ``staging/chunks/manifest.jsonl``, one line per chunk.
  ``resume`` recomputes any chunk whose bytes, key, job or id do not match, and says how many. Every
  file it reads must be a regular file of bounded size, opened without blocking (a FIFO is refused).
* A published folder carries the SHA-256 of every file it holds in ``.tabsim-run.json``;
  :func:`tabsim.runtime.manifest.check_folder` (``tabsim verify FOLDER``) names what changed since.

A store can be used explicitly (``tabsim.run(cfg, store=store)``) or as the *current* store: while
``with RunStore(...)`` is open, :func:`tabsim.run` and :func:`tabsim.studies.factorial.run_designs` checkpoint
their chunks into it without being told (so study scripts, pre-registered runs and audits resume too).
"""
from __future__ import annotations

import contextvars
import datetime as _dt
import fcntl
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from tabsim.base import clock
from tabsim.files.atomic import write_json
from tabsim.runtime.chunklog import ChunkLog, read_manifest
from tabsim.runtime.executors import finished_on_interrupt, positions
from tabsim.runtime.manifest import CHUNK_MANIFEST, MARKER, SCHEMA, UntrustedFile, tree_digests
# what the store reads and writes, re-exported where it was first defined
from tabsim.runtime.storefiles import (FRAME_FILES, MAX_JSON_BYTES, METRIC_PREFIXES, METRIC_RANGES,  # noqa: F401
                                       RANGE_SLACK, decode_chunk, encode_chunk, exchange, frame_problem, metric_range,
                                       out_of_range, read_json)

_CURRENT: contextvars.ContextVar["RunStore | None"] = contextvars.ContextVar("tabsim_run_store", default=None)


class OutputError(OSError):
    """An output folder cannot be used as asked (the message names the path and what to do)."""


class OutputExistsError(OutputError):
    """``--out`` already holds results and neither overwrite nor resume was asked for."""


class OutputBusyError(OutputError):
    """Another process is writing to the same ``--out``."""


def staging_path(out: str | Path) -> Path:
    out = Path(out)
    return out.parent / f".{out.name}.staging"


def lock_path(out: str | Path) -> Path:
    out = Path(out)
    return out.parent / f".{out.name}.lock"


def current_store() -> "RunStore | None":
    """The store opened by the innermost active ``with RunStore(...)`` block, or None."""
    return _CURRENT.get()


def writing_into(folder: str | Path) -> bool:
    """True when ``folder`` is (inside) the staging folder of the current store."""
    store = current_store()
    if store is None:
        return False
    folder, stage = Path(folder).resolve(), store.dir.resolve()
    return folder == stage or stage in folder.parents


def job_key(*parts) -> str:
    """A short hex digest of JSON-serialisable ``parts``: names one job's chunks in a store.

    The digest of ``json.dumps(parts, sort_keys=True, separators=(",", ":"))``, written without encoding
    a mapping twice: a job's chunks repeat one hyperparameter mapping for every seed of a cell."""
    blob = _canonical(parts, {})
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _canonical(obj, memo: dict) -> str:
    """``json.dumps(obj, sort_keys=True, separators=(",", ":"), default=_plain)``; a mapping met again
    (the same object: ``memo`` holds it, so its id is not reused meanwhile) reuses its text."""
    if isinstance(obj, (list, tuple)):
        if all(type(x) is int for x in obj):  # seed lists: int.__repr__ is JSON's text for an int
            return "[" + ",".join(map(str, obj)) + "]"
        return "[" + ",".join([memo[id(x)][1] if id(x) in memo else _canonical(x, memo) for x in obj]) + "]"
    if isinstance(obj, dict):
        if id(obj) not in memo:
            memo[id(obj)] = (obj, json.dumps(obj, sort_keys=True, separators=(",", ":"), default=_plain))
        return memo[id(obj)][1]
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=_plain)


def _plain(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def _non_empty(path: Path) -> bool:
    return path.is_dir() and any(path.iterdir())


def _utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _why(err: OSError) -> str:
    return err.strerror or str(err)


class RunStore:
    """A staging folder for one run's outputs, published to ``out`` with one rename.

        with RunStore("results/priors", overwrite=False, resume=False, key=cfg.digest()) as store:
            res = tabsim.run(cfg)             # chunks checkpointed in store.dir / "chunks"
            res.save(store.dir)
        # published here: results/priors holds the whole run, or (after an error) what it held before

    Args:
      out: the folder the run is published to.
      overwrite: replace a non-empty ``out`` (its contents are kept until the new run is published).
      resume: continue an interrupted run: reuse the chunks in the staging folder.
      key: what the run computes (e.g. the config's hash); ``resume`` refuses a staging folder
        written for another key.
      description: the command, for the marker file and messages.

    Leaving the block normally publishes; leaving it with an exception keeps the staging folder (its
    finished chunks are what ``resume`` continues from) and leaves ``out`` untouched.
    """

    def __init__(self, out: str | Path, *, overwrite: bool = False, resume: bool = False, key: str | None = None,
                 description: str = "tabsim"):
        self.out = Path(out)
        self.overwrite, self.resume, self.key, self.description = bool(overwrite), bool(resume), key, description
        self.dir = staging_path(self.out)
        self._lock_fd: int | None = None
        self._token = None
        self.published = False
        self.reused_chunks = 0
        self.written_chunks = 0
        self.recomputed_chunks = 0  # saved chunks that failed verification on resume
        self.rejected: list[tuple[str, str]] = []  # (chunk file, why) of each of them
        self._log: ChunkLog | None = None  # the chunks saved in the staging folder (opened by ``open``)

    # -- opening ------------------------------------------------------------------------------
    def __enter__(self) -> "RunStore":
        self.open()
        self._token = _CURRENT.set(self)
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            if self._token is not None:
                _CURRENT.reset(self._token)
                self._token = None
            if exc_type is None and not self.published:
                self.publish()
        finally:
            self.release()
        return False

    def open(self) -> "RunStore":
        out = self.out
        if self.overwrite and self.resume:
            raise OutputError(f"--out {out}: choose one of --overwrite (start again) and --resume (continue)")
        if out.exists() and not out.is_dir():
            raise OutputError(f"--out {out}: exists and is not a folder")
        blocker = next((p for p in out.parents if p.exists() and not p.is_dir()), None)
        if blocker is not None:
            raise OutputError(f"--out {out}: {blocker} is a file, not a folder")
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise OutputError(f"--out {out}: cannot create {out.parent}: {_why(err)}") from None
        self._acquire()
        try:
            self._prepare()
        except BaseException:
            self.release()
            raise
        return self

    def _acquire(self) -> None:
        path = lock_path(self.out)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise OutputError(f"--out {self.out}: cannot write in {self.out.parent}: {_why(err)}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown"
            finally:
                os.close(fd)
            raise OutputBusyError(f"--out {self.out}: another tabsim process is writing there ({holder}); "
                                  "wait for it to finish or choose another --out") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} since {_utc_now()}\n".encode(), 0)
        self._lock_fd = fd

    def release(self) -> None:
        """Release the lock on ``out`` (idempotent)."""
        if self._lock_fd is None:
            return
        if self._log is not None:
            self._log.close()
        fd, self._lock_fd = self._lock_fd, None
        try:
            lock_path(self.out).unlink(missing_ok=True)  # still held: no other process can be mid-acquire
        except OSError:
            pass
        os.close(fd)

    def _prepare(self) -> None:
        out, stage = self.out, self.dir
        meta_file = stage / "staging.json"
        self._log = ChunkLog(stage / "chunks", self.key)
        if stage.exists():
            meta, why = read_json(meta_file, why=True)
            if self.resume:
                if meta is None:
                    raise OutputError(f"--resume: {stage} holds no readable staging.json ({why}); it was not "
                                      "written by tabsim. Remove it or choose another --out")
                if self.key is not None and meta.get("key") not in (None, self.key):
                    raise OutputError(f"--resume: the interrupted run in {stage} computed something else (key "
                                      f"{meta.get('key')}, this run {self.key}); rerun it with the same config and "
                                      "options, or pass --overwrite to start again")
                entries, problem = read_manifest(stage / "chunks", meta.get("key"))
                if problem:
                    self.say(f"resume: chunks/{problem}; its chunks are not trusted and are recomputed")
                self._log = ChunkLog(stage / "chunks", self.key, entries)
                return
            if not self.overwrite:
                n = len(read_manifest(stage / "chunks", meta.get("key") if isinstance(meta, dict) else None)[0])
                raise OutputExistsError(f"--out {out}: an interrupted run left {n} finished chunk(s) in {stage}; pass "
                                        "--resume to continue it or --overwrite to start again")
            shutil.rmtree(stage)
        elif _non_empty(out):
            if self.resume and (out / MARKER).exists():
                marker = read_json(out / MARKER) or {}
                if self.key is not None and marker.get("key") not in (None, self.key):
                    raise OutputError(f"--resume: {out} holds a complete run of something else (key "
                                      f"{marker.get('key')}, this run {self.key}); pass --overwrite to replace it")
                return  # complete already: nothing to resume (see ``complete``)
            if self.resume:
                raise OutputError(f"--resume: there is no interrupted run to continue ({stage} does not exist) and "
                                  f"{out} is not empty; pass --overwrite to replace it or choose another --out")
            if not self.overwrite:
                what = "a complete tabsim run" if (out / MARKER).exists() else "files tabsim did not write"
                raise OutputExistsError(f"--out {out}: folder is not empty (it holds {what}); pass --overwrite to "
                                        "replace it (kept until the new run is published) or choose another --out")
        try:
            stage.mkdir()
            _write_json(meta_file, {"schema": SCHEMA, "key": self.key, "out": str(out), "started_utc": _utc_now(),
                                    "pid": os.getpid(), "command": self.description})
        except OSError as err:
            raise OutputError(f"--out {out}: cannot write {stage}: {_why(err)}") from None

    @property
    def complete(self) -> bool:
        """True when ``resume`` found ``out`` already complete and no staging folder: nothing to run."""
        return self.resume and not self.dir.exists() and (self.out / MARKER).exists()

    # -- chunks -------------------------------------------------------------------------------
    @staticmethod
    def _chunk_name(job: str, index: int) -> str:
        return f"{job}-{index:05d}"

    @clock.timed("bookkeeping")
    def load_chunk(self, job: str, index: int) -> dict[str, np.ndarray] | None:
        """The arrays saved for chunk ``index`` of ``job``, or None if it is not there or fails verification.

        A chunk is trusted only when its bytes have the length and SHA-256 the manifest recorded when this
        store wrote it, and the key, job and chunk id it carries are this run's, this job's and ``index``;
        one that fails (truncated, edited, copied over another, foreign, a metric outside its range) counts
        in ``recomputed_chunks``.
        """
        name = self._chunk_name(job, index)
        entry = self._log.entries.get(name) if self._log is not None else None
        if entry is None:
            return None
        try:
            out, why = decode_chunk(self._log.read(entry), (self.key, job, index), entry)
        except UntrustedFile as err:
            out, why = None, str(err)
        except Exception:  # noqa: BLE001 - bytes that cannot be read back are recomputed, never trusted
            out, why = None, "unreadable"
        if why is None:
            return out
        self.recomputed_chunks += 1
        self.rejected.append((name, why))
        return None

    @clock.timed("bookkeeping")
    def save_chunk(self, job: str, index: int, arrays: dict[str, np.ndarray]) -> str:
        """Save chunk ``index`` of ``job`` (an Arrow IPC stream: one flat column per array): its bytes are
        appended to the pack, then its manifest line; returns the chunk's name."""
        data = encode_chunk(arrays, self.key, job, index, default=_plain)
        if self._log is None:
            self._log = ChunkLog(self.dir / "chunks", self.key)
        entry = self._log.write(data)
        name = self._chunk_name(job, index)
        # the line after the bytes: a kill in between leaves bytes that no line names, never a line without them
        self._record(name, {**entry, "job": job, "index": index})
        self.written_chunks += 1
        return name

    def _record(self, name: str, entry: dict) -> None:
        self._log.record(name, entry)

    def say(self, message: str) -> None:
        """One line to the user (stderr): what the store did that changes what runs."""
        print(message, file=sys.stderr, flush=True)

    # -- publishing ---------------------------------------------------------------------------
    def _check_ranges(self) -> None:
        """Refuse to publish a results frame whose metrics leave their ranges (:data:`METRIC_RANGES`)."""
        for pattern in FRAME_FILES:
            for path in sorted(self.dir.glob(pattern)):
                try:
                    why = frame_problem(path)
                except Exception as err:  # noqa: BLE001 - a frame that cannot be read back is not published
                    why = f"unreadable ({type(err).__name__})"
                if why:
                    raise OutputError(f"{self.out}: not published: {path.relative_to(self.dir).as_posix()}: {why}; "
                                      f"{self.out} is unchanged (the run's files are kept in {self.dir})")

    def publish(self) -> Path:
        """Move the staging folder to ``out`` in one rename (swapping out an old ``out`` atomically)."""
        if self.published:
            return self.out
        if self.complete:
            self.published = True
            return self.out
        stage, out = self.dir, self.out
        self._check_ranges()
        if self._log is not None:
            self._log.close()
        (stage / "staging.json").unlink(missing_ok=True)
        chunks = stage / "chunks"
        files = tree_digests(stage, skip=(chunks.name, MARKER))
        _write_json(stage / MARKER, {"schema": SCHEMA, "key": self.key, "command": self.description,
                                     "published_utc": _utc_now(), "chunks_reused": self.reused_chunks,
                                     "chunks_written": self.written_chunks,
                                     "chunks_recomputed": self.recomputed_chunks, "files": files})
        if out.exists() and _non_empty(out):
            if not exchange(stage, out):
                old = out.parent / f".{out.name}.old-{os.getpid()}"
                os.rename(out, old)
                os.rename(stage, out)
                stage = old
            shutil.rmtree(stage, ignore_errors=True)  # now the old contents
        else:
            os.replace(stage, out)  # replaces an empty folder too
        shutil.rmtree(out / chunks.name, ignore_errors=True)
        self.published = True
        return self.out


def _write_json(path: Path, obj) -> None:
    write_json(path, obj)


def execute(fn: Callable, chunks: Sequence, *, executor=None, store: "RunStore | None" = None, job: str | None = None,
            progress=None) -> list:
    """Run ``fn`` on every chunk through ``executor``; return the outputs in chunk order.

    With a store (``store`` or the current one) and a ``job`` key, chunks already saved are loaded
    instead of recomputed and each new output is saved as soon as it arrives.

    Args:
      fn: chunk -> ``{name: array}``.
      chunks: the chunks, in order.
      executor: anything with ``map(fn, items)`` yielding outputs in order, or ``imap_unordered(fn, items)``
        yielding ``(position, output)`` as they finish; default in-process.
      store: where chunks are checkpointed (default :func:`current_store`).
      job: a key naming this job's chunks in the store (see :func:`job_key`); without one nothing is saved.
      progress: an object with ``update(n)`` (a progress bar), or None.
    """
    store = store if store is not None else current_store()
    outputs: list = [None] * len(chunks)
    todo = list(range(len(chunks)))
    if store is not None and job is not None:
        todo = []
        failed = store.recomputed_chunks
        for i in range(len(chunks)):
            got = store.load_chunk(job, i)
            if got is None:
                todo.append(i)
            else:
                outputs[i] = got
                store.reused_chunks += 1
        failed = store.recomputed_chunks - failed
        if failed:
            name, why = store.rejected[-failed]
            store.say(f"resume: {failed} saved chunk(s) failed verification and are recomputed (e.g. {name}: {why}); "
                      f"{len(chunks) - len(todo)} verified chunk(s) reused")
        if progress is not None and len(chunks) - len(todo):
            progress.update(len(chunks) - len(todo))
    saving = store is not None and job is not None
    pairs, inner = positions(executor, fn, [chunks[i] for i in todo])
    try:
        for pos, out in pairs:
            i = todo[pos]
            if saving:
                store.save_chunk(job, i, out)
            outputs[i] = out
            if progress is not None:
                progress.update(1)
    except KeyboardInterrupt as err:
        for pos, out in finished_on_interrupt(err, inner) if saving else ():  # kept for --resume
            if outputs[todo[pos]] is None:
                store.save_chunk(job, todo[pos], out)
        raise
    return outputs


__all__ = ["RunStore", "OutputError", "OutputExistsError", "OutputBusyError", "current_store", "writing_into", "execute", "job_key",
           "staging_path", "lock_path", "MARKER", "CHUNK_MANIFEST"]
