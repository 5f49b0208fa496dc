"""Traced programs kept on disk (``jax.export``): a new process runs a program without tracing it again.

JAX's compilation cache (:mod:`tabsim.runtime.cache`) saves the XLA compilation, but a new process still
traces and lowers a program to find its cache key: 0.5-2 s of Python per training program on a 2-core
machine, on the critical path of every command. This store keeps each program traced and lowered, once
per configuration shape, serialised with :func:`jax.export` (StableHLO in a flatbuffer: data, never a
pickle; nothing read from the store runs as Python). The structure of its arguments and results is in
JAX's own serialisation: tabsim's dataclasses (:func:`tabsim.sim.pytree.pytree_dataclass`) and optax's
optimizer states are registered with :mod:`jax.export` by name, and reading a structure back only looks
a name up among the registered classes (nothing is imported by name). A later process reads the entry,
lowers a one-call wrapper around it (about 0.1 s) and JAX's compilation cache skips the compile. The
first process runs the same wrapper, so every process runs the same compiled program; its results are
the same bits as the program run through ``jax.jit`` (``tests/runtime/test_executables.py``).

An entry is named after a SHA-256 of its key, and holds the key itself, which says everything the
program depends on:

* the program's static key (:func:`tabsim.runtime.run.static_key`: shapes and code paths of the config);
* the structure, shapes and dtypes of its arguments;
* the program's own XLA options (its ``xla_options`` attribute), given to the compiler as its ``jit`` would;
* what decides the bits of a result (:func:`tabsim.runtime.executors.numerics`: ``XLA_FLAGS``, JAX's
  numeric settings such as the matmul precision, the versions of jax, jaxlib and tabsim, and a digest of
  tabsim's sources, so any edit of tabsim's code is a new key), and optax's version (its optimizers are
  traced into the programs);
* the device: its platform, kind and runtime version.

An entry is used only when it is a regular file (opened without blocking, so a FIFO never stalls a
run) of at most :data:`MAX_ENTRY_BYTES`, belongs to this user and nobody else can write it, its recorded
key equals the key of the call and its payload its digest; the exported program's arguments (structure,
shapes and dtypes) must be those of the call (checked by :meth:`jax.export.Exported.call` when the program
is compiled for it). Anything else (another config's entry under this name, a damaged or truncated file,
an entry of an older format, a pickle, a structure naming a class not registered in this process) is
refused without a word (counted in ``stats["refused"]``): the program is traced again and the entry
replaced. A program that uses a component registered from outside tabsim (a user's estimator or
environment) is never kept: its code is in no key
(:func:`outside_code`).

**On by default** wherever the compilation cache is on; entries live in ``tabsim-programs/`` inside
the compilation cache folder and follow its settings (``TABSIM_COMPILATION_CACHE``, ``tabsim
--no-compile-cache``). ``TABSIM_EXECUTABLE_CACHE=0`` (or ``off``, ``no``, ``false``, ``none``) switches
this store off alone: every program is then traced in each process, and JAX's cache still skips the
compile. At most :data:`MAX_ENTRIES` are kept (least recently used removed). Entries are written to
a temporary file and renamed, so concurrent processes never read half an entry.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

import jax
import numpy as np
import optax
from jax import export

from tabsim.base import clock
from tabsim.config.static import USER_COMPONENTS
from tabsim.base import defaults
from tabsim.files.atomic import atomic_write_bytes
from tabsim.files.safeload import LoadError, read_regular
from tabsim.runtime.cache import OFF
from tabsim.runtime.executors import numerics
from tabsim.sim.pytree import serialisable

ENV = defaults.EXECUTABLE_CACHE
FOLDER = "tabsim-programs"
SUFFIX = ".jaxexport"
MAGIC = b"tabsim exported program\n"
FORMAT = 3  # bump when the entry layout or the key changes
MAX_ENTRIES = 200
MAX_ENTRY_BYTES = 64 << 20  # a training program is 30-300 KB
MAX_HEADER_BYTES = 1 << 20

_LOADED: dict = {}  # (fingerprint, device id) -> the compiled program, for the life of the process
_KEYS: dict = {}  # program key -> its fingerprints in this process (one per argument signature)
_LOCKS: dict = {}
_LOCK = threading.Lock()
stats = {"loaded": 0, "compiled": 0, "saved": 0, "refused": 0}  # this process (for tests and benchmarks)

# the optimizer states in a program's carry (tabsim.sim.update.optimizer: Adam's moments, SGD's empty state);
# tabsim's own dataclasses are registered where they are made (tabsim.sim.pytree.pytree_dataclass)
OPTIMIZER_STATES = (optax.ScaleByAdamState, optax.EmptyState)
for _state in OPTIMIZER_STATES:
    serialisable(_state)


def folder() -> Path | None:
    """Where programs are kept: ``tabsim-programs/`` in JAX's compilation cache folder (``None``: the
    compilation cache is off, or ``TABSIM_EXECUTABLE_CACHE`` switches this store off)."""
    if defaults.executable_cache_setting().lower() in OFF:
        return None
    if not jax.config.jax_compilation_cache_dir or not jax.config.jax_enable_compilation_cache:
        return None
    return Path(jax.config.jax_compilation_cache_dir) / FOLDER


def options(program) -> dict | None:
    """The XLA compiler options ``program`` is compiled with (its ``xla_options`` attribute, or none)."""
    return getattr(program, "xla_options", None)


def _device(leaves: list):
    """The device a call with ``leaves`` runs on: that of a committed array, else JAX's default."""
    for x in leaves:
        if isinstance(x, jax.Array) and getattr(x, "committed", False) and len(x.sharding.device_set) == 1:
            return next(iter(x.sharding.device_set))
    dev = jax.config.jax_default_device
    if isinstance(dev, str):
        return jax.devices(dev)[0]
    return dev if dev is not None else jax.devices()[0]


