"""Every room of the package stays readable: every function fits a screen (80 lines), every module stays
under 450 lines, a package's ``__init__.py`` only hands names on, and no module imports another's
private name."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tabsim"
MODULES = sorted(PACKAGE.rglob("*.py"))
FACES = [p for p in MODULES if p.name == "__init__.py"]
MAX_FUNCTION_LINES, MAX_MODULE_LINES = 80, 450
# what a package face may hold besides imports: its docstring, `__all__`, names bound to imported ones,
# and the lazy loader that hands a name on when it is first used
FACE_FUNCTIONS = {"__getattr__", "__dir__"}


def _ids(paths):
    return [str(p.relative_to(PACKAGE.parent)) for p in paths]


def long_functions(source: str) -> list[tuple[str, int]]:
    """``(name, lines)`` of each function of ``source`` over :data:`MAX_FUNCTION_LINES` (``end - start + 1``)."""
    return [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]


def private_imports(source: str) -> list[str]:
    """Each private name or private module ``source`` imports from tabsim (``from tabsim.x import _y``,
    ``from tabsim import _x``, ``import tabsim._x``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "tabsim":
            parts = node.module.split(".")
            found += [f"{node.module}" for p in parts if p.startswith("_") and not p.startswith("__")][:1]
            found += [f"{node.module}.{a.name}" for a in node.names
                      if a.name.startswith("_") and not a.name.startswith("__")]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "tabsim"
                      and any(p.startswith("_") and not p.startswith("__") for p in a.name.split("."))]
    return found


def face_logic(source: str) -> list[str]:
    """What a package face holds beyond handing names on: each statement that is not a docstring, an
    import, an assignment of names or of ``__all__``, or the lazy loader."""
    bad = []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, (ast.Name, ast.Attribute, ast.List,
                                                                                         ast.Tuple, ast.Dict, ast.Constant)):
            continue
        if isinstance(node, ast.FunctionDef) and node.name in FACE_FUNCTIONS and len(node.body) <= 12:
            continue
        if isinstance(node, ast.Assign) and {n.id for t in node.targets for n in ast.walk(t)
                                             if isinstance(n, ast.Name)} <= FACE_FUNCTIONS:
            continue  # the lazy loader made by a helper: `__getattr__, __dir__ = lazy_exports(...)`
        bad.append(f"line {node.lineno}: {type(node).__name__}")
    return bad


@pytest.mark.parametrize("path", MODULES, ids=_ids(MODULES))
def test_modules_stay_readable(path):
    source = path.read_text()
    n = len(source.splitlines())
    name = path.relative_to(PACKAGE.parent)
    assert n <= MAX_MODULE_LINES, f"{name}: {n} lines (at most {MAX_MODULE_LINES}: split it by what it does)"
    assert long_functions(source) == [], f"{name}: split along named phases"
    assert private_imports(source) == [], f"{name}: make the name public in the module that owns it"


@pytest.mark.parametrize("path", FACES, ids=_ids(FACES))
def test_package_faces_only_hand_names_on(path):
    assert face_logic(path.read_text()) == [], f"{path.relative_to(PACKAGE.parent)}: move the logic into a module"


def test_the_checks_can_fail():
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    assert long_functions(f"def f():\n{body}\n") == [("f", MAX_FUNCTION_LINES + 1)]
    assert private_imports("from tabsim.runtime.planning import _near_divisor\n") == [
        "tabsim.runtime.planning._near_divisor"]
    assert private_imports("from tabsim import _clock\nimport tabsim._xla\n") == ["tabsim._clock", "tabsim._xla"]
    assert private_imports("from tabsim._host import cpu_count\n") == ["tabsim._host"]
    assert face_logic('"""Doc."""\nfrom a import b\n__all__ = ["b"]\n') == []
    assert face_logic("def helper():\n    return 1\n") == ["line 1: FunctionDef"]
    assert face_logic("class A:\n    pass\n") == ["line 1: ClassDef"]
    assert face_logic("__getattr__, __dir__ = lazy_exports(__name__, {})\n") == []
    assert face_logic("TABLE = build()\n") == ["line 1: Assign"]
