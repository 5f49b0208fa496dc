"""One entry's cells, read and checked: integers, protocols, arm values, their conversion to absolute
percent, and the checks across cells (a row's scale, greedy scores, pass@k and maj@k, item counts,
per-item files). Each problem is recorded in a :class:`tabsim.audit.fields.Problems`, naming the
field or cell, the bad value and what is allowed.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

from tabsim.audit import benchmarks as bm
from tabsim.audit import notation as nt
from tabsim.audit.fields import ARM_ALIASES, ARMS, Problems
from tabsim.audit.items import read_per_item

# The largest evaluation sets hold about 10^5 - 10^6 items; 10^7 is beyond any real benchmark, so a
# larger count is a typo (or a token count) and would make every interval look impossibly precise.
MAX_ITEMS = 10_000_000
MIN_ITEMS = 2  # one item gives 0% or 100%: no reported accuracy comes from it
MAX_SAMPLES = 1_000_000  # samples per item (avg@k)
# A cell in (0, 1) beside values above 1 is read as a fraction among percentages when 100x it is
# within this factor of the median of its row's other values (a real 0.8% base beside 12.3% is kept).
FRACTION_FACTOR = 3.0


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


def arm_cells(raw, where, field, probs):
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


def infer_mode(canon: dict, other: dict, where, probs) -> Optional[str]:
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


def convert(cells, *, arm_name, mode, scale, base, where, probs, is_base=False):
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


def check_row_scale(cells: dict, where, probs):
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


def check_greedy(arm_name, cells, absv, *, base_cell, gain, n, label, factor, flags):
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


def check_pass_at_k(ks: dict, cells: dict, base, base_cell, factor: float, where: str, probs: Problems):
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


def resolve_items(data, bench_name, where, probs):
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


# Reported values are rounded; a per-item file must give the same score to within this (points).
PER_ITEM_TOL = 0.1


def load_per_item(rel, file, canon, arms, *, protocol, k, n_items, where, probs) -> dict:
    """Per-item scores of the reported arms from ``rel`` (relative to ``file``), checked against the table."""
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
