"""Input format for published results: YAML or CSV files of per-run accuracies, validated at the edge.

A file holds one source (a paper table or figure) and its entries, one per model x benchmark. Every
entry declares its item count, the samples per item (``greedy`` or ``avg@k``), whether its numbers
are absolute accuracies or gains over the base, and the arms it reports. All problems of all files
are collected and raised together as one :class:`AuditInputError`, each message naming the file,
the entry and the field. See ``docs/audit.md`` for the format with examples.
"""
from __future__ import annotations

import csv
import dataclasses
import io
import math
import re
from pathlib import Path
from typing import Any, Optional

from tabsim.files.safeload import LoadError, load_yaml, read_text

# Arms an entry may report. The first four make the partition; the rest are reported as gains.
PARTITION_ARMS = ("frozen", "random", "majority", "true")
EXTRA_ARMS = ("format", "incorrect", "self_certainty", "entropy")
ARMS = PARTITION_ARMS + EXTRA_ARMS
ARM_ALIASES = {"base": "frozen"}
VALUE_MODES = ("absolute", "gains")
MAJORITY_KINDS = ("online", "offline")
# k values whose base-model pass@k / maj@k the simulator calibration can match (exact metrics).
PASS_K = (2, 4, 8, 16, 32, 64)
MAJ_K = (4, 8)

SOURCE_FIELDS = ("id", "paper", "authors", "arxiv", "version", "table", "url", "notes")
SOURCE_REQUIRED = ("id", "paper", "table")
ENTRY_FIELDS = ("model", "benchmark", "n_items", "samples_per_item", "values", "majority_kind", "gamma",
                "arms", "other", "base_pass_at_k", "base_maj_at_k", "notes", "source")
DEFAULT_FIELDS = ("benchmark", "n_items", "samples_per_item", "values", "majority_kind", "gamma", "notes")
TOP_FIELDS = ("source", "defaults", "entries")
_ID = re.compile(r"^[A-Za-z0-9_.-]+$")
# The largest evaluation sets hold about 10^5 - 10^6 items; 10^7 is beyond any real benchmark, so a
# larger count is a typo (or a token count) and would make every interval look impossibly precise.
MAX_ITEMS = 10_000_000
MAX_SAMPLES = 1_000_000  # samples per item (avg@k)
MAX_BYTES = 4 << 20  # a published table is a few KiB
# A value in (0, 1) beside values above 1 is read as a fraction mixed with percentages when 100x it is
# within this factor of the entry's other values (a real 0.8% base beside a 12.3% arm is kept).
FRACTION_FACTOR = 3.0
_AVG = re.compile(r"^avg@(\d+)$")


class AuditInputError(ValueError):
    """One or more published-result files are malformed; ``problems`` lists every message."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("invalid audit input:\n  " + "\n  ".join(self.problems))


@dataclasses.dataclass(frozen=True)
class ArmValue:
    """One arm's accuracy in percent: the reported value (mean over seeds) and per-seed values."""

    mean: float
    seeds: Optional[tuple] = None

    @property
    def n_seeds(self) -> int:
        return len(self.seeds) if self.seeds else 1


@dataclasses.dataclass(frozen=True)
class Entry:
    """One model x benchmark of one source, with absolute accuracies in percent."""

    file: str
    label: str
    source: dict
    model: str
    benchmark: str
    n_items: int
    samples_per_item: int
    decoding: str
    values: str
    majority_kind: Optional[str]
    gamma: Optional[float]
    arms: dict
    other: dict
    base_pass_at_k: dict
    base_maj_at_k: dict
    notes: str = ""

    @property
    def key(self) -> tuple:
        return (self.source["id"], self.model, self.benchmark)

    @property
    def n_eff(self) -> int:
        """Bernoulli trials behind each accuracy: ``n_items x samples_per_item``."""
        return self.n_items * self.samples_per_item

    @property
    def missing(self) -> tuple:
        return tuple(a for a in PARTITION_ARMS if a not in self.arms)


class _Problems:
    def __init__(self):
        self.items: list[str] = []

    def add(self, where: str, msg: str):
        self.items.append(f"{where}: {msg}")


def _number(value, where: str, field: str, probs: _Problems) -> Optional[float]:
    if isinstance(value, bool) or value is None:
        probs.add(where, f"{field}: expected a number, got {value!r}")
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            probs.add(where, f"{field}: expected a number, got {value!r}")
            return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        probs.add(where, f"{field}: expected a number, got {value!r}")
        return None
    if not math.isfinite(out):
        probs.add(where, f"{field}: must be finite, got {value!r}")
        return None
    return out


