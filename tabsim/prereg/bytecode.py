"""What Python executes must be what the code digest covers: compiled files that do not match the source.

The code digest of a lock (:func:`tabsim.prereg.integrity.code_digest`) hashes tabsim's ``.py``
files, but Python runs a module from its cached bytecode (``__pycache__/NAME.cpython-XY.pyc``)
whenever the cache's header says it is current: for a timestamp pyc, when the source's mtime and
size equal the recorded ones (both can be restored after a modified source was compiled); for an
unchecked hash-based pyc, always. So the digest alone can describe a source that never ran.

:func:`bytecode_problems` closes that gap: for every ``.py`` file of the package it finds the cached
bytecode Python would load and compares its code object with the source compiled afresh (code
objects compare by their bytecode, constants, names and line tables); it also lists compiled files
that Python could import *instead of* a source (extension modules, sourceless ``.pyc`` outside
``__pycache__``) and modules already loaded from anywhere but the package's sources.
"""
from __future__ import annotations

import _imp
import importlib.machinery
import importlib.util
import marshal
import sys
from pathlib import Path

_HEADER = 16
_COMPILED = tuple(importlib.machinery.EXTENSION_SUFFIXES) + tuple(importlib.machinery.BYTECODE_SUFFIXES)


def _would_load(pyc: bytes, source: Path, data: bytes) -> bool:
    """Whether the import system would run ``pyc`` (a cached file's bytes) for ``source`` (bytes ``data``)."""
    if len(pyc) < _HEADER or pyc[:4] != importlib.util.MAGIC_NUMBER:
        return False  # another interpreter's, or not bytecode: recompiled, never run
    flags = int.from_bytes(pyc[4:8], "little")
    if flags == 0:  # timestamp-based: run when mtime and size match the source's
        st = source.stat()
        return (int.from_bytes(pyc[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
                and int.from_bytes(pyc[12:16], "little") == st.st_size & 0xFFFFFFFF)
    if flags & ~0b11 or not flags & 0b1:
        return False  # invalid flags: the import fails rather than running it
    mode = getattr(_imp, "check_hash_based_pycs", "default")  # the interpreter's --check-hash-based-pycs
    check = {"always": True, "never": False}.get(mode, bool(flags & 0b10))
    return not check or pyc[8:16] == importlib.util.source_hash(data)


def stale_bytecode(source: Path) -> str | None:
    """Why the cached bytecode Python would run for ``source`` is not ``source`` compiled, or None."""
    try:
        cached = Path(importlib.util.cache_from_source(str(source)))
    except (NotImplementedError, ValueError):
        return None  # no cache for this interpreter: the source itself is compiled and run
    if not cached.is_file():
        return None
    data, pyc = source.read_bytes(), cached.read_bytes()
    if not _would_load(pyc, source, data):
        return None
    try:
        code = marshal.loads(pyc[_HEADER:])
        fresh = compile(data, str(source), "exec", dont_inherit=True, optimize=sys.flags.optimize)
    except (ValueError, EOFError, TypeError, SyntaxError) as err:
        return f"{cached.name} cannot be compared with the source ({err})"
    if code != fresh:
        return f"{cached} was compiled from other source code"
    return None


def bytecode_problems(root: str | Path, package: str | None = None) -> list[str]:
    """Every way the code Python runs for the package at ``root`` can differ from its ``.py`` sources.

    Args:
      root: the package folder.
      package: its import name; given, the modules of it loaded in this process are checked too.

    Returns:
      One line per problem, naming the file (paths relative to ``root``'s parent): cached bytecode
      that Python would run but that was not compiled from the present source; a compiled file that
      can be imported instead of a source; a loaded module of ``package`` that came from elsewhere.
      Empty when what runs is what the sources say.
    """
    root = Path(root).resolve()
    site = root.parent
    out = []
    for p in sorted(root.rglob("*")):
        if "__pycache__" in p.relative_to(root).parts or not p.is_file():
            continue
        rel = p.relative_to(site).as_posix()
        if p.name.endswith(_COMPILED):
            out.append(f"{rel}: a compiled file that Python can import instead of a source the digest covers")
        elif p.suffix == ".py":
            why = stale_bytecode(p)
            if why is not None:
                out.append(f"{rel}: its cached bytecode does not match it ({why})")
    for name, mod in sorted(sys.modules.items()) if package else ():
        if (name != package and not name.startswith(package + ".")) or mod is None:
            continue
        origin = getattr(getattr(mod, "__spec__", None), "origin", None)
        if origin is None or origin in ("built-in", "frozen", "namespace"):
            continue
        path = Path(origin).resolve()
        if path.suffix != ".py" or root not in path.parents:
            out.append(f"module {name} was loaded from {origin}, not from the sources under {root}")
    return out


__all__ = ["bytecode_problems", "stale_bytecode"]
