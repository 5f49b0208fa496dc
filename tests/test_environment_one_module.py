"""Every environment variable is read (and, for tabsim's own child processes, set) in one module only:
tabsim.base.defaults; the rest of tabsim takes the values from it, as arguments or through its functions."""
from __future__ import annotations

import ast
import warnings
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tabsim"
HOME = PACKAGE / "base" / "defaults.py"
ENV_NAMES = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}


def _touches_the_environment(path: Path) -> list[str]:
    """``file:line`` of each use of os.environ / os.getenv / os.putenv / os.unsetenv (or their imports)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Attribute) and node.attr in ENV_NAMES and getattr(node.value, "id", None) == "os":
            found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
        elif isinstance(node, ast.ImportFrom) and node.module == "os" and {a.name for a in node.names} & ENV_NAMES:
            found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return found


def test_only_the_defaults_module_touches_the_environment():
    found = [hit for path in sorted(PACKAGE.rglob("*.py")) if path != HOME for hit in _touches_the_environment(path)]
    assert found == [], f"read or set the environment through tabsim.base.defaults, not at {found}"
    assert _touches_the_environment(HOME)  # the check sees a use where there is one


def test_the_old_module_name_still_imports():
    import tabsim.base.defaults as now

    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        from tabsim.files import defaults as old
    assert old is now and old.device("cpu") == "cpu"


def test_the_variables_are_documented():
    """Each TABSIM_* variable the defaults module names has its row in docs/cli.md's table."""
    import re

    named = set(re.findall(r'"(TABSIM_[A-Z_]+)"', HOME.read_text()))
    table = (PACKAGE.parent / "docs" / "cli.md").read_text().split("### Environment variables")[1]
    assert len(named) >= 10 and [n for n in sorted(named) if f"| `{n}` |" not in table] == []
