"""Compiled programs kept on disk as executables: a new process runs them without tracing or compiling.

JAX's compilation cache (:mod:`tabsim.runtime.cache`) saves the XLA compilation, but a new process still
traces and lowers the program to find its cache key: 0.8-1 s of Python for tabsim's training
program on a laptop core, on the critical path of every command. This module keeps the *executable*
of each program under a key that says everything the program depends on, and loads it directly
(about 0.05 s) the next time:

* the program's static key (:func:`tabsim.runtime.run.static_key`: shapes and code paths of the config);
* the structure, shapes and dtypes of its arguments;
* the program's own XLA options (its ``xla_options`` attribute, e.g. the multi-node tree's
  :data:`tabsim.engine.TREE_COMPILER_OPTIONS`), given to the compiler here as the program's ``jit`` would;
* what decides the bits of a result (:func:`tabsim.runtime.executors.numerics`: ``XLA_FLAGS``, JAX's
  numeric settings, the versions of jax, jaxlib and tabsim, and a digest of tabsim's sources, so
  any edit of tabsim's code is a new key);
* the machine: JAX's backend and its version, the device kind, the CPU model and instruction-set
  flags (an executable holds machine code).

**Opt-in**: ``TABSIM_EXECUTABLE_CACHE=1`` switches this layer on; by default every program goes
through ``jax.jit`` and JAX's own compilation cache, which is what a JAX release keeps working. An
executable saved by :mod:`jax.experimental.serialize_executable` is tied to one jaxlib build and its
pickled form to JAX's internals, so this layer trades robustness for about 0.3-0.5 s of tracing per
program in a fresh process (``tabsim reproduce``: 3.5-3.9 s either way on a 2-core laptop, where the
rest of the command dominates). Executables live in ``tabsim-executables/`` inside the compilation
cache folder, so they follow its settings (``TABSIM_COMPILATION_CACHE``, ``tabsim --no-compile-cache``). At most :data:`MAX_ENTRIES` are kept (least recently used removed).
Entries are written to a temporary file and renamed (safe under concurrent processes), and an entry
is loaded only if it belongs to this user and nobody else can write it: an executable is code, so
the folder is trusted exactly as JAX's own cache is. Anything unreadable is ignored (and compiled
again), never an error.

An executable is serialised only from a fresh compilation: one that JAX itself loaded from its
compilation cache cannot be serialised again (it fails when run), so the program compiled here is
named after its key, which gives it a key of its own in JAX's cache too; a compilation that still
comes from JAX's cache (this layer's entry was removed) is used but not saved, and the next key
attempt compiles afresh. Results are the same bits as the program run through ``jax.jit``
(``tests/runtime/test_executables.py``).
"""
from __future__ import annotations

import functools
import hashlib
import os
import pickle
import platform
import tempfile
import threading
from pathlib import Path

import jax
from jax.experimental.serialize_executable import deserialize_and_load, serialize

from tabsim.runtime.cache import OFF
from tabsim.runtime.executors import numerics

ENV = "TABSIM_EXECUTABLE_CACHE"
FOLDER = "tabsim-executables"
MAX_ENTRIES = 200
FORMAT = 1  # bump when the entry layout changes
ATTEMPTS = 2  # fresh compilations tried per key before running without saving

_LOADED: dict = {}  # fingerprint -> jax.stages.Compiled, for the life of the process
_KEYS: dict = {}  # program key -> its fingerprints in this process (one per argument signature)
_LOCKS: dict = {}
_LOCK = threading.Lock()
_local = threading.local()
stats = {"loaded": 0, "compiled": 0, "saved": 0}  # this process (for tests and benchmarks)


def folder() -> Path | None:
    """Where executables are kept: ``tabsim-executables/`` in JAX's compilation cache folder (``None``:
    the compilation cache is off, or this layer is not switched on by ``TABSIM_EXECUTABLE_CACHE=1``)."""
    value = os.environ.get(ENV, "").strip().lower()
    if not value or value in OFF:
        return None

    if not jax.config.jax_compilation_cache_dir or not jax.config.jax_enable_compilation_cache:
        return None
    return Path(jax.config.jax_compilation_cache_dir) / FOLDER


@functools.lru_cache(maxsize=1)
def _machine() -> tuple:
    dev = jax.devices()[0]
    cpu = ""
    try:
        with open("/proc/cpuinfo") as fh:
            info = fh.read(1 << 16)
        cpu = "|".join(sorted({ln.split(":", 1)[1].strip() for ln in info.splitlines()
                               if ln.split(":", 1)[0].strip() in ("model name", "flags", "Features")}))
    except OSError:
        cpu = platform.processor() or platform.machine()

    return (repr(sorted(numerics().items())), dev.platform, dev.client.platform_version, dev.device_kind,
            hashlib.sha256(cpu.encode()).hexdigest())


