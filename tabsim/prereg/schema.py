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

import copy
import itertools
import math
from pathlib import Path
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from tabsim.arms import ARMS
from tabsim.config import SWEEPABLE, Config, ConfigError, resolve
from tabsim.files.safeload import LoadError, load_yaml
from tabsim.prereg.errors import PreregError

SCHEMA_VERSION = "tabsim.prereg/1"
PARTITION_ESTIMANDS = ("d_null", "d_elicit", "d_rd", "d_naive", "d_total", "bias")
RATIO_ESTIMANDS = ("rd_fraction", "elicitation_share", "rd_share")
FACTORIAL_ESTIMANDS = ("interaction_ratio",)
COEFFICIENT_PREFIX = "coefficient:"
ESTIMANDS = PARTITION_ESTIMANDS + RATIO_ESTIMANDS + FACTORIAL_ESTIMANDS + (COEFFICIENT_PREFIX + "<TERM>",)
PARTITION_ARMS = ("frozen", "random", "majority", "true")
# arms each estimand compares (docs/science.md, estimands)
ESTIMAND_ARMS = {"d_null": ("frozen", "random"), "d_elicit": ("random", "majority"), "d_rd": ("majority", "true"),
                 "d_naive": ("random", "true"), "d_total": ("frozen", "true"), "bias": ("random", "majority"),
                 "rd_fraction": ("random", "majority", "true"), "elicitation_share": PARTITION_ARMS,
                 "rd_share": PARTITION_ARMS}
# rule key -> the prediction it decides
RULE_PREDICTION = {"ci_lower_gt": "greater", "point_gt": "greater", "ci_upper_lt": "less", "point_lt": "less",
                   "tost": "equivalent"}
POINT_RULES = ("point_gt", "point_lt")
CHECK_OPS = ("eq", "le", "lt", "ge", "gt")


class _Model(BaseModel):
    # strict like config files: `seeds: 4.0` is a float where an integer is required, refused (a float
    # field still takes an integer)
    model_config = ConfigDict(extra="forbid", strict=True)


Number = Union[float, str]  # a number, or the name of an entry of analysis.thresholds


class Tost(_Model):
    margin: Number = Field(description="equivalence margin delta > 0 (or a threshold name)")
    center: float = Field(0.0, description="the value the estimand is claimed equivalent to")


class Rule(_Model):
    """Exactly one decision rule."""

    ci_lower_gt: Optional[Number] = None
    ci_upper_lt: Optional[Number] = None
    point_gt: Optional[Number] = None
    point_lt: Optional[Number] = None
    tost: Optional[Tost] = None

    @model_validator(mode="after")
    def _exactly_one(self):
        set_ = [k for k in RULE_PREDICTION if getattr(self, k) is not None]
        if len(set_) != 1:
            raise ValueError(f"give exactly one rule; allowed: {', '.join(RULE_PREDICTION)}; got {set_ or 'none'}")
        return self

    @property
    def kind(self) -> str:
        return next(k for k in RULE_PREDICTION if getattr(self, k) is not None)

    @property
    def value(self):
        return getattr(self, self.kind)


class Moves(_Model):
    """A factor's manipulation check: the mechanism the factor is meant to move.

    The mean of ``metric`` over the trained arms' recorded steps and seeds (``arm``: one arm only)
    must differ between the factor's levels by more than ``min_change``; a factor that leaves it
    where it was (a clip that never engages: ``clip_frac`` 0 at every level) is flagged.
    """

    metric: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_@]*$")
    arm: Optional[str] = None
    min_change: float = Field(0.0, ge=0.0)


class Factor(_Model):
    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="column name in the data and the model")
    field: str = Field(description="'arm', a sweepable field (e.g. prior_strength) or a config path (algo.epochs)")
    levels: list[Union[float, int, str, bool]] = Field(min_length=1)
    description: str = ""
    moves: Optional[Moves] = Field(None, description="the metric this factor is meant to move (manipulation check)")

    @field_validator("moves", mode="before")
    @classmethod
    def _metric_alone(cls, v):
        return {"metric": v} if isinstance(v, str) else v

    @field_validator("levels")
    @classmethod
    def _distinct(cls, v):
        if len({str(x) for x in v}) != len(v):
            raise ValueError(f"levels must be distinct, got {v}")
        return v


