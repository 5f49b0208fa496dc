"""Input format for published results: YAML or CSV files of per-run accuracies, validated at the edge.

A file holds one source (a paper table or figure) and its entries, one per model x benchmark (x
training set). Every entry declares its protocol (``greedy``, ``avg@k``, ``pass@k``), whether its
numbers are absolute accuracies or gains over the base (or lets the signs of its cells say), and the
arms it reports; a benchmark of the registry (:mod:`tabsim.audit.benchmarks`) fills its item count.
The table's scale (percent or fraction) is declared, or inferred when the numbers leave no doubt.
All problems of all files are collected and raised together as one :class:`AuditInputError`, each
message naming the file, the entry and the field. See ``docs/audit.md`` for the format with examples.
"""
from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any, Optional

from tabsim.audit import notation as nt
from tabsim.audit.entry import (ARM_ALIASES, ARMS, EXTRA_ARMS, MAJ_K, MAJORITY_KINDS, PARTITION_ARMS,
                                PASS_K, VALUE_MODES, ArmValue, AuditInputError, Entry, Problems, absolute_cells,
                                build_entry, canonical_arm)
from tabsim.files.safeload import LoadError, load_yaml, read_text

__all__ = ["ARMS", "ARM_ALIASES", "EXTRA_ARMS", "MAJ_K", "MAJORITY_KINDS", "PARTITION_ARMS", "PASS_K", "VALUE_MODES",
           "ArmValue", "AuditInputError", "Entry", "load_entries"]

SOURCE_FIELDS = ("id", "paper", "authors", "arxiv", "version", "table", "url", "notes")
SOURCE_REQUIRED = ("id", "paper", "table")
DEFAULT_FIELDS = ("benchmark", "train_set", "n_items", "n_items_override", "samples_per_item", "values", "scale",
                  "majority_kind", "gamma", "notes")
TOP_FIELDS = ("source", "defaults", "entries")
_ID = re.compile(r"^[A-Za-z0-9_.-]+$")
MAX_BYTES = 4 << 20  # a published table is a few KiB


def _table_scale(datas: list, where: str, probs: Problems) -> dict:
    """Scale of each entry: declared, else the table's (inferred over its undeclared entries)."""
    declared = {}
    for i, d in enumerate(datas):
        s, err = nt.check_scale(d.get("scale"), where)
        if err:
            probs.items.append(err)
        declared[i] = s
    values, pct = [], False
    for i, d in enumerate(datas):
        if declared[i] is None and d.get("scale") in (None, ""):
            v, p = absolute_cells(d)
            values += v
            pct |= p
    inferred, _ = nt.infer_scale(values, pct)
    return {i: declared[i] or (inferred if datas[i].get("scale") in (None, "") else None) for i in range(len(datas))}


def _check_source(src, where, probs: Problems) -> Optional[dict]:
    if not isinstance(src, dict):
        probs.add(where, f"source: missing or not a mapping; required fields: {', '.join(SOURCE_REQUIRED)}")
        return None
    bad = [k for k in src if k not in SOURCE_FIELDS]
    if bad:
        probs.add(where, f"source: unknown field(s) {bad}; allowed: {', '.join(SOURCE_FIELDS)}")
    ok = True
    for k in SOURCE_REQUIRED:
        if src.get(k) in (None, ""):
            probs.add(where, f"source.{k}: missing; required source fields: {', '.join(SOURCE_REQUIRED)}")
            ok = False
    if src.get("id") not in (None, "") and not _ID.match(str(src["id"])):
        probs.add(where, f"source.id: {src['id']!r} must match [A-Za-z0-9_.-]+")
        ok = False
    return {k: ("" if src.get(k) is None else str(src.get(k))) for k in SOURCE_FIELDS} if ok else None


def _label(file: str, kind: str, i: int, data) -> str:
    model = data.get("model") if isinstance(data, dict) else None
    bench = data.get("benchmark") if isinstance(data, dict) else None
    train = data.get("train_set") if isinstance(data, dict) else None
    extra = f", train_set={train!r}" if train not in (None, "") else ""
    return f"{file}: {kind} {i} (model={model!r}, benchmark={bench!r}{extra})"


def _build_all(items: list, file: str, probs: Problems) -> list[Entry]:
    """``items``: (data, source, where) of one file; the table's scale is resolved across them."""
    scales = _table_scale([d for d, _, _ in items], file, probs)
    out = []
    for i, (data, src, where) in enumerate(items):
        e = build_entry(data, src or {}, file, where, probs, scale=scales[i])
        if e is not None and src is not None:
            out.append(e)
    return out


