"""One audited row (model x benchmark x training set of a source), validated where it enters.

:func:`build_entry` turns a mapping of raw fields (from a YAML entry or a CSV line, defaults merged)
into an :class:`Entry` with absolute accuracies in percent, or records every problem it finds, each
naming the entry, the field or cell, the bad value and what is allowed. The table-wide parts (its
scale, the source block) are resolved by :mod:`tabsim.audit.schema`, which reads the files.
"""
from __future__ import annotations
import dataclasses
from typing import Any, Optional

from tabsim.audit import notation as nt
from tabsim.audit.cells import (FRACTION_FACTOR, MAX_ITEMS, MAX_SAMPLES, MIN_ITEMS, PER_ITEM_TOL, absolute_cells,
                                arm_cells, canonical_arm, check_greedy, check_pass_at_k, check_row_scale, convert,
                                infer_mode, load_per_item, parse_int, parse_protocol, protocol_for, resolve_items)
from tabsim.audit.fields import (ARM_ALIASES, ARMS, ENTRY_FIELDS, EXTRA_ARMS, MAJ_K, MAJORITY_KINDS, PARTITION_ARMS,
                                 PASS_K, PROTOCOLS, VALUE_MODES, ArmValue, AuditInputError, Entry, Problems)

__all__ = ["ARMS", "ARM_ALIASES", "ENTRY_FIELDS", "EXTRA_ARMS", "FRACTION_FACTOR", "MAJ_K", "MAJORITY_KINDS", "MAX_ITEMS",
           "MAX_SAMPLES", "MIN_ITEMS", "PARTITION_ARMS", "PASS_K", "PER_ITEM_TOL", "PROTOCOLS", "VALUE_MODES",
           "ArmValue", "AuditInputError", "Entry", "Problems", "absolute_cells", "build_entry", "canonical_arm",
           "parse_int", "parse_protocol", "protocol_for"]


def _text(value) -> str:
    return "" if value is None else str(value)

@dataclasses.dataclass(frozen=True)
class _Header:
    """The fields of an entry that are not cells: who, where, how many items and how they were scored."""

    model: Any
    bench: Any
    n_items: Optional[int]
    n_from: str
    k: Optional[int]
    protocol: Optional[str]
    label: Optional[str]
    majority_kind: Optional[str]
    gamma: Optional[float]


@dataclasses.dataclass
class _Converted:
    """The reported arms in absolute percent, the row's values by field (for its scale check), the base."""

    arms: dict
    row: dict
    flags: list
    base: Optional[float] = None
    base_cell: Any = None


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
    head = _read_header(data, scale, where, probs)
    canon, raw_other, mode = _read_arms(data, head.label, where, probs)
    cells = _present_cells(canon, data, head, where, probs)
    conv = _convert_arms(cells, mode=mode, scale=scale, head=head, where=where, probs=probs)
    other = _convert_other(raw_other, conv, mode=mode, scale=scale, where=where, probs=probs)
    ks = _base_at_k(data, conv, scale=scale, where=where, probs=probs)
    known = _known_base(data, scale, where, probs)
    check_row_scale(conv.row, where, probs)
    per_item = {}
    if data.get("per_item") not in (None, "") and head.protocol and head.n_items:
        per_item = load_per_item(data["per_item"], file, canon, conv.arms, protocol=head.protocol, k=head.k,
                                 n_items=head.n_items, where=where, probs=probs)
    if len(probs.items) > n0:
        return None
    return Entry(file=file, label=where, source=source, model=head.model.strip(), benchmark=head.bench.strip(),
                 n_items=head.n_items, samples_per_item=head.k, decoding=head.label, values=mode,
                 majority_kind=head.majority_kind, gamma=head.gamma, arms=conv.arms, other=other,
                 base_pass_at_k=ks["base_pass_at_k"], base_maj_at_k=ks["base_maj_at_k"],
                 notes=_text(data.get("notes")), train_set=_text(data.get("train_set")).strip(),
                 protocol=head.protocol, scale=scale, n_items_from=head.n_from, known_base=known, per_item=per_item,
                 flags=tuple(conv.flags))


def _read_header(data: dict, scale: Optional[str], where: str, probs: Problems) -> _Header:
    """Unknown fields; model and benchmark; item count; protocol; scale; majority kind; gamma."""
    unknown = [k for k in data if k not in ENTRY_FIELDS]
    if unknown:
        probs.add(where, f"unknown field(s) {unknown}; allowed: {', '.join(ENTRY_FIELDS)}")
    model, bench = data.get("model"), data.get("benchmark")
    for name, val in (("model", model), ("benchmark", bench)):
        if not isinstance(val, str) or not val.strip():
            probs.add(where, f"{name}: missing or empty; a non-empty string is required")
    n_items, n_from = resolve_items(data, bench, where, probs)
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
    return _Header(model=model, bench=bench, n_items=n_items, n_from=n_from, k=k, protocol=protocol, label=label,
                   majority_kind=mk, gamma=_read_gamma(data, where, probs))


def _read_gamma(data: dict, where: str, probs: Problems) -> Optional[float]:
    """The random arm's reward probability, in [0, 1] (None: not given or not a number)."""
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
    return gamma


def _read_arms(data: dict, label: Optional[str], where: str, probs: Problems) -> tuple[dict, dict, Optional[str]]:
    """``(arm -> (name as written, raw cell), other results, values mode)``: arms named once, by known names."""
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
        mode = infer_mode(canon, raw_other, where, probs)
    elif mode not in VALUE_MODES:
        probs.add(where, f"values: {mode!r} is not allowed; declare 'absolute' (accuracies) or 'gains' "
                         "(points over the base), or leave it out to read it from the signs of the cells")
        mode = None
    return canon, raw_other, mode


