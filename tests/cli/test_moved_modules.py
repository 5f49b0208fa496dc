"""Modules that moved keep their old import paths, as the very module at the new place, with a
DeprecationWarning; nothing else answers to an old name, and tabsim itself never uses one."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tabsim

PACKAGE = Path(tabsim.__file__).parent
MOVED = tabsim._MOVED  # the package face's own table  # noqa: SLF001


def _python(code: str) -> dict:
    """Run ``code`` in a fresh interpreter (no module imported yet) and return the JSON it prints."""
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_every_old_path_is_the_new_module_with_a_warning_and_old_imports_run():
    got = _python(f"""
        import importlib, json, warnings
        out = {{}}
        for old, new in {MOVED!r}.items():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                mod = importlib.import_module("tabsim." + old)
            out[old] = [mod is importlib.import_module("tabsim." + new),
                        [str(w.message) for w in caught if w.category is DeprecationWarning]]
        warnings.simplefilter("ignore", DeprecationWarning)
        from tabsim.presets import PRESETS
        from tabsim.rng import seed_array
        from tabsim.params import stack_hypers
        import tabsim.envs.bandit as old
        import tabsim.sim.envs.bandit as new
        from tabsim.algos import AlgoSpec
        import tabsim as ts
        out["documented"] = [len(PRESETS) > 0, old is new, old.BanditEnv is new.BanditEnv,
                             AlgoSpec is ts.AlgoSpec, ts.engine is ts.sim.engine,
                             seed_array([3]).tolist() == ts.sim.rng.seed_array([3]).tolist()]
        print(json.dumps(out))
    """)
    assert got.pop("documented") == [True] * 6
    assert set(got) == set(MOVED)
    for old, (same, messages) in got.items():
        assert same, old
        assert messages and f"tabsim.{old} moved to tabsim.{MOVED[old]}" in messages[0], (old, messages)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("name", ["tabsim.nosuch", "tabsim.envs.nosuch", "tabsim.presets.nosuch"])
def test_names_that_never_existed_still_fail(name):
    with pytest.raises(ModuleNotFoundError):
        __import__(name)


def test_tabsim_never_imports_an_old_path():
    old = {f"tabsim.{m}" for m in MOVED}
    found = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            found += [f"{path.relative_to(PACKAGE)}: {n}" for n in names
                      if any(n == o or n.startswith(o + ".") for o in old)]
    assert found == []