def options(program) -> dict | None:
    """The XLA compiler options ``program`` is compiled with (its ``xla_options`` attribute, or none)."""
    return getattr(program, "xla_options", None)


def fingerprint(key, args: tuple, xla_options: dict | None = None) -> str:
    """The entry name of program ``key`` called with ``args``: a SHA-256 of everything it depends on."""
    leaves, tree = jax.tree_util.tree_flatten(args)
    avals = tuple(str(jax.typeof(x)) for x in leaves)
    opts = sorted((xla_options or {}).items())
    return hashlib.sha256(repr((FORMAT, key, str(tree), avals, opts, _machine())).encode()).hexdigest()


def _listen() -> None:
    """Count, per thread, the programs JAX loads from its own cache (their executables cannot be saved)."""
    def on_event(event: str, **kwargs) -> None:
        if event == "/jax/compilation_cache/cache_hits":
            _local.hits = getattr(_local, "hits", 0) + 1

    jax.monitoring.register_event_listener(on_event)


_listening = False


def run(key, program, *args):
    """``program(*args)`` (``program`` a ``jax.jit`` function) through its executable: loaded from disk
    when an entry exists, else compiled (and saved). The first call of each program and argument
    signature runs in one thread at a time, so threads started together compile it once."""
    fp = fingerprint(key, args, options(program))
    exe = _LOADED.get(fp)
    if exe is not None:
        return exe(*args)
    with _LOCK:
        lock = _LOCKS.setdefault(fp, threading.Lock())
        _KEYS.setdefault(key, set()).add(fp)
    with lock:
        exe = _LOADED.get(fp)
        if exe is not None:
            return exe(*args)

        where = folder()
        path = where / f"{fp}.exe" if where is not None else None
        exe = _load(path) if path is not None else None
        if exe is not None:  # its first run is checked: a damaged entry is removed and the program compiled
            try:
                out = jax.block_until_ready(exe(*args))
                stats["loaded"] += 1
                _LOADED[fp] = exe
                return out
            except jax.errors.JaxRuntimeError:
                path.unlink(missing_ok=True)
        exe = _LOADED[fp] = _compile(fp, program, args, path)
    return exe(*args)


def count(key) -> int:
    """Executables of program ``key`` in this process (one per argument signature it was called with)."""
    return len(_KEYS.get(key, ()))


def _compile(fp: str, program, args: tuple, path: Path | None):
    """``program`` compiled for ``args``, and saved to ``path`` when it was compiled here."""
    if path is None:  # no disk layer (JAX's cache may still serve it)
        stats["compiled"] += 1
        return program.trace(*args).lower().compile()
    global _listening
    if not _listening:
        _listen()
        _listening = True
    for attempt in range(ATTEMPTS):
        named = _named(program, f"tabsim_{fp[:20]}_{attempt}")
        before = getattr(_local, "hits", 0)
        exe = jax.jit(named).trace(*args).lower().compile(compiler_options=options(program))  # as its jit would
        stats["compiled"] += 1
        if getattr(_local, "hits", 0) == before:  # compiled here: it can be saved
            _save(path, exe)
            break
    return exe


def _named(program, name: str):
    """``program``'s function under a new name, to be jitted at the top level (a nested ``jit`` may not
    carry compiler options, so the program's own are given to the compiler instead)."""
    fun = getattr(program, "__wrapped__", program)

    def call(*a):
        return fun(*a)

    call.__name__ = call.__qualname__ = name
    return call


def _load(path: Path):
    """The executable in ``path``, or ``None`` (missing, not this user's, writable by others, unreadable)."""
    try:
        st = path.stat()
    except OSError:
        return None
    if st.st_uid != os.getuid() or st.st_mode & 0o022:
        return None
    try:
        with open(path, "rb") as fh:
            payload, in_tree, out_tree = pickle.load(fh)
        exe = deserialize_and_load(payload, in_tree, out_tree)
    except Exception:  # noqa: BLE001  (a damaged or foreign entry: compile instead, and replace it)
        return None
    try:
        os.utime(path)  # least recently used are removed first
    except OSError:
        pass
    return exe


def _save(path: Path, exe) -> None:
    """Write ``exe`` to ``path`` atomically; any failure (read-only folder, full disk) only skips it."""
    try:
        data = pickle.dumps(serialize(exe), protocol=pickle.HIGHEST_PROTOCOL)
        where = path.parent
        where.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=where, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
        stats["saved"] += 1
        _evict(where)
    except Exception:  # noqa: BLE001
        return


def _evict(where: Path) -> None:
    entries = sorted(where.glob("*.exe"), key=lambda p: p.stat().st_mtime_ns)
    for p in entries[:max(0, len(entries) - MAX_ENTRIES)]:
        p.unlink(missing_ok=True)


__all__ = ["run", "count", "folder", "fingerprint", "MAX_ENTRIES", "ENV"]