class Check(_Model):
    """A manipulation check on an exact metric of one arm, e.g. 'the frozen policy's mode is wrong'."""

    id: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    metric: str
    arm: str
    condition: dict[str, Any] = Field(default_factory=dict)
    step: Union[Literal["final"], int] = "final"
    reduce: Literal["min", "max", "mean"] = "mean"
    op: Literal["eq", "le", "lt", "ge", "gt"]
    value: float


class Design(_Model):
    preset: Optional[str] = None
    config: dict[str, Any] = Field(default_factory=dict, description="config overrides (sections task/algo/...)")
    arms: Optional[list[str]] = None
    seeds: int = Field(ge=2, le=100_000)
    first_seed: int = Field(0, ge=0, lt=2**31)
    steps: int = Field(ge=1, le=10_000_000)
    factors: list[Factor] = Field(default_factory=list)
    checks: list[Check] = Field(default_factory=list)


class Factorial(_Model):
    factors: list[str] = Field(min_length=1)
    formula: Optional[str] = None


class Analysis(_Model):
    metric: str = "pass1"
    alpha: float = Field(0.05, gt=0.0, lt=0.5)
    correction: Literal["holm", "bonferroni", "none"] = "holm"
    ci_method: Literal["t", "percentile", "bca"] = "percentile"
    n_resamples: int = Field(2000, ge=100, le=1_000_000)
    random_state: int = Field(0, ge=0)
    factorial: Optional[Factorial] = None
    thresholds: dict[str, float] = Field(default_factory=dict)
    power: dict[str, Any] = Field(default_factory=dict, description="the power estimate behind the seed count")


class StoppingRule(_Model):
    kind: Literal["fixed"] = Field(description="'fixed': every seed of the design runs, no interim looks")
    description: str = Field(min_length=1)


class Hypothesis(_Model):
    id: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    statement: str = Field(min_length=1)
    kind: Literal["confirmatory", "exploratory"] = "confirmatory"
    estimand: str
    condition: dict[str, Any] = Field(default_factory=dict)
    prediction: Literal["greater", "less", "equivalent"]
    rule: Rule
    requires: list[str] = Field(default_factory=list, description="ids of checks that must pass")
    source: str = ""


class Exploratory(_Model):
    id: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    estimand: str
    condition: dict[str, Any] = Field(default_factory=dict)


class Plan(_Model):
    schema_: Literal["tabsim.prereg/1"] = Field(SCHEMA_VERSION, alias="schema")
    title: str = Field(min_length=1)
    authors: list[str] = Field(min_length=1)
    rationale: str = Field(min_length=1)
    design: Design
    analysis: Analysis = Field(default_factory=Analysis)
    stopping_rule: StoppingRule
    hypotheses: list[Hypothesis] = Field(min_length=1)
    exploratory: list[Exploratory] = Field(default_factory=list)

    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)

    @property
    def confirmatory(self) -> list[Hypothesis]:
        return [h for h in self.hypotheses if h.kind == "confirmatory"]

    def factor(self, name: str) -> Factor:
        return next(f for f in self.design.factors if f.name == name)

    def threshold(self, value) -> float:
        """A rule value as a number (a string names an entry of ``analysis.thresholds``)."""
        return float(self.analysis.thresholds[value]) if isinstance(value, str) else float(value)


# --------------------------------------------------------------------------------- loading


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


def _levels_match(a, b) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return str(a) == str(b)
    return math.isclose(float(a), float(b), rel_tol=0.0, abs_tol=1e-12)


