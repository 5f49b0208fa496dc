"""docs/family.md: every preset and configuration it names runs in tabsim (resolves), its count of the rules that
run is the table's, and every preset is on it."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tabsim.config import resolve
from tabsim.config.presets import PRESETS

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "family.md").read_text()
RULE_ROW = re.compile(r"^\| (\d+) \| [^|]+ \| [^|]+ \| (.+) \|$", re.M)
PRESET_CELL = re.compile(r"presets? (`[^`]+`(?:, `[^`]+`)*)")
CONFIG_CELL = re.compile(r"config `(\{[^`]+\})`")


def named_presets(text: str) -> set[str]:
    return {name for m in PRESET_CELL.finditer(text) for name in re.findall(r"`([^`]+)`", m.group(1))}


def test_the_page_parses():
    rows = RULE_ROW.findall(PAGE)
    assert len(rows) >= 80 and len({n for n, _ in rows}) == len(rows)
    assert named_presets(PAGE) and CONFIG_CELL.search(PAGE)


def test_every_named_preset_exists():
    assert named_presets(PAGE) <= set(PRESETS), sorted(named_presets(PAGE) - set(PRESETS))


def test_every_preset_is_on_the_page():
    assert set(PRESETS) - {"paper"} <= named_presets(PAGE), sorted(set(PRESETS) - {"paper"} - named_presets(PAGE))


@pytest.mark.parametrize("snippet", sorted(set(CONFIG_CELL.findall(PAGE))))
def test_every_named_configuration_resolves(snippet):
    resolve(json.loads(snippet))


def test_a_rule_runs_exactly_when_its_cell_names_a_preset_or_a_configuration():
    for n, cell in RULE_ROW.findall(PAGE):
        runs = bool(PRESET_CELL.search(cell) or CONFIG_CELL.search(cell))
        assert runs != cell.startswith("not built"), (n, cell)


def test_the_stated_count_is_the_tables():
    rows = RULE_ROW.findall(PAGE)
    running = sum(not cell.startswith("not built") for _, cell in rows)
    stated = re.search(r"\*\*(\d+) of the (\d+) rules run in tabsim\*\*", PAGE)
    assert stated and (int(stated.group(1)), int(stated.group(2))) == (running, len(rows))
