"""The pre-registration file format: a YAML document checked by pydantic, then cross-checked.

A plan names its design (preset, config overrides, arms, seeds, steps, factors with levels,
manipulation checks), its analysis (metric, alpha, correction, interval method, thresholds, the
factorial model), a stopping rule, and hypotheses: each an estimand at one condition of the design,
a predicted direction or region, and the decision rule that settles it. ``docs/prereg.md`` shows a
full example; ``preregistration/*/plan.yaml`` are real ones.

Validation has two passes: the schema (types, required fields, ranges), then the cross-references
(conditions name factors and levels of the design, rules agree with predictions, every static
configuration of the design resolves). Every problem is reported, each naming its field.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from pydantic import ValidationError

from tabsim.files.safeload import LoadError, load_yaml
from tabsim.prereg.crosscheck import semantic_problems
from tabsim.prereg.errors import PreregError
from tabsim.prereg.plan import (CELLS_PREFIX, CHECK_OPS, COEFFICIENT_PREFIX, ESTIMAND_ARMS, ESTIMANDS,
                                FACTORIAL_ESTIMANDS, PAIRED_PREFIX, PARTITION_ARMS, PARTITION_ESTIMANDS, POINT_RULES,
                                RATIO_ESTIMANDS, RULE_PREDICTION, SCHEMA_VERSION, Analysis, Check, Design,
                                Exploratory, Factor, Factorial, Hypothesis, Moves, Number, Plan, Rule, StoppingRule,
                                Tost, arm_factor, cell_pair, classify_field, design_runs, paired_levels)

__all__ = ["CELLS_PREFIX", "CHECK_OPS", "COEFFICIENT_PREFIX", "ESTIMAND_ARMS", "ESTIMANDS", "FACTORIAL_ESTIMANDS",
           "PAIRED_PREFIX", "PARTITION_ARMS", "PARTITION_ESTIMANDS", "POINT_RULES", "RATIO_ESTIMANDS",
           "RULE_PREDICTION", "SCHEMA_VERSION", "Analysis", "Check", "Design", "Exploratory", "Factor", "Factorial",
           "Hypothesis", "Moves", "Number", "Plan", "PreregError", "Rule", "StoppingRule", "Tost", "arm_factor",
           "cell_pair", "classify_field", "design_runs", "load_plan", "paired_levels", "read_document",
           "validate_document"]


def read_document(path: str | Path) -> dict:
    """Parse a plan file with ``yaml.safe_load``; the top level must be a mapping."""
    path = Path(path)
    if not path.is_file():
        raise PreregError(f"pre-registration file not found: {path}")

    try:  # PyYAML's safe_load scalars (plan hashes depend on them), with size, depth and alias limits
        doc = load_yaml(path, schema="yaml11", what="pre-registration file")
    except LoadError as err:
        raise PreregError(str(err)) from None
    if not isinstance(doc, dict):
        raise PreregError(f"{path}: the top level must be a mapping of fields, got {type(doc).__name__}")
    return doc


def _loc_name(doc: dict, loc: tuple) -> str:
    """``('hypotheses', 0, 'rule')`` -> ``hypotheses[H1].rule`` (list items named by id/name)."""
    out, node = "", doc
    for part in loc:
        if isinstance(part, int):
            item = node[part] if isinstance(node, list) and part < len(node) else None
            key = item.get("id", item.get("name")) if isinstance(item, dict) else None
            out += f"[{key}]" if isinstance(key, str) else f"[{part}]"
            node = item
        else:
            out += ("." if out else "") + str(part)
            node = node.get(part) if isinstance(node, dict) else None
    return out or "plan"


_UNION_TAGS = ("float", "str", "int", "bool", "literal['final']")


def _schema_problems(doc: dict, err: ValidationError) -> list[str]:
    """One line per field; the per-member errors of a union (number or name, ...) are merged."""
    merged: dict[str, list] = {}
    for e in err.errors():
        # pydantic appends the union member tried (float, str, ...) to the location; drop it
        loc = tuple(x for x in e["loc"] if x not in _UNION_TAGS)
        msg = e["msg"].removeprefix("Value error, ")
        got = e.get("input")
        shown = "" if isinstance(got, (dict, list)) or e["type"] == "missing" else f" (got {got!r})"
        entry = merged.setdefault(_loc_name(doc, loc), [[], shown])
        if msg not in entry[0]:
            entry[0].append(msg)
    return [f"{where}: {' | '.join(msgs)}{shown}" for where, (msgs, shown) in merged.items()]


def validate_document(doc: dict) -> tuple[Optional[Plan], list[str]]:
    """Schema and cross-reference check of a parsed plan: ``(plan or None, problems)``."""
    try:
        plan = Plan.model_validate(doc)
    except ValidationError as err:
        return None, _schema_problems(doc, err)
    return plan, semantic_problems(plan)


def load_plan(path: str | Path) -> tuple[Plan, dict]:
    """Read and validate a plan file; ``(plan, parsed document)``.

    Raises:
      PreregError: listing every problem, each naming its field.
    """
    doc = read_document(path)
    plan, problems = validate_document(doc)
    if problems:
        later = "\n(cross-reference checks of conditions, rules and the design run once these are fixed)" \
            if plan is None else ""
        raise PreregError(f"{path}: invalid pre-registration ({len(problems)} problem"
                          f"{'s' if len(problems) > 1 else ''}):\n  " + "\n  ".join(problems) + later)
    return plan, doc