def _classify_field(field: str):
    """``('arm', None)``, ``('sweep', name)`` or ``('static', (section, key))``; ValueError if unknown."""
    if field == "arm":
        return "arm", None
    if field in SWEEPABLE:
        return "sweep", field
    section, _, key = field.partition(".")
    for name, (sec, fld) in SWEEPABLE.items():
        if (sec, fld) == (section, key):
            return "sweep", name
    sections = {k for k in Config.model_fields if k not in ("preset", "sweep")}
    if section in sections and key in getattr(Config.model_fields[section].annotation, "model_fields", {}):
        return "static", (section, key)
    raise ValueError(f"unknown field {field!r}; allowed: 'arm', a sweepable field ({', '.join(sorted(SWEEPABLE))}) "
                     f"or a config path section.field with section in {sorted(sections)}")


def _condition_problems(plan: Plan, where: str, condition: dict, *, free: set[str], complete: bool = True) -> list[str]:
    """Condition keys must be factors with listed levels; with ``complete`` every factor not in ``free`` is fixed."""
    problems = []
    names = {f.name: f for f in plan.design.factors}
    for key, level in condition.items():
        if key not in names:
            problems.append(f"{where}.condition.{key}: not a factor of the design; factors: {sorted(names) or 'none'}")
        elif not any(_levels_match(level, x) for x in names[key].levels):
            problems.append(f"{where}.condition.{key}: level {level!r} is not among the factor's levels "
                            f"{names[key].levels}")
        elif key in free:
            problems.append(f"{where}.condition.{key}: this factor is an axis of the estimand and cannot be fixed")
    missing = [n for n in names if n not in condition and n not in free and len(names[n].levels) > 1]
    if missing and complete:
        problems.append(f"{where}.condition: must fix a level of every other factor of the design; missing {missing}")
    return problems


def _arm_factor(plan: Plan) -> Optional[Factor]:
    return next((f for f in plan.design.factors if f.field == "arm"), None)


def _estimand_problems(plan: Plan, where: str, estimand: str, condition: dict) -> list[str]:
    arm = _arm_factor(plan)
    arms = plan.design.arms
    if estimand in PARTITION_ESTIMANDS + RATIO_ESTIMANDS:
        problems = []
        need = ESTIMAND_ARMS[estimand]
        if arms is not None and not set(need) <= set(arms):
            problems.append(f"{where}.estimand: {estimand} needs the arms {list(need)}; design.arms is {arms}")
        return problems + _condition_problems(plan, where, condition, free={arm.name} if arm else set())
    if estimand in FACTORIAL_ESTIMANDS or estimand.startswith(COEFFICIENT_PREFIX):
        fac = plan.analysis.factorial
        if fac is None:
            return [f"{where}.estimand: {estimand} needs analysis.factorial (its factors and formula)"]
        problems = []
        if estimand.startswith(COEFFICIENT_PREFIX) and not estimand[len(COEFFICIENT_PREFIX):]:
            problems.append(f"{where}.estimand: name the coefficient, e.g. coefficient:AC")
        return problems + _condition_problems(plan, where, condition, free=set(fac.factors))
    return [f"{where}.estimand: unknown estimand {estimand!r}; allowed: {', '.join(ESTIMANDS)}"]


def _threshold_problems(plan: Plan, where: str, value) -> list[str]:
    if isinstance(value, str) and value not in plan.analysis.thresholds:
        return [f"{where}: {value!r} is not a number nor a name in analysis.thresholds "
                f"({sorted(plan.analysis.thresholds) or 'none defined'})"]
    if not isinstance(value, str) and not math.isfinite(float(value)):
        return [f"{where}: must be finite, got {value!r}"]
    return []