def _signed(value) -> bool:
    """A value written with an explicit sign (``"+21.4"``) is a gain over base."""
    return isinstance(value, str) and value.strip()[:1] in "+-"


def _parse_samples(value, where: str, probs: _Problems):
    if value is None:
        probs.add(where, "samples_per_item: missing; allowed: 'greedy', 'avg@k' (k >= 1) or an integer >= 1")
        return None, None
    k = None
    if isinstance(value, str):
        s = value.strip().lower()
        if s == "greedy":
            return 1, "greedy"
        m = _AVG.match(s)
        k = int(m.group(1)) if m else None
    elif isinstance(value, int) and not isinstance(value, bool):
        k = value
    if k is not None and k > MAX_SAMPLES:
        probs.add(where, f"samples_per_item: {value!r} is more samples per item than any evaluation draws; "
                         f"at most avg@{MAX_SAMPLES}")
        return None, None
    if k is not None and k >= 1:
        return k, "greedy" if k == 1 else f"avg@{k}"
    probs.add(where, f"samples_per_item: {value!r} is not allowed; allowed: 'greedy', 'avg@k' (k >= 1) "
                     "or an integer >= 1")
    return None, None


def _parse_int(value, where, field, probs, minimum=1):
    if value is None or (isinstance(value, str) and not value.strip()):
        probs.add(where, f"{field}: missing; an integer >= {minimum} is required")
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            probs.add(where, f"{field}: expected an integer >= {minimum}, got {value!r}")
            return None
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or value != int(value) or value < minimum):
        probs.add(where, f"{field}: expected an integer >= {minimum}, got {value!r}")
        return None
    return int(value)


def _parse_arm_raw(raw, where, field, probs):
    """A scalar (single run) or a list (per-seed values) -> (values, signed flag)."""
    if isinstance(raw, (list, tuple)):
        if len(raw) < 2:
            probs.add(where, f"{field}: per-seed values need at least 2 seeds, got {len(raw)}")
            return None, False
        vals = [_number(x, where, f"{field}[{i}]", probs) for i, x in enumerate(raw)]
        if any(v is None for v in vals):
            return None, False
        return vals, any(_signed(x) for x in raw)
    if isinstance(raw, dict):
        probs.add(where, f"{field}: expected a number or a list of per-seed numbers, got a mapping {raw!r}")
        return None, False
    v = _number(raw, where, field, probs)
    return (None if v is None else [v]), _signed(raw)


def _check_range(value, where, field, probs, hint="") -> bool:
    if not 0.0 <= value <= 100.0:
        probs.add(where, f"{field}: accuracy {value:g} is outside [0, 100] (percent){hint}")
        return False
    return True


