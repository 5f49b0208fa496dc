"""The cross-reference checks of a plan that passed its schema.

Conditions name factors and levels of the design, rules agree with predictions, thresholds exist,
ids are unique, and every static configuration of the design resolves. Each problem is one line
naming its field; :func:`semantic_problems` returns them all.
"""
from __future__ import annotations

import math
import re

from tabsim.base.choices import ANSWER_METRICS, OPTIONAL_METRICS
from tabsim.sim.arms import ARMS
from tabsim.config import ConfigError, resolve
from tabsim.prereg.plan import (CELLS_PREFIX, COEFFICIENT_PREFIX, ESTIMAND_ARMS, ESTIMANDS, FACTORIAL_ESTIMANDS,
                                PAIRED_PREFIX, PARTITION_ESTIMANDS, RATIO_ESTIMANDS, RULE_PREDICTION, Plan, arm_factor,
                                cell_pair, classify_field, design_runs, paired_levels)


def _levels_match(a, b) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return str(a) == str(b)
    return math.isclose(float(a), float(b), rel_tol=0.0, abs_tol=1e-12)


def _condition_problems(plan: Plan, where: str, condition: dict, *, free: set[str], complete: bool = True) -> list[str]:
    """Condition keys must be factors with listed levels; with ``complete`` every factor not in ``free`` is fixed."""
    problems = []
    names = {f.name: f for f in plan.design.factors}
    for key, level in condition.items():
        if key not in names:
            problems.append(f"{where}.condition.{key}: not a factor of the design; factors: {sorted(names) or 'none'}")
        elif not any(_levels_match(level, x) for x in names[key].labels):
            problems.append(f"{where}.condition.{key}: level {level!r} is not among the factor's levels "
                            f"{names[key].labels}")
        elif key in free:
            problems.append(f"{where}.condition.{key}: this factor is an axis of the estimand and cannot be fixed")
    missing = [n for n in names if n not in condition and n not in free and len(names[n].levels) > 1]
    if missing and complete:
        problems.append(f"{where}.condition: must fix a level of every other factor of the design; missing {missing}")
    return problems


def _estimand_problems(plan: Plan, where: str, estimand: str, condition: dict) -> list[str]:
    arm = arm_factor(plan)
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
    if estimand.startswith(PAIRED_PREFIX):
        name, pair, problem = paired_levels(plan, estimand)
        if pair is None:
            return [f"{where}.estimand: {estimand}: {problem}"]
        return _condition_problems(plan, where, condition, free={name})
    if estimand.startswith(CELLS_PREFIX):
        return _cells_problems(plan, where, estimand, condition)
    return [f"{where}.estimand: unknown estimand {estimand!r}; allowed: {', '.join(ESTIMANDS)}"]


def _cells_problems(plan: Plan, where: str, estimand: str, condition: dict) -> list[str]:
    """A ``cells:<A>-<B>`` estimand names two cells; each cell with the condition fixes every factor of more
    than one level (one run per seed and cell), and the condition fixes no factor a cell names."""
    pair, problem = cell_pair(plan, estimand)
    if pair is None:
        return [f"{where}.estimand: {estimand}: {problem}"]
    cells = plan.analysis.cells
    named = set(cells[pair[0]]) | set(cells[pair[1]])
    problems = _condition_problems(plan, where, condition, free=named, complete=False)
    for cell in pair:
        loose = [f.name for f in plan.design.factors
                 if len(f.levels) > 1 and f.name not in cells[cell] and f.name not in condition]
        if loose:
            problems.append(f"{where}.estimand: {estimand}: cell {cell!r} with the condition leaves {loose} free "
                            "(several runs per seed); fix them in the cell or the condition")
    return problems


def _cell_level_problems(plan: Plan) -> list[str]:
    """Each cell of ``analysis.cells`` names factors of the design and levels they have."""
    problems = []
    names = {f.name: f for f in plan.design.factors}
    for cell, levels in plan.analysis.cells.items():
        if not levels:
            problems.append(f"analysis.cells.{cell}: name at least one factor: level")
        for key, level in levels.items():
            if key not in names:
                problems.append(f"analysis.cells.{cell}.{key}: not a factor of the design; factors: "
                                f"{sorted(names) or 'none'}")
            elif not any(_levels_match(level, x) for x in names[key].labels):
                problems.append(f"analysis.cells.{cell}.{key}: level {level!r} is not among the factor's levels "
                                f"{names[key].labels}")
    return problems


def _threshold_problems(plan: Plan, where: str, value) -> list[str]:
    if isinstance(value, str) and value not in plan.analysis.thresholds:
        return [f"{where}: {value!r} is not a number nor a name in analysis.thresholds "
                f"({sorted(plan.analysis.thresholds) or 'none defined'})"]
    if not isinstance(value, str) and not math.isfinite(float(value)):
        return [f"{where}: must be finite, got {value!r}"]
    return []


def _design_problems(plan: Plan) -> list[str]:
    problems = []
    d = plan.design
    kinds = {}
    for f in d.factors:
        where = f"design.factors[{f.name}]"
        try:
            kinds[f.name] = classify_field(f.field)
        except ValueError as err:
            problems.append(f"{where}.field: {err}")
            continue
        kind, target = kinds[f.name]
        if kind != "static" and any(isinstance(x, list) for x in f.levels):
            problems.append(f"{where}.levels: list levels are for a list field of the config (algo.reward_terms); "
                            f"{f.field} takes one value per level")
            continue
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


# every environment's answer-level metrics, and those it records only when train.metrics names them
_KNOWN_METRICS = ANSWER_METRICS + OPTIONAL_METRICS
_ROOT_MASS = re.compile(r"root\d+_mass")  # the members of root_mass, one per root action


def semantic_problems(plan: Plan) -> list[str]:
    """Every cross-reference problem of ``plan``, each once, in the order found."""
    problems = _design_problems(plan)
    metric = family = plan.analysis.metric
    if _ROOT_MASS.fullmatch(metric):  # root{a}_mass: one member of the optional family root_mass
        family = "root_mass"
    if family not in _KNOWN_METRICS and not metric.startswith(("pass@", "maj@")):
        problems.append(f"analysis.metric: unknown metric {metric!r}; allowed: {', '.join(_KNOWN_METRICS)}, "
                        f"pass@k, maj@k, root{{a}}_mass")
    named = (plan.design.config.get("train") or {}).get("metrics")
    if family in OPTIONAL_METRICS and family not in (named or ()):
        its = "" if family == metric else f" ({family!r})"
        problems.append(f"analysis.metric: {metric!r} is recorded only when design.config.train.metrics names it"
                        f"{its} (got {named!r}); add it there")
    ids = [h.id for h in plan.hypotheses] + [e.id for e in plan.exploratory]
    for dup in sorted({i for i in ids if ids.count(i) > 1}):
        problems.append(f"hypotheses[{dup}].id: id used twice (hypotheses and exploratory ids must be unique)")
    check_ids = [c.id for c in plan.design.checks]
    for dup in sorted({i for i in check_ids if check_ids.count(i) > 1}):
        problems.append(f"design.checks[{dup}].id: id used twice")
    arm = arm_factor(plan)
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
    problems += _cell_level_problems(plan)
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