def design_runs(plan: Plan, *, skip_unknown: bool = False) -> list[tuple[dict, dict]]:
    """The design's static cells: ``[(static_levels {factor: level}, config mapping), ...]``.

    Sweepable factors become the ``sweep`` of each config (one compiled, vmapped run per static
    cell); static factors (shapes, code paths such as ``algo.epochs``) give one run per level combination.
    With ``skip_unknown`` factors whose field is unknown are left out instead of raising.
    """
    d = plan.design
    base = copy.deepcopy(d.config)
    if d.preset is not None:
        base["preset"] = d.preset
    base.setdefault("train", {})
    base["train"] = {**base["train"], "seeds": d.seeds, "seed": d.first_seed, "steps": d.steps}
    if d.arms is not None:
        base.setdefault("arms", {})
        base["arms"] = {**base["arms"], "arms": list(d.arms)}
    sweep, static = {}, []
    for f in d.factors:
        try:
            kind, target = _classify_field(f.field)
        except ValueError:
            if skip_unknown:
                continue
            raise
        if kind == "sweep":
            sweep[target] = [float(x) for x in f.levels]
        elif kind == "static":
            static.append((f, target))
    if sweep:
        base["sweep"] = {**base.get("sweep", {}), **sweep}
    runs = []
    for combo in itertools.product(*(f.levels for f, _ in static)):
        cfg = copy.deepcopy(base)
        levels = {}
        for (f, (section, key)), level in zip(static, combo):
            cfg.setdefault(section, {})
            cfg[section] = {**cfg[section], key: level}
            levels[f.name] = level
        runs.append((levels, cfg))
    return runs


def _design_problems(plan: Plan) -> list[str]:
    problems = []
    d = plan.design
    kinds = {}
    for f in d.factors:
        where = f"design.factors[{f.name}]"
        try:
            kinds[f.name] = _classify_field(f.field)
        except ValueError as err:
            problems.append(f"{where}.field: {err}")
            continue
        kind, target = kinds[f.name]
        if kind == "arm":
            bad = [x for x in f.levels if not isinstance(x, str) or x not in ARMS]
            if bad:
                hint = (" (YAML reads unquoted true/false as booleans: write 'true')"
                        if any(isinstance(x, bool) for x in bad) else "")
                problems.append(f"{where}.levels: unknown arms {bad}{hint}; allowed: {', '.join(ARMS)}")
        elif kind == "sweep":
            bad = [x for x in f.levels if isinstance(x, str)]
            if bad:
                problems.append(f"{where}.levels: {target} takes numbers, got {bad}")
    names = [f.name for f in d.factors]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"design.factors[{dup}]: factor named twice")
    fields = [kinds[n] for n in kinds]
    for dup in {str(k) for k in fields if fields.count(k) > 1}:
        problems.append(f"design.factors: two factors set the same field {dup}")
    if sum(1 for k, _ in fields if k == "arm") > 1:
        problems.append("design.factors: at most one factor may be the arm")
    reserved = {"seed", "step", "arm", plan.analysis.metric}
    for f in d.factors:
        if f.name in reserved and not (f.name == "arm" and f.field == "arm"):
            problems.append(f"design.factors[{f.name}].name: {f.name!r} is a reserved column name")
    if "sweep" in d.config:
        problems.append("design.config.sweep: declare swept fields as design.factors, not as a config sweep")
        return problems
    runs = design_runs(plan, skip_unknown=True)
    config_errors: dict[str, list] = {}
    for levels, cfg in runs:
        try:
            resolved = resolve(cfg)
        except ConfigError as err:
            for line in str(err).replace("invalid config:\n  ", "").split("\n  "):
                config_errors.setdefault(line.strip(), []).append(levels)
            continue
        arm = next((f for f in d.factors if kinds.get(f.name, ("",))[0] == "arm"), None)
        if arm is not None:
            absent = [x for x in arm.levels if x not in resolved.arms.arms]
            if absent:
                problems.append(f"design.factors[{arm.name}].levels: arms {absent} are not run; design.arms "
                                f"(or the preset's) is {resolved.arms.arms}")
        for h in [*plan.hypotheses, *plan.exploratory]:
            need = ESTIMAND_ARMS.get(h.estimand, ())
            if plan.design.arms is None and not set(need) <= set(resolved.arms.arms):
                problems.append(f"design.arms: {h.estimand} ({h.id}) needs the arms {list(need)}, the design runs "
                                f"{resolved.arms.arms}")
    for line, cells in config_errors.items():
        at = "" if len(cells) == len(runs) else " at " + "; ".join(
            ", ".join(f"{k}={v}" for k, v in c.items()) for c in cells)
        problems.append(f"design.config{at}: {line}")
    return sorted(set(problems), key=problems.index)


_KNOWN_METRICS = ("pass1", "entropy", "mode_correct", "format_mass", "kl_ref")


