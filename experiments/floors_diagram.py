"""The package's floors, drawn from its import-linter contract, and who imports whom, read from the code.

    python experiments/floors_diagram.py            # print the two generated blocks of docs/architecture.md
    python experiments/floors_diagram.py --write    # rewrite them in docs/architecture.md
    python experiments/floors_diagram.py --check    # exit 1 (with a diff) if the page is out of date

* The floors diagram is the ``layers`` list of the ``floors`` contract in ``pyproject.toml``
  (``[tool.importlinter]``), top floor first.
* The table lists, for each top-level module or package of ``tabsim``, the others it imports, read
  by grimp from every import statement (those inside functions included), split into imports at
  module level and imports made only inside functions.

``tests/docs/test_architecture.py`` compares the page with this output, and checks the page's
diagram against the contract and the table's edges against the floors on its own.
"""
from __future__ import annotations

import argparse
import ast
import difflib
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
PACKAGE = "tabsim"
BLOCKS = ("floors", "imports")


@dataclass(frozen=True)
class Floor:
    modules: tuple[str, ...]
    independent: bool  # "a | b": neither imports the other; "a : b": they may import each other (no cycle)

    @property
    def line(self) -> str:
        return (" | " if self.independent else " : ").join(self.modules)


def contract_floors(pyproject: Path = ROOT / "pyproject.toml") -> list[Floor]:
    """The floors of the ``layers`` contract with id ``floors``, top first."""
    with open(pyproject, "rb") as f:
        contracts = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c.get("id") == "floors"]
    out = []
    for layer in layers:
        independent = "|" in layer
        if independent and ":" in layer:
            raise ValueError(f"floor {layer!r} mixes '|' and ':'")
        out.append(Floor(tuple(m.strip() for m in re.split(r"[|:]", layer)), independent))
    return out


def diagram(floors: list[Floor]) -> str:
    """The floors as a fenced text block, top floor first."""
    lines = ["```text", "floor  modules (each imports only floors below it)"]
    for i, floor in enumerate(floors, 1):
        lines.append(f"{i:>3}    {floor.line}")
    lines += ["", "a | b  independent: neither imports the other",
              "a : b  one floor: they may import each other, with no cycle", "```"]
    return "\n".join(lines)


def _source(module: str) -> Path:
    path = ROOT.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def _function_level_lines(path: Path) -> set[int]:
    """Line numbers of the import statements of ``path`` that sit inside a function."""
    lines = set()
    for fn in ast.walk(ast.parse(path.read_text())):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines |= {n.lineno for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))}
    return lines


def _top(module: str) -> str:
    return ".".join(module.split(".")[:2])


def imports(floors: list[Floor], graph=None) -> dict[str, tuple[list[str], list[str]]]:
    """For each top-level module (in floor order): the other top-level modules it imports at module
    level somewhere, and those it imports only inside functions (both in floor order, the root last)."""
    import grimp

    graph = graph or grimp.build_graph(PACKAGE, include_external_packages=False, cache_dir=None)
    order = [m for floor in floors for m in floor.modules]
    rank = {m: i for i, m in enumerate(order)} | {PACKAGE: len(order)}
    lazy_lines: dict[str, set[int]] = {}
    edges: dict[tuple[str, str], bool] = {}  # (importer, imported) top-level -> some import at module level
    for importer in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(importer):
            a, b = _top(importer), _top(imported)
            if a == b or a == PACKAGE:
                continue
            if importer not in lazy_lines:
                lazy_lines[importer] = _function_level_lines(_source(importer))
            details = graph.get_import_details(importer=importer, imported=imported)
            eager = any(d["line_number"] not in lazy_lines[importer] for d in details)
            edges[a, b] = edges.get((a, b), False) or eager
    out = {}
    for m in order:
        targets = sorted((b for a, b in edges if a == m), key=rank.__getitem__)
        out[m] = ([b for b in targets if edges[m, b]], [b for b in targets if not edges[m, b]])
    return out


def imports_table(floors: list[Floor], graph=None) -> str:
    """Who imports whom, as a Markdown table."""
    floor_of = {m: i for i, floor in enumerate(floors, 1) for m in floor.modules}
    rows = ["| floor | module | imports at module level | imports only inside functions |", "|---|---|---|---|"]
    for m, (eager, lazy) in imports(floors, graph).items():
        cells = [", ".join(f"`{t}`" for t in ts) or "-" for ts in (eager, lazy)]
        rows.append(f"| {floor_of[m]} | `{m}` | {cells[0]} | {cells[1]} |")
    return "\n".join(rows)


def blocks(floors: list[Floor] | None = None, graph=None) -> dict[str, str]:
    floors = floors or contract_floors()
    return {"floors": diagram(floors), "imports": imports_table(floors, graph)}


def begin(name: str) -> str:
    return f"<!-- begin generated {name}: python experiments/floors_diagram.py --write -->"


def end(name: str) -> str:
    return f"<!-- end generated {name} -->"


def generated(text: str, name: str) -> str:
    """The block ``name`` of a page: the text between its markers (each followed or preceded by a blank
    line, so that Markdown reads the block apart from the comments)."""
    m = re.search(re.escape(begin(name)) + r"\n\n(.*?)\n\n" + re.escape(end(name)), text, re.S)
    if m is None:
        raise ValueError(f"no generated block {name!r} (markers {begin(name)!r} ... {end(name)!r})")
    return m.group(1)


def render(text: str, new: dict[str, str]) -> str:
    """``text`` with each generated block replaced by ``new[name]``."""
    for name, body in new.items():
        generated(text, name)  # the markers are there
        pattern = re.escape(begin(name)) + r"\n\n.*?\n\n" + re.escape(end(name))
        text = re.sub(pattern, lambda _: f"{begin(name)}\n\n{body}\n\n{end(name)}", text, flags=re.S)
    return text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help=f"rewrite the generated blocks of {PAGE.relative_to(ROOT)}")
    mode.add_argument("--check", action="store_true", help="exit 1 if the page's generated blocks are out of date")
    args = ap.parse_args(argv)
    new = blocks()
    if not (args.write or args.check):
        print("\n\n".join(new[name] for name in BLOCKS))
        return 0
    old = PAGE.read_text()
    text = render(old, new)
    if args.write:
        if text != old:
            PAGE.write_text(text)
        print(f"{PAGE.relative_to(ROOT)}: {'updated' if text != old else 'up to date'}")
        return 0
    if text != old:
        sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True),
                                                   str(PAGE.relative_to(ROOT)), "generated"))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