def _build_entry(data: dict, source: dict, file: str, where: str, probs: _Problems) -> Optional[Entry]:
    n0 = len(probs.items)
    unknown = [k for k in data if k not in ENTRY_FIELDS]
    if unknown:
        probs.add(where, f"unknown field(s) {unknown}; allowed: {', '.join(ENTRY_FIELDS)}")
    model, bench = data.get("model"), data.get("benchmark")
    for name, val in (("model", model), ("benchmark", bench)):
        if not isinstance(val, str) or not val.strip():
            probs.add(where, f"{name}: missing or empty; a non-empty string is required")
    n_items = _parse_int(data.get("n_items"), where, "n_items", probs)
    if n_items is not None and n_items > MAX_ITEMS:
        probs.add(where, f"n_items: {n_items:g} items is more than any benchmark holds (the largest evaluation "
                         f"sets have about 10^5 - 10^6 items); at most {MAX_ITEMS} (10^7)")
        n_items = None
    spi, decoding = _parse_samples(data.get("samples_per_item"), where, probs)
    mode = data.get("values")
    if mode not in VALUE_MODES:
        probs.add(where, f"values: {mode!r} is not allowed; declare 'absolute' (accuracies) or 'gains' "
                         "(points over the base)")
        mode = None
    mk = data.get("majority_kind")
    if isinstance(mk, str) and not mk.strip():
        mk = None
    if mk is not None and mk not in MAJORITY_KINDS:
        probs.add(where, f"majority_kind: {mk!r} is not allowed; allowed: {', '.join(MAJORITY_KINDS)}")
        mk = None
    gamma = data.get("gamma")
    if isinstance(gamma, str) and not gamma.strip():
        gamma = None
    if gamma is not None:
        gamma = _number(gamma, where, "gamma", probs)
        if gamma is not None and not 0.0 <= gamma <= 1.0:
            probs.add(where, f"gamma: {gamma:g} is outside [0, 1] (the random arm's reward probability)")

    raw_arms = data.get("arms")
    if not isinstance(raw_arms, dict) or not raw_arms:
        probs.add(where, f"arms: missing or empty; a mapping arm -> accuracy is required, arms: {', '.join(ARMS)}")
        raw_arms = {}
    canon: dict[str, Any] = {}
    for name, raw in raw_arms.items():
        arm = ARM_ALIASES.get(name, name)
        if arm not in ARMS:
            probs.add(where, f"arms.{name}: unknown arm; allowed: {', '.join(ARMS)} (alias base = frozen; "
                             "other results go under 'other')")
            continue
        if arm in canon:
            probs.add(where, f"arms.{name}: arm {arm!r} given twice ({canon[arm][0]!r} and {name!r})")
            continue
        canon[arm] = (name, raw)
    if raw_arms and "frozen" not in canon:
        probs.add(where, "arms.frozen: missing; every entry needs the base (frozen) accuracy, the partition's origin")
    if "majority" in canon and mk is None and data.get("majority_kind") is None:
        probs.add(where, "majority_kind: missing; an entry with a majority arm must record 'online' (group "
                         "plurality, TTRL-style) or 'offline' (label fixed from base samples)")
    if "random" in canon and gamma is None and data.get("gamma") is None:
        probs.add(where, "gamma: missing; an entry with a random arm must record its reward probability in [0, 1]")

    arms: dict[str, ArmValue] = {}
    base = None
    if "frozen" in canon:
        name, raw = canon["frozen"]
        vals, signed = _parse_arm_raw(raw, where, f"arms.{name}", probs)
        if vals is not None:
            if signed:
                probs.add(where, f"arms.{name}: the base is written as a signed gain ({raw!r}); the base is "
                                 "always an absolute accuracy")
            elif all(_check_range(v, where, f"arms.{name}", probs) for v in vals):
                base = sum(vals) / len(vals)
                arms["frozen"] = ArmValue(base, tuple(vals) if len(vals) > 1 else None)
    for arm, (name, raw) in canon.items():
        if arm == "frozen":
            continue
        vals, signed = _parse_arm_raw(raw, where, f"arms.{name}", probs)
        if vals is None or mode is None:
            continue
        if mode == "absolute" and signed:
            probs.add(where, f"arms.{name}: {raw!r} is written as a signed gain but the entry declares "
                             "values: absolute; gains and absolutes are mixed inconsistently")
            continue
        if mode == "gains":
            if base is None:
                continue
            hint = f" (base {base:g} + gain)"
            absv = [base + v for v in vals]
            if not all(_check_range(a, where, f"arms.{name}", probs, hint) for a in absv):
                continue
        else:
            hint = " (declare values: gains if these are gains over the base)" if any(v < 0 for v in vals) else ""
            absv = vals
            if not all(_check_range(a, where, f"arms.{name}", probs, hint) for a in absv):
                continue
        arms[arm] = ArmValue(sum(absv) / len(absv), tuple(absv) if len(absv) > 1 else None)

    other = {}
    raw_other = data.get("other") or {}
    if not isinstance(raw_other, dict):
        probs.add(where, f"other: expected a mapping name -> accuracy, got {raw_other!r}")
        raw_other = {}
    for name, raw in raw_other.items():
        if ARM_ALIASES.get(name, name) in ARMS:
            probs.add(where, f"other.{name}: {name!r} is an arm; give it under 'arms'")
            continue
        v = _number(raw, where, f"other.{name}", probs)
        if v is None or mode is None:
            continue
        if mode == "absolute" and _signed(raw):
            probs.add(where, f"other.{name}: {raw!r} is written as a signed gain but the entry declares "
                             "values: absolute; gains and absolutes are mixed inconsistently")
            continue
        a = v + (base or 0.0) if mode == "gains" else v
        if mode == "gains" and base is None:
            continue
        if _check_range(a, where, f"other.{name}", probs):
            other[str(name)] = a

    ks = {}
    for field, allowed in (("base_pass_at_k", PASS_K), ("base_maj_at_k", MAJ_K)):
        raw = data.get(field) or {}
        ks[field] = {}
        if not isinstance(raw, dict):
            probs.add(where, f"{field}: expected a mapping k -> accuracy of the base model, got {raw!r}")
            continue
        for k, val in raw.items():
            try:
                k_int = int(k)
            except (TypeError, ValueError):
                k_int = None
            if k_int not in allowed:
                probs.add(where, f"{field}.{k}: k={k!r} is not supported; allowed k: {list(allowed)}")
                continue
            v = _number(val, where, f"{field}.{k}", probs)
            if v is not None and _check_range(v, where, f"{field}.{k}", probs):
                ks[field][k_int] = v
    _check_fractions(arms, other if mode == "absolute" else {}, where, probs)
    if len(probs.items) > n0:
        return None
    return Entry(file=file, label=where, source=source, model=model.strip(), benchmark=bench.strip(),
                 n_items=n_items, samples_per_item=spi, decoding=decoding, values=mode, majority_kind=mk,
                 gamma=gamma, arms=arms, other=other, base_pass_at_k=ks["base_pass_at_k"],
                 base_maj_at_k=ks["base_maj_at_k"], notes=str(data.get("notes") or ""))


