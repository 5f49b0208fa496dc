"""One install line: the README and the quickstart give the same one, and the extras they name exist."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _first_install(path: Path) -> str:
    return next(ln.split("#")[0].strip() for ln in path.read_text().splitlines() if ln.startswith("pip install"))


def test_readme_and_quickstart_install_alike():
    assert _first_install(ROOT / "README.md") == _first_install(ROOT / "docs" / "quickstart.md") == "pip install -e ."


def test_every_extra_the_docs_name_exists():
    with open(ROOT / "pyproject.toml", "rb") as f:
        extras = set(tomllib.load(f)["project"]["optional-dependencies"])
    texts = [ROOT / "README.md", ROOT / "notebooks" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    named = {e for p in texts for group in re.findall(r'\.\[([\w,]+)\]', p.read_text()) for e in group.split(",")}
    assert named and named <= extras, named - extras
    assert {"dask", "notebook", "test"} <= named