def _semantic_problems(plan: Plan) -> list[str]:
    problems = _design_problems(plan)
    metric = plan.analysis.metric
    if metric not in _KNOWN_METRICS and not metric.startswith(("pass@", "maj@")):
        problems.append(f"analysis.metric: unknown metric {metric!r}; allowed: {', '.join(_KNOWN_METRICS)}, "
                        f"pass@k, maj@k")
    ids = [h.id for h in plan.hypotheses] + [e.id for e in plan.exploratory]
    for dup in sorted({i for i in ids if ids.count(i) > 1}):
        problems.append(f"hypotheses[{dup}].id: id used twice (hypotheses and exploratory ids must be unique)")
    check_ids = [c.id for c in plan.design.checks]
    for dup in sorted({i for i in check_ids if check_ids.count(i) > 1}):
        problems.append(f"design.checks[{dup}].id: id used twice")
    arm = _arm_factor(plan)
    for f in plan.design.factors:
        if f.moves is not None and (len(f.levels) < 2 or f.field == "arm"):
            problems.append(f"design.factors[{f.name}].moves: a manipulation check needs a factor of at least 2 "
                            "levels other than the arm")
        if f.moves is not None and f.moves.arm is not None and plan.design.arms is not None \
                and f.moves.arm not in plan.design.arms:
            problems.append(f"design.factors[{f.name}].moves.arm: {f.moves.arm!r} is not run; design.arms is "
                            f"{plan.design.arms}")
    for c in plan.design.checks:
        where = f"design.checks[{c.id}]"
        problems += _condition_problems(plan, where, c.condition, free={arm.name} if arm else set(), complete=False)
        if plan.design.arms is not None and c.arm not in plan.design.arms:
            problems.append(f"{where}.arm: {c.arm!r} is not run; design.arms is {plan.design.arms}")
    fac = plan.analysis.factorial
    if fac is not None:
        names = {f.name: f for f in plan.design.factors}
        for name in fac.factors:
            if name not in names:
                problems.append(f"analysis.factorial.factors: {name!r} is not a factor of the design; "
                                f"factors: {sorted(names)}")
            elif len(names[name].levels) < 2:
                problems.append(f"analysis.factorial.factors: {name!r} has one level; a factor needs at least 2")
        if fac.formula is not None and "~" not in fac.formula:
            problems.append(f"analysis.factorial.formula: must read 'response ~ terms', got {fac.formula!r}")
    for name, value in plan.analysis.thresholds.items():
        if not math.isfinite(value):
            problems.append(f"analysis.thresholds.{name}: must be finite, got {value!r}")
    for h in plan.hypotheses:
        where = f"hypotheses[{h.id}]"
        problems += _estimand_problems(plan, where, h.estimand, h.condition)
        kind = h.rule.kind
        if RULE_PREDICTION[kind] != h.prediction:
            problems.append(f"{where}.rule: {kind} decides a '{RULE_PREDICTION[kind]}' prediction, but prediction "
                            f"is {h.prediction!r}")
        if kind == "tost":
            bad = _threshold_problems(plan, f"{where}.rule.tost.margin", h.rule.tost.margin)
            if not bad and plan.threshold(h.rule.tost.margin) <= 0:
                bad = [f"{where}.rule.tost.margin: must be > 0, got {h.rule.tost.margin!r}"]
            problems += bad
        else:
            problems += _threshold_problems(plan, f"{where}.rule.{kind}", h.rule.value)
        for cid in h.requires:
            if cid not in check_ids:
                problems.append(f"{where}.requires: {cid!r} is not a check id; checks: {check_ids or 'none'}")
    for e in plan.exploratory:
        problems += _estimand_problems(plan, f"exploratory[{e.id}]", e.estimand, e.condition)
    return sorted(set(problems), key=problems.index)


def validate_document(doc: dict) -> tuple[Optional[Plan], list[str]]:
    """Schema and cross-reference check of a parsed plan: ``(plan or None, problems)``."""
    try:
        plan = Plan.model_validate(doc)
    except ValidationError as err:
        return None, _schema_problems(doc, err)
    return plan, _semantic_problems(plan)


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
