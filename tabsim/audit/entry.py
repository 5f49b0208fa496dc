"""One audited row (model x benchmark x training set of a source), validated where it enters.

:func:`build_entry` turns a mapping of raw fields (from a YAML entry or a CSV line, defaults merged)
into an :class:`Entry` with absolute accuracies in percent, or records every problem it finds, each
naming the entry, the field or cell, the bad value and what is allowed. The table-wide parts (its
scale, the source block) are resolved by :mod:`tabsim.audit.schema`, which reads the files.
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Optional

from tabsim.audit import benchmarks as bm
from tabsim.audit import notation as nt
from tabsim.audit.items import read_per_item

# Arms an entry may report. The first four make the partition; the rest are reported as gains.
PARTITION_ARMS = ("frozen", "random", "majority", "true")
EXTRA_ARMS = ("format", "incorrect", "self_certainty", "entropy")
ARMS = PARTITION_ARMS + EXTRA_ARMS
ARM_ALIASES = {"base": "frozen", "before_rl": "frozen", "ground_truth": "true", "majority_vote": "majority"}
VALUE_MODES = ("absolute", "gains")
MAJORITY_KINDS = ("online", "offline")
PROTOCOLS = ("greedy", "avg", "pass")
# k values whose base-model pass@k / maj@k the simulator calibration can match (exact metrics).
PASS_K = (2, 4, 8, 16, 32, 64)
MAJ_K = (4, 8)
ENTRY_FIELDS = ("model", "benchmark", "train_set", "n_items", "n_items_override", "samples_per_item", "values",
                "scale", "majority_kind", "gamma", "arms", "other", "base_pass_at_k", "base_maj_at_k", "known_base",
                "per_item", "notes", "source")
# The largest evaluation sets hold about 10^5 - 10^6 items; 10^7 is beyond any real benchmark, so a
# larger count is a typo (or a token count) and would make every interval look impossibly precise.
MAX_ITEMS = 10_000_000
MIN_ITEMS = 2  # one item gives 0% or 100%: no reported accuracy comes from it
MAX_SAMPLES = 1_000_000  # samples per item (avg@k)
# A cell in (0, 1) beside values above 1 is read as a fraction among percentages when 100x it is
# within this factor of the median of its row's other values (a real 0.8% base beside 12.3% is kept).
FRACTION_FACTOR = 3.0


class AuditInputError(ValueError):
    """One or more published-result files are malformed; ``problems`` lists every message."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("invalid audit input:\n  " + "\n  ".join(self.problems))


class Problems:
    """Every problem of every file, collected so that one run reports them all."""

    def __init__(self):
        self.items: list[str] = []

    def add(self, where: str, msg: str):
        self.items.append(f"{where}: {msg}")


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
    """One model x benchmark (x training set) of one source, with absolute accuracies in percent.

    ``protocol`` is how each item was scored: ``greedy`` (one sample), ``avg`` (avg@k: the mean of k
    samples) or ``pass`` (pass@k: any of k samples correct); ``samples_per_item`` is that k.
    ``per_item`` holds per-item scores of the arms that have them (:mod:`tabsim.audit.items`).
    """

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
    train_set: str = ""
    protocol: str = "greedy"
    scale: str = "percent"
    n_items_from: str = "entry"
    known_base: Optional[float] = None
    per_item: dict = dataclasses.field(default_factory=dict)
    flags: tuple = ()

    @property
    def key(self) -> tuple:
        return (self.source["id"], self.model, self.benchmark, self.train_set)

    @property
    def n_eff(self) -> int:
        """Bernoulli trials behind each accuracy when samples are independent: ``n_items x k`` for avg@k."""
        return self.n_items * (self.samples_per_item if self.protocol == "avg" else 1)

    @property
    def missing(self) -> tuple:
        return tuple(a for a in PARTITION_ARMS if a not in self.arms)


def _text(value) -> str:
    return "" if value is None else str(value)


