"""Per-program XLA compile options, kept only where the running XLA knows them.

tabsim tunes the compilation of its own programs, never the process: nothing here touches
``XLA_FLAGS`` or any other environment variable, so a user's other JAX programs compile as they
would without tabsim. Each tuning is a compile option given to one program's ``jax.jit``
(``compiler_options=``). XLA's set of options changes between releases (``xla_cpu_use_fusion_emitters``
is gone from jaxlib 0.11), and an unknown option fails the compilation, so every option is tried once
on a one-element program before it is used; the answer is kept per jaxlib version and platform in
``xla-options.json`` beside the compiled programs (none when the compilation cache is off), so
later processes do not try again. An option the
running XLA refuses is dropped with one line on stderr, the first time it is tried.

``TABSIM_XLA_DEFAULTS=0`` switches every tuning off (programs compile with XLA's defaults).

Tuning that only exists as a process-wide flag (an LLVM option in ``XLA_FLAGS``, such as
``--xla_backend_extra_options=-unroll-full-max-count=8``, which caps LLVM's full unrolling and saved
about 0.06 s of compile time on the paper sweep) is left to the user: an unknown LLVM option aborts the
whole process, so tabsim never sets one.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
from pathlib import Path

ENV = "TABSIM_XLA_DEFAULTS"
FILE = "xla-options.json"

# The classic CPU loop emitters: about 30% less compile time for the bandit's programs at the same
# run time (experiments/bench_engine.py). XLA releases without the option compile as they do.
CPU_TUNING = {"xla_cpu_use_fusion_emitters": False}
# The multi-node tree's sparse update scatter-adds B G D rows per step: the fusion emitters keep the
# scatter native (2.0 -> 0.6 ms per step of 4 runs, experiments/bench_tree.py) where the classic ones
# expand it into a loop.
TREE_TUNING = {"xla_cpu_use_fusion_emitters": True}

_answers: dict = {}  # (jaxlib version, platform, name, value) -> accepted?
_lock = threading.Lock()


def _cache_file() -> Path | None:
    """Where the answers are kept: beside the compiled programs (``TABSIM_COMPILATION_CACHE``, or
    tabsim's cache folder), nowhere when the compilation cache is off (``--no-compile-cache`` writes
    nothing to disk)."""
    value = os.environ.get("TABSIM_COMPILATION_CACHE", "").strip()
    if value.lower() in ("0", "off", "no", "false", "none"):
        return None
    if value:
        return Path(value).expanduser() / FILE
    if os.environ.get("TABSIM_CACHE"):
        return Path(os.environ["TABSIM_CACHE"]).expanduser() / FILE
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "tabsim" / FILE


def _key(version: str, platform: str, name: str, value) -> str:
    return f"{version}|{platform}|{name}={json.dumps(value)}"


def _read_disk() -> dict:
    path = _cache_file()
    if path is None:
        return {}
    try:
        if path.stat().st_size > 1 << 20:  # not ours: ignore
            return {}
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, bool)} if isinstance(data, dict) else {}


def _write_disk(key: str, accepted: bool) -> None:
    """Add one answer to the file (a temporary file renamed over it); any failure only skips it."""
    path = _cache_file()
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {**_read_disk(), key: accepted}
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".xla-options.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(data, fh, indent=0, sort_keys=True)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass


def _try(name: str, value) -> bool:
    """Compile a one-element program on the CPU with ``{name: value}``: does this XLA accept it?"""
    import jax  # lazy: `import tabsim` and `tabsim --help` load no JAX
    import numpy as np

    cpu = jax.devices("cpu")[0]
    x = jax.device_put(np.zeros((), np.float32), cpu)
    try:
        jax.jit(lambda v: v + 1, compiler_options={name: value}).lower(x).compile()
    except Exception:  # noqa: BLE001  (XLA says INVALID_ARGUMENT: no such option / not a valid value)
        return False
    return True


def accepts(name: str, value) -> bool:
    """Whether the running XLA accepts compile option ``name`` set to ``value`` (tried once per jaxlib
    version and platform, remembered on disk)."""
    import jaxlib  # lazy: as above

    key = _key(jaxlib.__version__, "cpu", name, value)
    with _lock:
        if key in _answers:
            return _answers[key]
        known = _read_disk().get(key)
        if known is None:
            known = _try(name, value)
            _write_disk(key, known)
            if not known:
                print(f"tabsim: XLA {jaxlib.__version__} does not accept compile option {name}={value!r}; "
                      "programs compile without it", file=sys.stderr, flush=True)
        _answers[key] = known
        return known


def program_options(wanted: dict | None) -> dict | None:
    """``wanted`` less the options the running XLA does not accept (``None`` if none is left or
    ``TABSIM_XLA_DEFAULTS=0``): the ``compiler_options`` to give one program's ``jax.jit``."""
    if not wanted or os.environ.get(ENV, "1").strip() == "0":
        return None
    kept = {name: value for name, value in wanted.items() if accepts(name, value)}
    return kept or None


def dropped() -> list[str]:
    """The options tried in this process that the running XLA refused (for provenance)."""
    return sorted(k.split("|", 2)[2] for k, ok in _answers.items() if not ok)
