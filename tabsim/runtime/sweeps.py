"""A sweep over any field as a design: its static fields' levels make groups of one compiled program each.

A sweep's numeric fields (:data:`tabsim.config.SWEEPABLE`) are traced values of one compiled program,
vmapped together. A static field (``task.n_prompts``, ``algo.estimator``, ``train.steps``, ``preset``,
``task.tree.depth``, ...) fixes array shapes or the code path, so each of its levels needs a program of
its own. :func:`split` makes such a sweep a :class:`Sweep`: one group per combination of static levels,
each a resolved config whose sweep holds the traced fields only. :func:`tabsim.runtime.run.run` plans
every group's chunks in one plan, computes them in one pass and assembles one frame with a column per
varied field.

Every group runs the same seeds. Where two groups' programs draw arrays of the same shapes (another
estimator, surrogate, ratio, KL or aggregation; a preset that changes only those), a seed gives them the
same task and the same draws, so the groups are paired as the arms are. Where a shape differs
(``task.n_prompts``, ``task.n_answers``, ``train.group_size``, ``train.batch_size``, ``train.steps``, ...)
the same seed addresses other draws, and the groups are independent samples.

Config work only (no JAX, no pandas): a bad sweep is refused before the engine loads.

    import tabsim as ts
    res = ts.run({"preset": "paper", "sweep": {"algo.estimator": ["grpo", "rloo"], "prior_strength": [0.35, 0.8]}})
    res.frame  # columns algo.estimator, prior_strength, seed, arm, step, pass1, ...
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import json

from tabsim.base.choices import TREE_FIELDS
from tabsim.config import Config, ConfigError, deep_merge, resolve, static_field
from tabsim.config.models import traced_name
from tabsim.config.presets import PRESETS
from tabsim.config.validate import flat_sweep

# static fields a sweep may not vary, and why
NOT_SWEPT = {
    "train.seed": "the seeds are the replication axis of every condition (set train.seed and train.seeds)",
    "train.seeds": "the seeds are the replication axis of every condition (set train.seed and train.seeds)",
    "arms.arms": "the arms are the arm axis of every condition (list them in arms.arms, or --arms)",
    "train.chunk_conditions": "it only cuts the work into chunks; the results are the same at every level",
}


def static_name(name: str) -> str | None:
    """The canonical name of a static sweep field (``preset``, ``task.n_prompts`` for ``n_prompts`` or
    ``task.n_prompts``, ``task.tree.depth``), or None for a traced or unknown field."""
    if name == "preset":
        return "preset"
    parts = name.split(".")
    if len(parts) == 3 and parts[:2] == ["task", "tree"] and parts[2] in TREE_FIELDS:
        return name
    return static_field(name)


@dataclasses.dataclass(frozen=True)
class Group:
    """One combination of static levels: ``values`` (field -> level) and its resolved ``config``, whose
    sweep holds the traced fields only (one compiled program)."""

    values: dict
    config: Config

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.values.items())


@dataclasses.dataclass(frozen=True)
class Sweep:
    """A sweep that varies static fields: the config mapping (:func:`resolved`: every field the groups share,
    its ``sweep`` every varied field, the static ones under their dotted names), the static levels, and the
    groups in sweep order."""

    data: dict
    static: dict
    groups: tuple

    @property
    def factors(self) -> list[str]:
        return list(self.data["sweep"])

    @property
    def n_conditions(self) -> int:
        return sum(len(g.config.grid()) for g in self.groups)

    def digest(self) -> str:
        """SHA-256 of the mapping and every group's resolved config."""
        blob = json.dumps([self.data, [g.config.digest() for g in self.groups]], sort_keys=True,
                          separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()


def _common(dumps: list):
    """The part of the mappings ``dumps`` that they all hold with one value (tables compared field by field,
    empty ones left out), or ``_DIFFER``."""
    first = dumps[0]
    if all(isinstance(d, dict) for d in dumps):
        out = {}
        for k in first:
            if all(k in d for d in dumps):
                v = _common([d[k] for d in dumps])
                if v is not _DIFFER and v != {}:
                    out[k] = v
        return out
    return first if all(d == first for d in dumps) else _DIFFER


_DIFFER = object()


def resolved(groups, sweep: dict) -> dict:
    """A sweep's config as a file: every field with one value in all the groups' resolved configs (a field
    they differ in is in ``sweep``, or set by a swept preset) and ``sweep`` with the traced levels as
    validated. Read back (``tabsim run config.json``), it gives the same groups and writes itself again."""
    dumps = [g.config.model_dump(mode="json") for g in groups]
    out = _common([{k: v for k, v in d.items() if k != "sweep"} for d in dumps])
    traced = groups[0].config.sweep
    out["sweep"] = {n: list(traced.get(n, levels)) for n, levels in sweep.items()}
    return out


def _set(data: dict, field: str, value) -> None:
    node = data
    *path, last = field.split(".")
    for p in path:
        node[p] = dict(node.get(p) or {})
        node = node[p]
    node[last] = value


def _levels(name: str, levels) -> list:
    if not isinstance(levels, (list, tuple)) or not levels:
        raise ConfigError(f"sweep.{name}: needs a non-empty list of levels, got {levels!r}")
    bad = [x for x in levels if not isinstance(x, (str, int, float, bool))]
    if bad:
        raise ConfigError(f"sweep.{name}: a level must be a name, a number or true/false, got {bad[0]!r}")
    if len(set(map(repr, levels))) != len(levels):
        raise ConfigError(f"sweep.{name}: a level is listed twice in {list(levels)} (each level is one group)")
    return list(levels)


def _check_level(rest: dict, field: str, i: int, level) -> None:
    """One static level on the base config: an error about the field itself is raised naming the level."""
    data = copy.deepcopy(rest)
    _set(data, field, level)
    try:
        resolve(data)
    except ConfigError as err:
        lines = [ln.strip() for ln in str(err).splitlines() if ln.strip().startswith(f"{field}:")]
        if lines:
            msg = lines[0].removeprefix(f"{field}:").strip()
            hint = (f" ({level!r} is a preset: vary it as preset={level})"
                    if isinstance(level, str) and level in PRESETS and field != "preset" else "")
            raise ConfigError(f"sweep.{field}[{i}]: {msg}{hint}") from None


def split(config: Config | dict | None = None, **overrides) -> Sweep | None:
    """Split a config's sweep into groups of one compiled shape; None when it varies no static field.

    Raises:
      ConfigError: a static field that cannot be swept, a malformed or bad level (naming the field and
        the allowed values), or a combination of levels that is not a valid config (naming the group).
    """
    if isinstance(config, Config):
        if not overrides or "sweep" not in overrides:
            return None
        config = config.model_dump(mode="json")
    if config is not None and not isinstance(config, dict):
        return None  # resolve refuses it with its own message
    merged = deep_merge(dict(config or {}), overrides)
    sweep = merged.get("sweep")
    if not isinstance(sweep, dict):
        return None
    static, order = {}, []
    for name, levels in flat_sweep(sweep).items():
        canon = static_name(name)
        if canon in NOT_SWEPT:
            raise ConfigError(f"sweep.{name}: not a field a sweep varies: {NOT_SWEPT[canon]}")
        if canon is not None:
            static[canon] = _levels(canon, levels)
        order.append((canon or traced_name(name) or name, levels))
    if not static:
        return None
    traced = {n: v for n, v in order if n not in static}
    rest = {**merged, "sweep": traced}
    for field, levels in static.items():
        for i, level in enumerate(levels):
            _check_level(rest, field, i, level)
    groups = []
    for combo in itertools.product(*static.values()):
        values = dict(zip(static, combo))
        data = copy.deepcopy(rest)
        for field, level in values.items():
            _set(data, field, level)
        try:
            cfg = resolve(data)
        except ConfigError as err:
            raise ConfigError(f"{err}\n  (in the sweep's group {Group(values, None).label})") from None
        groups.append(Group(values, cfg))
    return Sweep(data=resolved(groups, {n: list(v) for n, v in order}), static=static, groups=tuple(groups))