def parse_int(value, where, field, probs, minimum=1):
    if value is None or (isinstance(value, str) and not value.strip()):
        probs.add(where, f"{field}: missing; an integer >= {minimum} is required")
        return None
    if isinstance(value, str):
        if not value.isascii():  # float() reads full-width and other scripts' digits as numbers
            probs.add(where, f"{field}: {value!r} is not written with ASCII digits 0-9; expected an integer >= "
                             f"{minimum}")
            return None
        try:
            value = float(value.replace(",", "").replace("_", ""))
        except ValueError:
            probs.add(where, f"{field}: expected an integer >= {minimum}, got {value!r}")
            return None
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or value != int(value) or value < minimum):
        probs.add(where, f"{field}: expected an integer >= {minimum}, got {value!r}")
        return None
    return int(value)


def parse_protocol(value, where: str, probs: Problems):
    """``greedy`` | ``avg@k`` | ``pass@k`` (k >= 1) -> ``(k, protocol, label)``."""
    allowed = "allowed: 'greedy', 'avg@k' (mean over k samples per item) or 'pass@k' (any of k samples correct)"
    if value is None or (isinstance(value, str) and not value.strip()):
        probs.add(where, f"samples_per_item: missing; {allowed}")
        return None, None, None
    s = str(value).strip().lower().replace(" ", "")
    if s in ("greedy", "1", "pass@1", "avg@1"):
        return 1, "greedy", "greedy"
    for proto in ("avg", "pass"):
        if s.startswith(proto + "@") and s[len(proto) + 1:].isascii() and s[len(proto) + 1:].isdigit():
            k = int(s[len(proto) + 1:])
            if k > MAX_SAMPLES:
                probs.add(where, f"samples_per_item: {value!r} is more samples per item than any evaluation draws; "
                                 f"at most {proto}@{MAX_SAMPLES}")
                return None, None, None
            if k >= 1:
                return (1, "greedy", "greedy") if k == 1 else (k, proto, f"{proto}@{k}")
    hint = (f" (an integer does not say how the {value} samples were combined: write avg@{value} or pass@{value})"
            if s.isdigit() else "")
    probs.add(where, f"samples_per_item: {value!r} is not allowed{hint}; {allowed}")
    return None, None, None


def protocol_for(value, bench, where: str, probs: Problems):
    """``samples_per_item`` given per benchmark (``{MATH-500: greedy, AMC: avg@8}``): the entry's."""
    if not isinstance(value, dict):
        return value
    want = bm.canonical(bench) if isinstance(bench, str) else None
    for key, proto in value.items():
        if want is not None and bm.canonical(str(key)) == want:
            return proto
    probs.add(where, f"samples_per_item: the mapping gives no protocol for benchmark {bench!r}; it has "
                     f"{', '.join(str(k) for k in value)}")
    return None


def _arm_cells(raw, where, field, probs):
    """A scalar (single run) or a list (per-seed values) -> list of :class:`Cell` (None: missing / bad)."""
    if isinstance(raw, (list, tuple)):
        if len(raw) < 2:
            probs.add(where, f"{field}: per-seed values need at least 2 seeds, got {len(raw)}")
            return None
        cells = [nt.read_cell(x) for x in raw]
        for i, c in enumerate(cells):
            if c.error or c.missing:
                probs.add(where, f"{field}[{i}]: {c.error or 'missing seed value'}")
        return None if any(c.error or c.missing for c in cells) else cells
    if isinstance(raw, dict):
        probs.add(where, f"{field}: expected a number or a list of per-seed numbers, got a mapping {raw!r}")
        return None
    c = nt.read_cell(raw)
    if c.error:
        probs.add(where, f"{field}: {c.error}")
        return None
    return [] if c.missing else [c]


def canonical_arm(name) -> Optional[str]:
    """The arm a key or column names (``base`` -> ``frozen``; ``true (pass@1)`` -> ``true``), else None."""
    head, _ = nt.header_arm(str(name))
    key = head.strip().lower().replace(" ", "_").replace("-", "_")
    arm = ARM_ALIASES.get(key, key)
    return arm if arm in ARMS else None