def _platform(dev) -> str:
    """``dev``'s platform as :func:`jax.export.export` names it (``cpu``, ``cuda``, ``rocm``, ``tpu``)."""
    if dev.platform == "gpu":
        return "rocm" if "rocm" in dev.client.platform_version.lower() else "cuda"
    return dev.platform


def key_text(key, args: tuple, xla_options: dict | None = None) -> str:
    """Everything program ``key`` called with ``args`` depends on, as the text an entry records."""
    leaves, tree = jax.tree_util.tree_flatten(args)
    dev = _device(leaves)
    avals = tuple(_aval_text(x) for x in leaves)
    opts = sorted((xla_options or {}).items())
    return repr((FORMAT, key, str(tree), avals, opts, repr(sorted(numerics().items())), optax.__version__,
                 _platform(dev), dev.device_kind, dev.client.platform_version))


_AVALS: dict = {}  # (dtype, shape, x64) -> the abstract value's text of a NumPy array of that dtype and shape


def _aval_text(x) -> str:
    """``str(jax.typeof(x))``; a NumPy array's is kept per dtype and shape (a chunked run asks for the same
    few dozen every chunk)."""
    if type(x) is not np.ndarray:
        return str(jax.typeof(x))
    at = (x.dtype, x.shape, jax.config.jax_enable_x64)  # 64-bit types are kept only with x64 on
    text = _AVALS.get(at)
    if text is None:
        text = _AVALS.setdefault(at, str(jax.typeof(x)))
    return text


def fingerprint(key, args: tuple, xla_options: dict | None = None) -> str:
    """The entry name of program ``key`` called with ``args``: a SHA-256 of :func:`key_text`."""
    return hashlib.sha256(key_text(key, args, xla_options).encode()).hexdigest()


def run(key, program, *args):
    """``program(*args)`` (``program`` a ``jax.jit`` function) without tracing it where the store holds
    it; else traced, kept in the store and run. The first call of each program and argument signature
    runs in one thread at a time, so threads started together trace it once.

    The program is compiled for the device the call runs on (a committed argument's, else JAX's default
    device of the calling thread, :class:`tabsim.runtime.executors.LocalExecutor`'s with several devices)
    and kept per device in this process; the entry on disk (StableHLO) serves every device of its kind."""
    text = key_text(key, args, options(program))
    fp = hashlib.sha256(text.encode()).hexdigest()
    slot = (fp, _device(jax.tree_util.tree_leaves(args)).id)  # one compiled program per device it runs on
    prog = _LOADED.get(slot)
    if prog is None:
        with _LOCK:
            lock = _LOCKS.setdefault(fp, threading.Lock())  # devices in turn: the second finds the first's entry
            _KEYS.setdefault(key, set()).add(fp)
        with lock:
            prog = _LOADED.get(slot)
            if prog is None:
                with clock.timed("compile"):  # tracing or loading, and compiling (or JAX's cache answering)
                    prog = _LOADED[slot] = _prepare(text, fp, program, args, keep=not outside_code(key))
    return prog(*args)


def count(key) -> int:
    """Programs of ``key`` in this process (one per argument signature it was called with)."""
    return len(_KEYS.get(key, ()))