def _parse_yaml(path: Path, probs: Problems) -> list[Entry]:
    file = str(path)
    try:  # no booleans (an arm named true stays "true"); numbers keep their text (an unquoted +58.8 is a gain)
        doc = load_yaml(path, schema="written", max_bytes=MAX_BYTES, what="audit file")
    except LoadError as err:
        hint = " (an arm given twice?)" if "given twice" in err.problem else ""
        if "block sequence entries are not allowed" in err.problem:
            hint = " (a bare - for a missing cell? write it quoted, '-', or leave the arm out)"
        probs.items.append(f"{err}{hint}")
        return []
    if not isinstance(doc, dict):
        probs.add(file, f"expected a mapping with keys {', '.join(TOP_FIELDS)}, got {type(doc).__name__}")
        return []
    bad = [k for k in doc if k not in TOP_FIELDS]
    if bad:
        probs.add(file, f"unknown top-level key(s) {bad}; allowed: {', '.join(TOP_FIELDS)}")
    source = _check_source(doc.get("source"), file, probs)
    defaults = doc.get("defaults") or {}
    if not isinstance(defaults, dict):
        probs.add(file, f"defaults: expected a mapping, got {defaults!r}")
        defaults = {}
    bad = [k for k in defaults if k not in DEFAULT_FIELDS]
    if bad:
        probs.add(file, f"defaults: unknown field(s) {bad}; allowed: {', '.join(DEFAULT_FIELDS)}")
    entries = doc.get("entries")
    if not isinstance(entries, list) or not entries:
        probs.add(file, "entries: missing or empty; a list of entries (one per model x benchmark) is required")
        return []
    items = []
    for i, raw in enumerate(entries, start=1):
        if not isinstance(raw, dict):
            probs.add(f"{file}: entry {i}", f"expected a mapping, got {raw!r}")
            continue
        data = {**{k: v for k, v in defaults.items() if k in DEFAULT_FIELDS}, **raw}
        where = _label(file, "entry", i, data)
        src = source
        if raw.get("source") is not None:
            src = _check_source({**(doc.get("source") or {}), **raw["source"]}, where, probs) \
                if isinstance(raw["source"], dict) else _check_source(raw["source"], where, probs)
        if isinstance(data.get("n_items"), str):  # a CSV's cells are text; a YAML file can write numbers
            probs.add(where, f"n_items: {data['n_items']!r} is a string; strings are not counts: write the number "
                             "unquoted (an integer >= 2)")
            continue
        items.append(({k: v for k, v in data.items() if k != "source"}, src, where))
    return _build_all(items, file, probs)


CSV_SOURCE_COLUMNS = {"source_id": "id", "paper": "paper", "authors": "authors", "arxiv": "arxiv",
                      "version": "version", "table": "table", "url": "url", "source_notes": "notes"}
CSV_ENTRY_COLUMNS = ("model", "benchmark", "train_set", "n_items", "n_items_override", "samples_per_item", "values",
                     "scale", "majority_kind", "gamma", "known_base", "per_item", "notes")
CSV_REQUIRED = ("source_id", "paper", "table", "model", "benchmark", "samples_per_item")


