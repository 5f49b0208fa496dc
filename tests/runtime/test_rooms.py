"""The runtime's rooms stay readable: every function fits a screen (80 lines), every module stays under 450
lines, and no module imports another's private name."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

RUNTIME = Path(__file__).resolve().parents[2] / "tabsim" / "runtime"
MODULES = sorted(RUNTIME.glob("*.py"))
MAX_FUNCTION_LINES, MAX_MODULE_LINES = 80, 450


def long_functions(source: str) -> list[tuple[str, int]]:
    """``(name, lines)`` of each function of ``source`` over :data:`MAX_FUNCTION_LINES` (``end - start + 1``)."""
    return [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]


def private_imports(source: str) -> list[str]:
    """``module.name`` of each private name ``source`` imports from a tabsim module (the package's own
    underscored names only)."""
    return [f"{node.module}.{alias.name}" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tabsim.")
            for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__")]


@pytest.mark.parametrize("path", MODULES, ids=[p.name for p in MODULES])
def test_runtime_modules_stay_readable(path):
    source = path.read_text()
    assert len(source.splitlines()) <= MAX_MODULE_LINES, f"{path.name}: split it by responsibility"
    assert long_functions(source) == [], f"{path.name}: split along named phases"
    assert private_imports(source) == [], f"{path.name}: make the name public in the lower module"


def test_the_checks_can_fail():
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    assert long_functions(f"def f():\n{body}\n") == [("f", MAX_FUNCTION_LINES + 1)]
    assert private_imports("from tabsim.runtime.planning import _near_divisor\n") == [
        "tabsim.runtime.planning._near_divisor"]
