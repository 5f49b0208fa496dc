"""A pre-registration plan's data model: the pydantic models of the YAML format, and the design's runs.

:class:`Plan` holds the design, the analysis, the stopping rule and the hypotheses, checked field by
field (types, required fields, ranges); :func:`design_runs` expands the design into the configs it
runs. The loading and the cross-reference checks are :mod:`tabsim.prereg.schema`.
"""
from __future__ import annotations

import copy
import itertools
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from tabsim.config import SWEEPABLE, Config

SCHEMA_VERSION = "tabsim.prereg/1"
PARTITION_ESTIMANDS = ("d_null", "d_elicit", "d_rd", "d_naive", "d_total", "bias")
RATIO_ESTIMANDS = ("rd_fraction", "elicitation_share", "rd_share")
FACTORIAL_ESTIMANDS = ("interaction_ratio",)
COEFFICIENT_PREFIX = "coefficient:"
# paired:<FACTOR>: the first level of a two-level factor minus the second, differenced within each seed
# (the levels of a design share their seeds), its interval from the seeds' differences; paired:<FACTOR>:<A>,<B>
# names the two levels (A minus B) of a factor of any number of levels
PAIRED_PREFIX = "paired:"
# cells:<A>-<B>: cell A minus cell B, two cells of analysis.cells (each a mapping factor -> level) that may
# differ in several factors, differenced within each seed like paired:
CELLS_PREFIX = "cells:"
ESTIMANDS = PARTITION_ESTIMANDS + RATIO_ESTIMANDS + FACTORIAL_ESTIMANDS + (COEFFICIENT_PREFIX + "<TERM>",
                                                                          PAIRED_PREFIX + "<FACTOR>",
                                                                          PAIRED_PREFIX + "<FACTOR>:<A>,<B>",
                                                                          CELLS_PREFIX + "<A>-<B>")


def paired_levels(plan: "Plan", estimand: str) -> tuple[str, tuple[str, str] | None, str]:
    """``(factor, (A, B) or None, problem)`` of a ``paired:`` estimand: the levels it differences (A minus B),
    None with a problem (one phrase) when the factor or its levels do not fit the design."""
    name, _, named = estimand[len(PAIRED_PREFIX):].partition(":")
    factors = {f.name: f for f in plan.design.factors}
    if name not in factors:
        return name, None, f"{name!r} is not a factor of the design; factors: {sorted(factors) or 'none'}"
    levels = [str(x) for x in factors[name].labels]
    if not named:
        if len(levels) != 2:
            return name, None, (f"a paired difference needs a factor of 2 levels or two named levels "
                                f"(paired:{name}:A,B); {name!r} has {levels}")
        return name, (levels[0], levels[1]), ""
    pair = named.split(",")
    if len(pair) != 2 or pair[0] == pair[1] or not set(pair) <= set(levels):
        return name, None, f"name two different levels of {name!r} as A,B (A minus B); its levels: {levels}"
    return name, (pair[0], pair[1]), ""


def cell_pair(plan: "Plan", estimand: str) -> tuple[tuple[str, str] | None, str]:
    """``((A, B) or None, problem)`` of a ``cells:<A>-<B>`` estimand: the names of the two cells of
    ``analysis.cells`` it differences (A minus B), None with a problem (one phrase) when they do not fit."""
    pair = estimand[len(CELLS_PREFIX):].split("-")
    cells = sorted(plan.analysis.cells)
    if len(pair) != 2 or pair[0] == pair[1] or not set(pair) <= set(cells):
        return None, f"name two different cells of analysis.cells as A-B (A minus B); its cells: {cells or 'none'}"
    if plan.analysis.cells[pair[0]] == plan.analysis.cells[pair[1]]:
        return None, f"cells {pair[0]!r} and {pair[1]!r} name the same levels"
    return (pair[0], pair[1]), ""


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


def level_label(level) -> Union[float, int, str, bool]:
    """The value a level has in the data, in conditions and in cells: a list level (of a list field such as
    ``algo.reward_terms``) is its items joined by ``+`` (``[]`` is ``none``); any other level is itself."""
    if isinstance(level, list):
        return "+".join(level) or "none"
    return level


class Factor(_Model):
    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="column name in the data and the model")
    field: str = Field(description="'arm', a sweepable field (e.g. prior_strength) or a config path (algo.epochs)")
    levels: list[Union[float, int, str, bool, list[str]]] = Field(
        min_length=1, description="values of the field; a list field's levels are lists, named by level_label")
    description: str = ""
    moves: Optional[Moves] = Field(None, description="the metric this factor is meant to move (manipulation check)")

    @field_validator("moves", mode="before")
    @classmethod
    def _metric_alone(cls, v):
        return {"metric": v} if isinstance(v, str) else v

    @field_validator("levels")
    @classmethod
    def _distinct(cls, v):
        if len({str(level_label(x)) for x in v}) != len(v):
            raise ValueError(f"levels must be distinct, got {v}")
        return v

    @property
    def labels(self) -> list:
        """The levels as the data holds them (:func:`level_label`)."""
        return [level_label(x) for x in self.levels]


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
    cells: dict[Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")],
                dict[str, Union[float, int, str, bool]]] = Field(
        default_factory=dict, description="named cells of the design (factor -> level) for cells:<A>-<B>")
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


def arm_factor(plan: Plan) -> Optional[Factor]:
    """The factor whose levels are the arms (None when the design has none)."""
    return next((f for f in plan.design.factors if f.field == "arm"), None)


def classify_field(field: str):
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
            kind, target = classify_field(f.field)
        except ValueError:
            if skip_unknown:
                continue
            raise
        if kind == "sweep":
            if skip_unknown and any(isinstance(x, list) for x in f.levels):
                continue  # refused by the cross-checks: a traced field takes numbers
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
