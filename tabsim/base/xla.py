"""Per-program XLA compile options, kept only where the running XLA knows them.

tabsim tunes the compilation of its own programs, never the process: nothing here touches
``XLA_FLAGS`` or any other environment variable, so a user's other JAX programs compile as they
would without tabsim. Each tuning is a compile option given to one program's ``jax.jit``
(``compiler_options=``). XLA's set of options changes between releases (``xla_cpu_use_fusion_emitters``
is gone from jaxlib 0.11), and an unknown option fails the compilation, so every option is tried once
on a one-element program before it is used. The answer is kept per jaxlib version and platform; an
option name the running XLA does not know at all ("No such compile option") is remembered as refused
for every value, so that jaxlib is never asked about it again. An option the running XLA refuses is
dropped with one line on stderr, the first time it is tried, unless notes are off (:func:`set_notes`:
a command's ``-q``); :func:`dropped` names them for provenance.

This module touches no file. The runtime keeps the answers on disk for later processes
(:func:`keep_answers`: ``xla-options.json`` in the compilation cache folder, nowhere when the cache
is off, so ``--no-compile-cache`` writes nothing).

``TABSIM_XLA_DEFAULTS=0`` switches every tuning off (programs compile with XLA's defaults).

Tuning that only exists as a process-wide flag (an LLVM option in ``XLA_FLAGS``, such as
``--xla_backend_extra_options=-unroll-full-max-count=8``, which caps LLVM's full unrolling and saved
about 0.06 s of compile time on the paper sweep) is left to the user: an unknown LLVM option aborts the
whole process, so tabsim never sets one.
"""
from __future__ import annotations

import json
import sys
import threading
from typing import Callable

from tabsim.base import defaults

ENV = "TABSIM_XLA_DEFAULTS"
FILE = "xla-options.json"

# The classic CPU loop emitters: about 30% less compile time for the bandit's programs at the same
# run time (experiments/bench_engine.py). XLA releases without the option compile as they do.
CPU_TUNING = {"xla_cpu_use_fusion_emitters": False}
# The multi-node tree's sparse update scatter-adds B G D rows per step: the fusion emitters keep the
# scatter native (2.0 -> 0.6 ms per step of 4 runs, experiments/bench_tree.py) where the classic ones
# expand it into a loop.
TREE_TUNING = {"xla_cpu_use_fusion_emitters": True}

_answers: dict = {}  # answer key (see _key) -> accepted? (this process's and those kept on disk)
_used: dict = {}  # the answers this process acted on
_lock = threading.Lock()
_notes = True
_store: tuple | None = None  # (read() -> dict, write(dict)) where answers are kept on disk
_read_store = False  # the stored answers were merged into _answers in this process


def keep_answers(read: Callable[[], dict] | None, write: Callable[[dict], None] | None = None) -> None:
    """Keep the answers with ``read`` (the answers kept so far) and ``write`` (all of them), or only in
    this process (``None``)."""
    global _store, _read_store
    with _lock:
        _store = (read, write) if read is not None and write is not None else None
        _read_store = False


def forget() -> None:
    """Forget the answers of this process (as a new process starts: the kept ones are read again)."""
    global _read_store
    with _lock:
        _answers.clear()
        _used.clear()
        _read_store = False


def set_notes(on: bool) -> None:
    """Print (``True``, the default) or keep quiet (``False``: a command's ``-q``) the line that names a
    refused option; it is named in provenance either way (:func:`dropped`)."""
    global _notes
    _notes = bool(on)


def _key(version: str, platform: str, name: str, value=None) -> str:
    """The answer's key: for ``name`` set to ``value``; with no value, for the name itself (known?)."""
    head = f"{version}|{platform}|{name}"
    return head if value is None else f"{head}={json.dumps(value)}"


def _stored() -> dict:
    """The answers kept on disk, merged into this process's once (only well-formed entries)."""
    global _read_store
    if _store is not None and not _read_store:
        _read_store = True
        try:
            data = _store[0]()
        except Exception:  # noqa: BLE001  (an unreadable file is no answer)
            data = {}
        if isinstance(data, dict):
            for k, v in data.items():
                if isinstance(k, str) and isinstance(v, bool):
                    _answers.setdefault(k, v)
    return _answers


def _remember(answers: dict) -> None:
    _answers.update(answers)
    if _store is not None:
        try:
            _store[1](dict(_answers))
        except Exception:  # noqa: BLE001  (a read-only or full disk: asked again by a later process)
            pass


def _try(name: str, value) -> tuple[bool, bool]:
    """Compile a one-element program on the CPU with ``{name: value}``: ``(accepted, name known)``."""
    import jax  # lazy: `import tabsim` and `tabsim --help` load no JAX
    import numpy as np

    cpu = jax.devices("cpu")[0]
    x = jax.device_put(np.zeros((), np.float32), cpu)
    try:
        jax.jit(lambda v: v + 1, compiler_options={name: value}).lower(x).compile()
    except Exception as err:  # noqa: BLE001  (XLA says INVALID_ARGUMENT: no such option / not a valid value)
        return False, "no such compile option" not in str(err).lower()
    return True, True


def accepts(name: str, value) -> bool:
    """Whether the running XLA accepts compile option ``name`` set to ``value`` (tried once per jaxlib
    version and platform, remembered on disk where the runtime keeps answers)."""
    import jaxlib  # lazy: as above

    version = jaxlib.__version__
    key, name_key = _key(version, "cpu", name, value), _key(version, "cpu", name)
    with _lock:
        known = _stored()
        if known.get(name_key) is False:  # a name this jaxlib does not know: no value is asked about
            accepted = _used[key] = False
            return accepted
        if key in known:
            accepted = _used[key] = known[key]
            return accepted
        accepted, name_known = _try(name, value)
        _used[key] = accepted
        _remember({key: accepted} if name_known else {key: accepted, name_key: False})
        if not accepted and _notes:
            print(f"tabsim: XLA {version} does not accept compile option {name}={value!r}; "
                  "programs compile without it", file=sys.stderr, flush=True)
        return accepted


def program_options(wanted: dict | None) -> dict | None:
    """``wanted`` less the options the running XLA does not accept (``None`` if none is left or
    ``TABSIM_XLA_DEFAULTS=0``): the ``compiler_options`` to give one program's ``jax.jit``."""
    if not wanted or defaults.xla_defaults_setting() == "0":
        return None
    kept = {name: value for name, value in wanted.items() if accepts(name, value)}
    return kept or None


def dropped() -> list[str]:
    """The options tried in this process that the running XLA refused (for provenance)."""
    return sorted(k.split("|", 2)[2] for k, ok in _used.items() if not ok)