def _check_fractions(arms: dict, other: dict, where: str, probs: _Problems) -> None:
    """Refuse a base written as a fraction (0.494) beside arms in percent (55.2), or the reverse.

    The base is compared with the median of the entry's other accuracies (absolute, in percent): it is
    taken for a fraction when it is in (0, 1), every other value is above 1 and 100x the base is within
    ``FRACTION_FACTOR`` of their median. A real 0.8% base beside a 12.3% arm, or one arm collapsed to
    0.5%, is kept.
    """
    if "frozen" not in arms:
        return
    base = arms["frozen"].mean
    rest = sorted([v.mean for a, v in arms.items() if a != "frozen"] + list(other.values()))
    if not rest:
        return
    mid = rest[len(rest) // 2] if len(rest) % 2 else 0.5 * (rest[len(rest) // 2 - 1] + rest[len(rest) // 2])

    def close(a, b):
        return b / FRACTION_FACTOR <= a <= b * FRACTION_FACTOR

    if 0.0 < base < 1.0 and all(v > 1.0 for v in rest) and close(100.0 * base, mid):
        probs.add(where, f"arms.frozen: the base {base:g} looks like a fraction beside arms in percent (median "
                         f"{mid:g}); write every value in percent ({100.0 * base:g}), not as a fraction")
    elif base > 1.0 and all(0.0 < v < 1.0 for v in rest) and close(100.0 * mid, base):
        probs.add(where, f"arms: the arms ({', '.join(f'{v:g}' for v in rest)}) look like fractions beside a base "
                         f"in percent ({base:g}); write every value in percent, not as a fraction")


def _check_source(src, where, probs: _Problems) -> Optional[dict]:
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
    return f"{file}: {kind} {i} (model={model!r}, benchmark={bench!r})"


def _parse_yaml(path: Path, probs: _Problems) -> list[Entry]:
    file = str(path)
    try:  # no booleans: an arm named true stays the string "true"
        doc = load_yaml(path, schema="nobool", max_bytes=MAX_BYTES, what="audit file")
    except LoadError as err:
        hint = " (an arm given twice?)" if "given twice" in err.problem else ""
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
    out = []
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
        e = _build_entry({k: v for k, v in data.items() if k != "source"}, src or {}, file, where, probs)
        if e is not None and src is not None:
            out.append(e)
    return out


CSV_SOURCE_COLUMNS = {"source_id": "id", "paper": "paper", "authors": "authors", "arxiv": "arxiv",
                      "version": "version", "table": "table", "url": "url", "source_notes": "notes"}
CSV_ENTRY_COLUMNS = ("model", "benchmark", "n_items", "samples_per_item", "values", "majority_kind", "gamma",
                     "notes")
CSV_REQUIRED = ("source_id", "paper", "table", "model", "benchmark", "n_items", "samples_per_item", "values")


def _parse_csv(path: Path, probs: _Problems) -> list[Entry]:
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
        arm = ARM_ALIASES.get(h, h)
        if arm in ARMS:
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
    out = []
    for i, row in zip(line_nos[1:], rows[1:]):
        row = row + [""] * (len(header) - len(row))
        if len(row) > len(header):
            probs.add(f"{file}: line {i}", f"{len(row)} cells but {len(header)} columns")
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
            if v:
                arms[header[j]] = [s for s in v.split(";")] if ";" in v else v
        data["arms"] = arms
        data["other"] = {h[len("other_"):]: cell[h] for h in seen if h.startswith("other_") and cell[h]}
        data["base_pass_at_k"] = {h[len("base_pass_at_"):]: cell[h] for h in seen
                                  if h.startswith("base_pass_at_") and cell[h]}
        data["base_maj_at_k"] = {h[len("base_maj_at_"):]: cell[h] for h in seen
                                 if h.startswith("base_maj_at_") and cell[h]}
        e = _build_entry(data, source or {}, file, where, probs)
        if e is not None and source is not None:
            out.append(e)
    return out


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
    probs = _Problems()
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
                               f"{e.benchmark!r} is also {first[e.key]}")
        else:
            first[e.key] = e.label
    if probs.items:
        raise AuditInputError(probs.items)
    return entries