def _present_cells(canon: dict, data: dict, head: _Header, where: str, probs: Problems) -> dict:
    """``arm -> (name, cells)`` of the arms reported (None: bad cells); the base, and what a majority or random
    arm needs, present."""
    cells = {arm: (name, arm_cells(raw, where, f"arms.{name}", probs)) for arm, (name, raw) in canon.items()}
    cells = {a: v for a, v in cells.items() if v[1] != []}  # a dash or an empty cell: not reported
    if isinstance(data.get("arms"), dict) and data["arms"] and "frozen" not in cells:
        probs.add(where, "arms.frozen: missing; every entry needs the base (frozen) accuracy, the partition's origin")
    if "majority" in cells and head.majority_kind is None and data.get("majority_kind") is None:
        probs.add(where, "majority_kind: missing; an entry with a majority arm must record 'online' (group "
                         "plurality, TTRL-style) or 'offline' (label fixed from base samples)")
    if "random" in cells and head.gamma is None and data.get("gamma") is None:
        probs.add(where, "gamma: missing; an entry with a random arm must record its reward probability in [0, 1]")
    return cells


def _convert_arms(cells: dict, *, mode, scale, head: _Header, where: str, probs: Problems) -> _Converted:
    """The arms in absolute percent (gains added to the base), greedy / pass@k scores checked for feasibility."""
    factor = 100.0 if scale == "fraction" else 1.0
    conv = _Converted(arms={}, row={}, flags=[])
    greedy = head.protocol in ("greedy", "pass") and head.n_items
    if scale is not None and "frozen" in cells and cells["frozen"][1] is not None:
        name, cl = cells["frozen"]
        vals = convert(cl, arm_name=f"arms.{name}", mode=mode, scale=scale, base=0.0, where=where, probs=probs,
                       is_base=True)
        if vals is not None:
            conv.base, conv.base_cell = sum(vals) / len(vals), (cl[0] if len(cl) == 1 else None)
            conv.arms["frozen"] = ArmValue(conv.base, tuple(vals) if len(vals) > 1 else None)
            conv.row["arms.frozen" if name == "frozen" else f"arms.{name} (arms.frozen)"] = conv.base
    for arm, (name, cl) in cells.items():
        if arm == "frozen" or cl is None or mode is None or scale is None or (mode == "gains" and conv.base is None):
            continue
        absv = convert(cl, arm_name=f"arms.{name}", mode=mode, scale=scale, base=conv.base or 0.0, where=where,
                       probs=probs)
        if absv is None:
            continue
        conv.arms[arm] = ArmValue(sum(absv) / len(absv), tuple(absv) if len(absv) > 1 else None)
        conv.row[f"arms.{name}"] = conv.arms[arm].mean
        if greedy:
            check_greedy(f"arms.{name}", cl, absv, base_cell=conv.base_cell, gain=mode == "gains", n=head.n_items,
                         label=head.label, factor=factor, flags=conv.flags)
    if "frozen" in conv.arms and greedy:
        name, cl = cells["frozen"]
        check_greedy(f"arms.{name}", cl, list(conv.arms["frozen"].seeds or [conv.base]), base_cell=None, gain=False,
                     n=head.n_items, label=head.label, factor=factor, flags=conv.flags)
    return conv


def _convert_other(raw_other: dict, conv: _Converted, *, mode, scale, where: str, probs: Problems) -> dict:
    """Other reported results (not arms) in absolute percent; absolute ones join the row's scale check."""
    other = {}
    for name, raw in raw_other.items():
        if canonical_arm(name) is not None:
            probs.add(where, f"other.{name}: {name!r} is an arm; give it under 'arms'")
            continue
        c = nt.read_cell(raw)
        if c.error:
            probs.add(where, f"other.{name}: {c.error}")
            continue
        if c.missing or mode is None or scale is None or (mode == "gains" and conv.base is None):
            continue
        v = convert([c], arm_name=f"other.{name}", mode=mode, scale=scale, base=conv.base or 0.0, where=where,
                    probs=probs)
        if v is not None:
            other[str(name)] = v[0]
            if mode == "absolute":
                conv.row[f"other.{name}"] = v[0]
    return other


def _base_at_k(data: dict, conv: _Converted, *, scale, where: str, probs: Problems) -> dict:
    """The base model's pass@k and maj@k (``{field: {k: percent}}``), checked against each other and the base."""
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
                v = convert([c], arm_name=f"{field}.{kk}", mode="absolute", scale=scale, base=0.0, where=where,
                            probs=probs, is_base=True)
                if v is not None:
                    ks[field][k_int] = v[0]
                    k_cells[(field, k_int)] = (f"{field}.{kk}", c)
    factor = 100.0 if scale == "fraction" else 1.0
    check_pass_at_k(ks, k_cells, conv.base, conv.base_cell, factor, where, probs)
    return ks


def _known_base(data: dict, scale, where: str, probs: Problems) -> Optional[float]:
    """The model's accuracy as known from elsewhere (its model card), in percent."""
    if data.get("known_base") in (None, ""):
        return None
    c = nt.read_cell(data["known_base"])
    if c.error or c.value is None:
        probs.add(where, f"known_base: {c.error or 'missing'}")
    elif scale is not None:
        v = convert([c], arm_name="known_base", mode="absolute", scale=scale, base=0.0, where=where, probs=probs,
                    is_base=True)
        return v[0] if v else None
    return None