def _prepare(text: str, fp: str, program, args: tuple, keep: bool = True):
    """``program`` compiled for ``args``: from the store's entry when it holds a good one, else traced
    (and its entry written)."""
    where = folder() if keep else None
    opts = options(program)
    if where is not None:
        path = where / f"{fp}{SUFFIX}"
        exp = _load(path, text)
        if exp is not None:
            try:
                compiled = _compile(exp, args, opts)
                stats["loaded"] += 1
                return compiled
            except Exception:  # noqa: BLE001  (other arguments, or refused by the compiler: trace it again)
                stats["refused"] += 1
        exp = _export(program, args)
        if exp is not None:
            stats["compiled"] += 1
            _save(path, text, exp)
            return _compile(exp, args, opts)
    stats["compiled"] += 1
    return program.trace(*args).lower().compile()


def outside_code(key) -> list[str]:
    """The components program ``key`` uses that a user registered (an estimator, ratio, surrogate, aggregation,
    KL estimator or environment defined outside tabsim), read from the part
    :func:`tabsim.config.static.user_components` adds to its static key. Their code, and the values they read
    when traced, are in no key: such a program is traced in each process and never kept on disk, so a user's
    edited component is never answered by the program traced from its earlier version."""
    if isinstance(key, tuple):
        if len(key) == 2 and key[0] == USER_COMPONENTS and isinstance(key[1], tuple):
            return [name for _, name, _ in key[1]]
        return [name for part in key for name in outside_code(part)]
    return []


def _compile(exp, args: tuple, opts: dict | None):
    """The exported program ``exp`` compiled as a top-level program with ``opts`` (as its ``jit`` would
    compile it; JAX's compilation cache answers for a program it compiled before)."""
    return jax.jit(exp.call).trace(*args).lower().compile(compiler_options=opts)


def _export(program, args: tuple):
    """``program`` traced for ``args`` and exported (its own function, compiled later with its options), or
    ``None`` where it cannot be exported."""
    fun = getattr(program, "__wrapped__", program)
    try:
        return export.export(jax.jit(fun), platforms=(_platform(_device(jax.tree_util.tree_leaves(args))),))(*args)
    except Exception:  # noqa: BLE001  (a program JAX cannot export: it is compiled in each process)
        return None


def _refuse():
    stats["refused"] += 1
    return None


def _load(path: Path, text: str):
    """The exported program in the entry at ``path`` when it passes every check (see the module), else
    ``None``; reading it never blocks and runs nothing from it."""
    if not os.path.lexists(path):
        return None
    try:
        data, st = read_regular(path, max_bytes=MAX_ENTRY_BYTES, what="program entry")
    except LoadError:
        return _refuse()
    if st.st_uid != os.getuid() or st.st_mode & 0o022 or not data.startswith(MAGIC):
        return _refuse()
    start = len(MAGIC) + 8
    size = int.from_bytes(data[len(MAGIC):start], "little")
    if size > MAX_HEADER_BYTES or start + size > len(data):
        return _refuse()
    try:
        header = json.loads(data[start:start + size].decode())
        payload = data[start + size:]
        if (not isinstance(header, dict) or header.get("format") != FORMAT or header.get("key") != text
                or header.get("payload_sha256") != hashlib.sha256(payload).hexdigest()):
            return _refuse()
        exp = export.deserialize(bytearray(payload))  # a class name not registered here: ValueError
    except Exception:  # noqa: BLE001  (not UTF-8, malformed or nested too deep, a payload JAX cannot read)
        return _refuse()
    try:
        os.utime(path)  # least recently used are removed first
    except OSError:
        pass
    return exp


def _save(path: Path, text: str, exp) -> None:
    """Write the entry (header with the key, then the serialised program) atomically, private to the
    user; a structure with a class not registered with :mod:`jax.export`, or any failure (read-only folder,
    full disk), skips it."""
    try:
        payload = bytes(exp.serialize())
        header = json.dumps({"format": FORMAT, "key": text,
                             "payload_sha256": hashlib.sha256(payload).hexdigest()}).encode()
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write_bytes(path, MAGIC + len(header).to_bytes(8, "little") + header + payload)
        os.chmod(path, 0o600)
        stats["saved"] += 1
        _evict(path.parent)
    except Exception:  # noqa: BLE001
        return


def _evict(where: Path) -> None:
    entries = sorted(where.glob(f"*{SUFFIX}"), key=lambda p: p.lstat().st_mtime_ns)
    for p in entries[:max(0, len(entries) - MAX_ENTRIES)]:
        p.unlink(missing_ok=True)


__all__ = ["run", "count", "folder", "fingerprint", "key_text", "MAX_ENTRIES", "ENV"]