def _parse_csv(path: Path, probs: Problems) -> list[Entry]:
    file = str(path)
    # comment lines are blanked (not removed) so that messages give the file's own line numbers
    try:
        text = read_text(path, max_bytes=MAX_BYTES, what="audit file")
    except LoadError as err:
        probs.items.append(str(err))
        return []
    lines = ["" if ln.lstrip().startswith("#") else ln for ln in text.splitlines()]
    reader = csv.reader(io.StringIO("\n".join(lines)))
    rows, line_nos = [], []
    try:
        for r in reader:
            if any(c.strip() for c in r):
                rows.append(r)
                line_nos.append(reader.line_num)
    except csv.Error as err:
        probs.add(f"{file}: line {reader.line_num + 1}", f"malformed CSV: {err}")
        return []
    if not rows:
        probs.add(file, "empty CSV; expected a header row and one row per model x benchmark")
        return []
    header = [h.strip() for h in rows[0]]
    seen, arm_cols = {}, {}
    ok = True
    for j, h in enumerate(header):
        if h in seen:
            probs.add(file, f"column {h!r} given twice (columns {seen[h] + 1} and {j + 1})")
            ok = False
        seen[h] = j
        arm = canonical_arm(h) if h not in CSV_ENTRY_COLUMNS and h not in CSV_SOURCE_COLUMNS else None
        if arm is not None:
            if arm in arm_cols:
                probs.add(file, f"column {h!r}: arm {arm!r} given twice (columns {header[arm_cols[arm]]!r} "
                                f"and {h!r})")
                ok = False
            arm_cols[arm] = j
        elif h not in CSV_SOURCE_COLUMNS and h not in CSV_ENTRY_COLUMNS and not h.startswith("other_") \
                and not h.startswith("base_pass_at_") and not h.startswith("base_maj_at_"):
            probs.add(file, f"column {h!r}: unknown column (unknown arm?); arms: {', '.join(ARMS)} (alias base); "
                            f"other columns: {', '.join(list(CSV_SOURCE_COLUMNS) + list(CSV_ENTRY_COLUMNS))}, "
                            "other_<name>, base_pass_at_<k>, base_maj_at_<k>")
            ok = False
    missing = [c for c in CSV_REQUIRED if c not in seen]
    if missing:
        probs.add(file, f"missing required column(s) {missing}")
        ok = False
    if not ok:
        return []
    if len(rows) == 1:
        probs.add(file, "a header row and no data rows; expected one row per model x benchmark under the header")
        return []
    items = []
    for i, row in zip(line_nos[1:], rows[1:]):
        if len(row) != len(header):  # a missing cell would shift nothing but leave a column empty unseen
            probs.add(f"{file}: line {i}", f"{len(row)} cells but {len(header)} columns; every row has one cell per "
                                           "column (an empty cell is written as nothing between two commas)")
            continue
        cell = {h: row[j].strip() for h, j in seen.items()}
        src = {v: cell.get(k, "") for k, v in CSV_SOURCE_COLUMNS.items()}
        data: dict[str, Any] = {k: (cell[k] if cell.get(k, "") != "" else None) for k in CSV_ENTRY_COLUMNS
                                if k in cell}
        where = _label(file, "line", i, data)
        source = _check_source(src, where, probs)
        arms = {}
        for arm, j in arm_cols.items():
            v = row[j].strip()
            arms[header[j]] = [s for s in v.split(";")] if ";" in v else v
        data["arms"] = arms
        data["other"] = {h[len("other_"):]: cell[h] for h in seen if h.startswith("other_") and cell[h]}
        data["base_pass_at_k"] = {h[len("base_pass_at_"):]: cell[h] for h in seen
                                  if h.startswith("base_pass_at_") and cell[h]}
        data["base_maj_at_k"] = {h[len("base_maj_at_"):]: cell[h] for h in seen
                                 if h.startswith("base_maj_at_") and cell[h]}
        items.append((data, source, where))
    return _build_all(items, file, probs)


def load_entries(paths) -> list[Entry]:
    """Read and validate published-result files (``.yaml``/``.yml`` or ``.csv``).

    Args:
      paths: one path or a sequence of paths; a folder stands for its ``.yaml``/``.yml``/``.csv`` files.

    Returns:
      list of :class:`Entry`, in file order.

    Raises:
      AuditInputError: listing every problem (file, entry, field, bad value, allowed values).
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    probs = Problems()
    entries: list[Entry] = []
    if not paths:
        probs.add("input", "no files given")
    expanded = []
    for p in paths:
        path = Path(p)
        if path.is_dir():  # a folder stands for its .yaml / .yml / .csv files, in name order
            found = sorted(q for q in path.iterdir() if q.is_file() and q.suffix.lower() in (".yaml", ".yml", ".csv"))
            if not found:
                probs.add(str(path), "folder holds no .yaml, .yml or .csv file")
            expanded += found
        else:
            expanded.append(path)
    for path in expanded:
        if not path.is_file():
            probs.add(str(path), "file not found")
            continue
        if path.suffix.lower() in (".yaml", ".yml"):
            entries += _parse_yaml(path, probs)
        elif path.suffix.lower() == ".csv":
            entries += _parse_csv(path, probs)
        else:
            probs.add(str(path), f"unknown file type {path.suffix!r}; allowed: .yaml, .yml, .csv")
    first: dict[tuple, str] = {}
    for e in entries:
        if e.key in first:
            probs.add(e.label, f"entry given twice: source {e.key[0]!r}, model {e.model!r}, benchmark "
                               f"{e.benchmark!r}{f', train_set {e.train_set!r}' if e.train_set else ''} is also {first[e.key]} "
                               "(give each table of a paper its train_set)")
        else:
            first[e.key] = e.label
    if not entries and not probs.items:
        probs.add("input", "no entries; expected at least one model x benchmark")
    if probs.items:
        raise AuditInputError(probs.items)
    return entries
