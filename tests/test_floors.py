"""The package's floors (docs/architecture.md): import-linter's contracts hold, no module imports
itself back through others (function-level imports included), and no module outgrows a reader."""
from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 450  # the same cap as tests/test_rooms.py


def _cycles(graph) -> list[list[str]]:
    """Every circle through a direct import ``a -> b``: grimp's shortest chain back from ``b`` to ``a``."""
    found = set()
    for a in graph.modules:
        for b in graph.find_modules_directly_imported_by(a):
            chain = graph.find_shortest_chain(importer=b, imported=a)
            if chain:
                found.add(tuple(sorted(set(chain))))
    return [list(c) for c in sorted(found)]


def test_the_contracts_hold():
    """`lint-imports` (import-linter) checks the layers, the pure core and acyclic siblings."""
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    res = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]


def test_no_module_imports_itself_back():
    """No import cycle among tabsim's modules, packages' __init__ included; grimp reads every import
    statement, those inside functions too, so a cycle cannot hide in a function-level import."""
    graph = grimp.build_graph("tabsim", include_external_packages=False, cache_dir=None)
    assert _cycles(graph) == []


def test_the_cycle_check_finds_a_cycle():
    """The check above can fail: a graph with one circle gives that circle."""
    g = grimp.ImportGraph()
    for m in ("p", "p.a", "p.b", "p.c"):
        g.add_module(m)
    g.add_import(importer="p.a", imported="p.b")
    g.add_import(importer="p.b", imported="p.a")
    g.add_import(importer="p.c", imported="p.a")
    assert _cycles(g) == [["p.a", "p.b"]]


@pytest.mark.parametrize("path", sorted((ROOT / "tabsim").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_modules_stay_readable(path):
    n = len(path.read_text().splitlines())
    assert n <= MAX_LINES, f"{path.relative_to(ROOT)}: {n} lines (at most {MAX_LINES}: split it by what it does)"


def _unexplained_function_imports(source: str) -> list[int]:
    """Lines of import statements inside functions with no ``lazy:`` comment on the statement or in
    the comments just above its block of imports."""
    lines = source.splitlines()
    tree = ast.parse(source)
    imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    spanned = {ln for n in imports for ln in range(n.lineno, n.end_lineno + 1)}
    bad = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            said = any("lazy:" in lines[ln - 1] for ln in range(node.lineno, node.end_lineno + 1))
            ln = node.lineno - 1
            while not said and ln >= 1 and (ln in spanned or lines[ln - 1].lstrip().startswith("#")):
                said = "lazy:" in lines[ln - 1]
                ln -= 1
            if not said:
                bad.add(node.lineno)
    return sorted(bad)


@pytest.mark.parametrize("path", sorted((ROOT / "tabsim").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_function_level_imports_say_why(path):
    """Imports live at the top of a module; one inside a function is there only to keep ``import tabsim``
    or a ``--help`` light (or a process's start-up in order), and a ``# lazy:`` comment says which."""
    bad = _unexplained_function_imports(path.read_text())
    assert not bad, f"{path.relative_to(ROOT)}: function-level imports without a '# lazy:' reason at lines {bad}"


def test_the_import_check_finds_an_unexplained_import():
    src = ("def f():\n    # lazy: keeps --help light\n    import json\n    import os\n\n"
           "def g():\n    import json\n    return json\n")
    assert _unexplained_function_imports(src) == [7]


def test_no_private_jax():
    """Only JAX's public API: a module of ``jax._src`` can change in any release."""
    bad = []
    for path in sorted((ROOT / "tabsim").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            bad += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names if n.startswith("jax._src")]
    assert not bad, bad