def absolute_cells(data: dict) -> tuple[list, bool]:
    """The cells of an entry that are absolute accuracies (for the table's scale), and any ``%``."""
    arms = data.get("arms") if isinstance(data.get("arms"), dict) else {}
    cells, pct = [], False
    mode = data.get("values")
    for name, raw in arms.items():
        arm = canonical_arm(name)
        for x in (raw if isinstance(raw, (list, tuple)) else [raw]):
            c = nt.read_cell(x)
            if c.value is None:
                continue
            pct |= c.percent
            if arm == "frozen" or (mode != "gains" and not c.signed):
                cells.append(c.value)
    return cells, pct


def _infer_mode(canon: dict, other: dict, where, probs) -> Optional[str]:
    """``values`` not declared: gains when every non-zero trained cell is signed, absolute when none is."""
    signed, unsigned = [], []
    for name, raw in [(n, r) for a, (n, r) in canon.items() if a != "frozen"] + list(other.items()):
        for x in (raw if isinstance(raw, (list, tuple)) else [raw]):
            c = nt.read_cell(x)
            if c.value is None:
                continue
            (signed if c.signed else unsigned if c.value != 0 else []).append(name)
    if signed and unsigned:
        probs.add(where, f"values: not declared, and the cells mix signed gains ({', '.join(dict.fromkeys(signed))}) "
                         f"with unsigned values ({', '.join(dict.fromkeys(unsigned))}); declare values: gains "
                         "(points over the base) or values: absolute")
        return None
    return "gains" if signed else "absolute"


def _convert(cells, *, arm_name, mode, scale, base, where, probs, is_base=False):
    """Cells of one arm -> absolute percent values (None on a problem)."""
    factor = 100.0 if scale == "fraction" else 1.0
    out = []
    for c in cells:
        if c.percent and scale == "fraction":
            probs.add(where, f"{arm_name}: {c.value:g}% is written in percent but the table declares scale: fraction")
            return None
        if is_base and c.signed:
            probs.add(where, f"{arm_name}: the base is written as a signed gain ({c.value:+g}); the base is always "
                             "an absolute accuracy")
            return None
        if not is_base and mode == "absolute" and c.signed:
            probs.add(where, f"{arm_name}: {c.value:+g} is written as a signed gain but the entry declares values: "
                             "absolute; gains and absolutes are mixed inconsistently (declare values: gains if the "
                             "trained arms are gains over the base, or write absolute accuracies without a sign)")
            return None
        gain = not is_base and mode == "gains"
        v = c.value * factor
        a = base + v if gain else v
        if not 0.0 <= a <= 100.0:
            if scale == "fraction":
                hint = (f" (scale: fraction allows [0, 1]; {c.value:g} looks like a percentage: write "
                        f"{c.value / 100:g})" if c.value > 1 else " (scale: fraction allows [0, 1])")
                probs.add(where, f"{arm_name}: {c.value:g} is outside [0, 1]{hint}")
            else:
                hint = f" (base {base:g} + gain)" if gain else (
                    " (declare values: gains if these are gains over the base)" if v < 0 else "")
                probs.add(where, f"{arm_name}: accuracy {a:g} is outside [0, 100] (percent){hint}")
            return None
        out.append(a)
    return out


