"""docs/architecture.md: its floors diagram is the import-linter contract, its import table is the
code's, and every floor has its paragraph."""
from __future__ import annotations

import importlib.util
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"


def _script():
    spec = importlib.util.spec_from_file_location("floors_diagram", ROOT / "experiments" / "floors_diagram.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, mod)  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _contract_layers() -> list[str]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        contracts = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c.get("id") == "floors"]
    return [" ".join(layer.split()) for layer in layers]


def test_page_is_generated_from_the_code():
    """The two generated blocks are what the script makes of today's contract and imports."""
    fd = _script()
    text = PAGE.read_text()
    assert fd.render(text, fd.blocks()) == text, "docs/architecture.md is stale: python experiments/floors_diagram.py --write"


def test_the_staleness_check_can_fail():
    fd = _script()
    text = PAGE.read_text()
    stale = text.replace("tabsim.stats | tabsim.plotting", "tabsim.plotting | tabsim.stats", 1)
    assert stale != text and fd.render(stale, fd.blocks()) != stale


def test_the_diagram_lists_the_contract_floors_in_order():
    """Read the page's diagram on its own and compare it with pyproject.toml's layers."""
    block = _script().generated(PAGE.read_text(), "floors")
    rows = re.findall(r"^\s*(\d+)\s{2,}(tabsim\S*(?: [|:] \S+)*)\s*$", block, re.M)
    assert [int(n) for n, _ in rows] == list(range(1, len(rows) + 1))
    assert [line for _, line in rows] == _contract_layers()


def test_every_import_in_the_table_goes_down():
    """Each import the table lists goes to a lower floor, or within a ':' floor; never up or across '|'."""
    fd = _script()
    floors = fd.contract_floors()
    floor_of = {m: i for i, f in enumerate(floors) for m in f.modules}
    independent = {i for i, f in enumerate(floors) if f.independent}
    bad = []
    for m, (eager, lazy) in fd.imports(floors).items():
        for t in eager + lazy:
            if t == "tabsim":
                continue  # the root package: its __init__ imports no floor
            a, b = floor_of[m], floor_of[t]
            if b < a or (a == b and a in independent):
                bad.append(f"{m} -> {t}")
    assert not bad, bad


def test_every_floor_has_its_paragraph():
    text = PAGE.read_text()
    for i, floor in enumerate(_script().contract_floors(), 1):
        m = re.search(rf"^### {i}\. (.*)$", text, re.M)
        assert m, f"no section '### {i}.' for floor {floor.line}"
        named = {w.removeprefix("tabsim.") for w in re.findall(r"`([\w.]+)`", m.group(1))}
        assert {mod.removeprefix("tabsim.") for mod in floor.modules} <= named, (i, m.group(1))
