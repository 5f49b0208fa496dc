"""The safe loaders: a dependency's own limits are reported in tabsim's words."""
from __future__ import annotations

import pytest
import yaml

from tabsim.files import safeload
from tabsim.files.safeload import LoadError, load_yaml


def test_pyyaml_nesting_limit_is_reported_as_too_deep(tmp_path, monkeypatch):
    """PyYAML 6.0.4 refuses more than 1000 nested levels itself ("exceeded maximum nesting depth");
    whichever limit fires first, the message says the file is nested too deep."""
    path = tmp_path / "deep.yaml"
    path.write_text("a: 1\n")

    def limited(*args, **kwargs):
        raise yaml.scanner.ScannerError("while increasing flow level", None, "exceeded maximum nesting depth", None)
        yield  # a generator, like yaml.parse

    monkeypatch.setattr(safeload.yaml, "parse", limited)
    with pytest.raises(LoadError, match="nested too deep"):
        load_yaml(path)


def test_deep_flow_lists_are_refused_as_too_deep(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("a: " + "[" * 1200 + "]" * 1200 + "\n")
    with pytest.raises(LoadError, match="nested too deep"):
        load_yaml(path)
