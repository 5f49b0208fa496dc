"""The package's floors (docs/architecture.md): import-linter's contracts hold, no module imports
itself back through others (function-level imports included), and no module outgrows a reader."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 600


def _cycles(graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    adj = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in sorted(adj):
        if root in index:
            continue
        work = [(root, iter(adj[root]))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(adj[w])))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


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