def _check_row_scale(cells: dict, where, probs):
    """Refuse a cell about 100 times off the rest of its row (a fraction among percents, or the reverse).

    ``cells`` maps field name -> absolute percent value. A cell in (0, 1) while every other cell is
    above 1 and 100x the cell is within ``FRACTION_FACTOR`` of their median is a fraction typed among
    percents; a cell above 1 while every other cell lies in (0, 1) and the cell is within the factor of
    100x their median is a percent among fractions.
    """
    names = list(cells)
    for name in names:
        v = cells[name]
        rest = sorted(cells[n] for n in names if n != name)
        if not rest:
            continue
        mid = rest[len(rest) // 2] if len(rest) % 2 else 0.5 * (rest[len(rest) // 2 - 1] + rest[len(rest) // 2])
        if 0.0 < v < 1.0 and all(x > 1.0 for x in rest) and mid / FRACTION_FACTOR <= 100 * v <= mid * FRACTION_FACTOR:
            probs.add(where, f"{name}: {v:g} is about 100 times smaller than the rest of its row (median {mid:g}): a "
                             f"fraction among percentages? write {100 * v:g}, or declare scale: fraction for a "
                             "table of fractions")
        elif (v > 1.0 and len(rest) > 1 and all(0.0 < x < 1.0 for x in rest)
              and 100 * mid / FRACTION_FACTOR <= v <= 100 * mid * FRACTION_FACTOR):
            probs.add(where, f"{name}: {v:g} is about 100 times larger than the rest of its row (median {mid:g}), "
                             "whose values look like fractions; write every value in percent, or every value as a "
                             "fraction with scale: fraction")


def _check_greedy(arm_name, cells, absv, *, base_cell, gain, n, label, factor, flags):
    """A greedy / pass@k score is a multiple of 100 / n (within its rounding); else it was likely avg@k.

    Flagged, not refused: the interval takes the item as its unit either way, so it does not depend on
    the protocol; the flag says the entry's item count or protocol is probably not what the paper used.
    """
    for c, a in zip(cells, absv):
        half = nt.rounding(c) + (nt.rounding(base_cell) if gain and base_cell is not None else 0.0)
        ok, lo, hi = bm.greedy_feasible(a, n, factor * half, factor * 2.0 * half)
        if not ok:
            flags.append(f"{arm_name}: {a:g} is not a possible {label} score on {n} items (nearest {lo:.2f} and "
                         f"{hi:.2f}): likely avg@k (an average over several samples per item); declare "
                         "samples_per_item: avg@k, or check n_items")
            return


def _check_pass_at_k(ks: dict, cells: dict, base, base_cell, factor: float, where: str, probs: Problems):
    """Refuse base pass@k / maj@k values that no model can have, naming the cell.

    An item solved by one sample is solved by some of k samples, so pass@k is at least the one-sample
    accuracy (the base) and grows with k; a majority of k samples is right only where one of them is,
    so maj@k is at most pass@k. Each comparison allows the rounding of the two cells as written.
    """
    def slack(*cs):
        return factor * sum(nt.rounding(c) for c in cs if c is not None)

    passk = ks.get("base_pass_at_k", {})
    prev = None
    for k in sorted(passk):
        name, c = cells[("base_pass_at_k", k)]
        v = passk[k]
        if base is not None and v < base - slack(c, base_cell):
            probs.add(where, f"{name}: {v:g} is below the base's pass@1 ({base:g}); pass@k (an item counts when any "
                             "of k samples is right) is at least the one-sample accuracy: check the cell or its k")
        elif prev is not None and v < passk[prev] - slack(c, cells[("base_pass_at_k", prev)][1]):
            probs.add(where, f"{name}: {v:g} is below {cells[('base_pass_at_k', prev)][0]} ({passk[prev]:g}); "
                             "pass@k grows with k: check the cells or their k")
        prev = k
    for k, v in ks.get("base_maj_at_k", {}).items():
        name, c = cells[("base_maj_at_k", k)]
        if k in passk and v > passk[k] + slack(c, cells[("base_pass_at_k", k)][1]):
            probs.add(where, f"{name}: {v:g} is above base_pass_at_k.{k} ({passk[k]:g}); a majority of k samples "
                             "is right only where one of them is, so maj@k is at most pass@k")


def _resolve_items(data, bench_name, where, probs):
    """``n_items`` from the entry or the registry; a contradiction needs ``n_items_override``."""
    reg = bm.lookup(bench_name)
    override = data.get("n_items_override")
    override = override.strip() if isinstance(override, str) else ("" if override is None else str(override))
    raw = data.get("n_items")
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        if reg is not None:
            return reg.n_items, "registry"
        probs.add(where, f"n_items: missing; an integer >= {MIN_ITEMS} is required (a benchmark of the registry fills it: "
                         f"{bm.names()})")
        return None, ""
    n = parse_int(raw, where, "n_items", probs)
    if n is not None and n < MIN_ITEMS:
        probs.add(where, f"n_items: {n} item(s) cannot give a reported accuracy (a score on one item is 0% or "
                         f"100%); an integer >= {MIN_ITEMS} is required")
        return None, ""
    if n is not None and n > MAX_ITEMS:
        probs.add(where, f"n_items: {n:g} items is more than any benchmark holds (the largest evaluation sets have "
                         f"about 10^5 - 10^6 items); at most {MAX_ITEMS} (10^7)")
        return None, ""
    if n is not None and reg is not None and n != reg.n_items:
        if not override:
            probs.add(where, f"n_items: {n} contradicts the registry's {reg.name} ({reg.n_items} items); remove "
                             f"n_items to use {reg.n_items}, or give n_items_override: '<why>' (a subset, another "
                             "version) to keep it")
            return None, ""
        return n, f"override: {override}"
    return n, "entry"


def build_entry(data: dict, source: dict, file: str, where: str, probs: Problems, *,
                scale: Optional[str]) -> Optional[Entry]:
    """Validate one entry and convert its cells to absolute accuracies in percent.

    Args:
      data: raw fields (defaults merged; CSV cells as strings).
      source: the checked source block.
      file: the file it came from (per-item paths are relative to its folder).
      where: label for messages (file, entry or line, model, benchmark).
      probs: collects problems.
      scale: ``percent`` or ``fraction`` (declared or inferred for the table), None when ambiguous.

    Returns:
      the :class:`Entry`, or None when it has problems (all of them recorded in ``probs``).
    """
    n0 = len(probs.items)
    unknown = [k for k in data if k not in ENTRY_FIELDS]
    if unknown:
        probs.add(where, f"unknown field(s) {unknown}; allowed: {', '.join(ENTRY_FIELDS)}")
    model, bench = data.get("model"), data.get("benchmark")
    for name, val in (("model", model), ("benchmark", bench)):
        if not isinstance(val, str) or not val.strip():
            probs.add(where, f"{name}: missing or empty; a non-empty string is required")
    n_items, n_from = _resolve_items(data, bench, where, probs)
    spi = protocol_for(data.get("samples_per_item"), bench, where, probs)
    k, protocol, label = (None, None, None) if spi is None and isinstance(data.get("samples_per_item"), dict) \
        else parse_protocol(spi, where, probs)
    if scale is None and data.get("scale") in (None, ""):  # an invalid declared scale is reported already
        probs.add(where, "scale: not declared, and every accuracy of the table lies in [0, 1], which fractions "
                         "(0.494 = 49.4%) and tiny percentages both explain; declare scale: fraction or scale: percent")
    mk = data.get("majority_kind")
    mk = None if isinstance(mk, str) and not mk.strip() else mk
    if mk is not None and mk not in MAJORITY_KINDS:
        probs.add(where, f"majority_kind: {mk!r} is not allowed; allowed: {', '.join(MAJORITY_KINDS)}")
        mk = None
    gamma = data.get("gamma")
    if isinstance(gamma, str) and not gamma.strip():
        gamma = None
    if gamma is not None:
        c = nt.read_cell(gamma)
        gamma = c.value
        if c.error or gamma is None:
            probs.add(where, f"gamma: {c.error or 'missing'}")
            gamma = None
        elif not 0.0 <= gamma <= 1.0:
            probs.add(where, f"gamma: {gamma:g} is outside [0, 1] (the random arm's reward probability)")

    raw_arms = data.get("arms")
    if not isinstance(raw_arms, dict) or not raw_arms:
        probs.add(where, f"arms: missing or empty; a mapping arm -> accuracy is required, arms: {', '.join(ARMS)}")
        raw_arms = {}
    canon: dict[str, Any] = {}
    for name, raw in raw_arms.items():
        arm = canonical_arm(name)
        _, metric = nt.header_arm(str(name))
        if arm is None:
            probs.add(where, f"arms.{name}: unknown arm; allowed: {', '.join(ARMS)} (alias base = frozen; "
                             "other results go under 'other')")
            continue
        if metric and metric != "pass@1" and label and metric != label:
            probs.add(where, f"arms.{name}: the header names {metric} but the entry declares samples_per_item: {label}")
        if arm in canon:
            probs.add(where, f"arms.{name}: arm {arm!r} given twice ({canon[arm][0]!r} and {name!r})")
            continue
        canon[arm] = (name, raw)
    raw_other = data.get("other") or {}
    if not isinstance(raw_other, dict):
        probs.add(where, f"other: expected a mapping name -> accuracy, got {raw_other!r}")
        raw_other = {}
    mode = data.get("values")
    mode = None if isinstance(mode, str) and not mode.strip() else mode
    if mode is None:
        mode = _infer_mode(canon, raw_other, where, probs)
    elif mode not in VALUE_MODES:
        probs.add(where, f"values: {mode!r} is not allowed; declare 'absolute' (accuracies) or 'gains' "
                         "(points over the base), or leave it out to read it from the signs of the cells")
        mode = None

    cells = {arm: (name, _arm_cells(raw, where, f"arms.{name}", probs)) for arm, (name, raw) in canon.items()}
    cells = {a: v for a, v in cells.items() if v[1] != []}  # a dash or an empty cell: not reported
    if raw_arms and "frozen" not in cells:
        probs.add(where, "arms.frozen: missing; every entry needs the base (frozen) accuracy, the partition's origin")
    if "majority" in cells and mk is None and data.get("majority_kind") is None:
        probs.add(where, "majority_kind: missing; an entry with a majority arm must record 'online' (group "
                         "plurality, TTRL-style) or 'offline' (label fixed from base samples)")
    if "random" in cells and gamma is None and data.get("gamma") is None:
        probs.add(where, "gamma: missing; an entry with a random arm must record its reward probability in [0, 1]")

    factor = 100.0 if scale == "fraction" else 1.0
    flags: list[str] = []
    arms: dict[str, ArmValue] = {}
    row: dict[str, float] = {}
    base, base_cell = None, None
    if scale is not None and "frozen" in cells and cells["frozen"][1] is not None:
        name, cl = cells["frozen"]
        vals = _convert(cl, arm_name=f"arms.{name}", mode=mode, scale=scale, base=0.0, where=where, probs=probs,
                        is_base=True)
        if vals is not None:
            base, base_cell = sum(vals) / len(vals), (cl[0] if len(cl) == 1 else None)
            arms["frozen"] = ArmValue(base, tuple(vals) if len(vals) > 1 else None)
            row["arms.frozen" if name == "frozen" else f"arms.{name} (arms.frozen)"] = base
    for arm, (name, cl) in cells.items():
        if arm == "frozen" or cl is None or mode is None or scale is None or (mode == "gains" and base is None):
            continue
        absv = _convert(cl, arm_name=f"arms.{name}", mode=mode, scale=scale, base=base or 0.0, where=where,
                        probs=probs)
        if absv is None:
            continue
        arms[arm] = ArmValue(sum(absv) / len(absv), tuple(absv) if len(absv) > 1 else None)
        row[f"arms.{name}"] = arms[arm].mean
        if protocol in ("greedy", "pass") and n_items:
            _check_greedy(f"arms.{name}", cl, absv, base_cell=base_cell, gain=mode == "gains", n=n_items,
                          label=label, factor=factor, flags=flags)
    if "frozen" in arms and protocol in ("greedy", "pass") and n_items:
        name, cl = cells["frozen"]
        _check_greedy(f"arms.{name}", cl, list(arms["frozen"].seeds or [base]), base_cell=None, gain=False,
                      n=n_items, label=label, factor=factor, flags=flags)

    other = {}
    for name, raw in raw_other.items():
        if canonical_arm(name) is not None:
            probs.add(where, f"other.{name}: {name!r} is an arm; give it under 'arms'")
            continue
        c = nt.read_cell(raw)
        if c.error:
            probs.add(where, f"other.{name}: {c.error}")
            continue
        if c.missing or mode is None or scale is None or (mode == "gains" and base is None):
            continue
        v = _convert([c], arm_name=f"other.{name}", mode=mode, scale=scale, base=base or 0.0, where=where, probs=probs)
        if v is not None:
            other[str(name)] = v[0]
            if mode == "absolute":
                row[f"other.{name}"] = v[0]

    ks, k_cells = {}, {}
    for field, allowed in (("base_pass_at_k", PASS_K), ("base_maj_at_k", MAJ_K)):
        raw = data.get(field) or {}
        ks[field] = {}
        if not isinstance(raw, dict):
            probs.add(where, f"{field}: expected a mapping k -> accuracy of the base model, got {raw!r}")
            continue
        for kk, val in raw.items():
            # int() also reads full-width and other scripts' digits: only ASCII 0-9 name a k
            k_int = int(str(kk)) if str(kk).isascii() and str(kk).isdigit() else None
            if k_int not in allowed:
                probs.add(where, f"{field}.{kk}: k={kk!r} is not supported; allowed k: {list(allowed)}")
                continue
            c = nt.read_cell(val)
            if c.error or c.value is None:
                probs.add(where, f"{field}.{kk}: {c.error or 'missing'}")
                continue
            if scale is not None:
                v = _convert([c], arm_name=f"{field}.{kk}", mode="absolute", scale=scale, base=0.0, where=where,
                             probs=probs, is_base=True)
                if v is not None:
                    ks[field][k_int] = v[0]
                    k_cells[(field, k_int)] = (f"{field}.{kk}", c)
    _check_pass_at_k(ks, k_cells, base, base_cell, factor, where, probs)
    known = None
    if data.get("known_base") not in (None, ""):
        c = nt.read_cell(data["known_base"])
        if c.error or c.value is None:
            probs.add(where, f"known_base: {c.error or 'missing'}")
        elif scale is not None:
            v = _convert([c], arm_name="known_base", mode="absolute", scale=scale, base=0.0, where=where, probs=probs,
                         is_base=True)
            known = v[0] if v else None
    _check_row_scale(row, where, probs)

    per_item = {}
    if data.get("per_item") not in (None, "") and protocol and n_items:
        per_item = _load_per_item(data["per_item"], file, canon, arms, protocol=protocol, k=k, n_items=n_items,
                                  where=where, probs=probs)
    if len(probs.items) > n0:
        return None
    return Entry(file=file, label=where, source=source, model=model.strip(), benchmark=bench.strip(), n_items=n_items,
                 samples_per_item=k, decoding=label, values=mode, majority_kind=mk, gamma=gamma, arms=arms,
                 other=other, base_pass_at_k=ks["base_pass_at_k"], base_maj_at_k=ks["base_maj_at_k"],
                 notes=_text(data.get("notes")), train_set=_text(data.get("train_set")).strip(), protocol=protocol,
                 scale=scale, n_items_from=n_from, known_base=known, per_item=per_item, flags=tuple(flags))


# Reported values are rounded; a per-item file must give the same score to within this (points).
PER_ITEM_TOL = 0.1


def _load_per_item(rel, file, canon, arms, *, protocol, k, n_items, where, probs) -> dict:
    path = Path(str(rel))
    if not path.is_absolute():
        path = Path(file).parent / path
    names = {str(n): a for a, (n, _) in canon.items()}
    names.update({a: a for a in canon})
    scores = read_per_item(path, protocol=protocol, k=k, arm_names=names, where=where, add=probs.add)
    for arm, s in scores.items():
        if arm not in arms:
            continue
        if arms[arm].seeds:
            probs.add(where, f"per_item: arm {arm!r} has per-seed values; per-item results are for single runs")
        if len(s.items) != n_items:
            probs.add(where, f"per_item: arm {arm!r} has {len(s.items)} items; the entry has n_items {n_items}")
        got = 100.0 * float(s.y.mean())
        if abs(got - arms[arm].mean) > PER_ITEM_TOL + 1e-9:
            probs.add(where, f"per_item: arm {arm!r} scores {got:.2f} in the per-item file but {arms[arm].mean:g} "
                             f"in the table (they must agree within {PER_ITEM_TOL} points)")
    return {a: s for a, s in scores.items() if a in arms}
