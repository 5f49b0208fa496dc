"""Factorial designs: factors (``name -> config field -> levels``), how each field is run, and the
validated design (base config, factors, seeds) with the resolved config of each static combination."""
from __future__ import annotations

import copy
import dataclasses
import itertools
from typing import Mapping, Sequence

import numpy as np

from tabsim.sim.arms import ARMS
from tabsim.config import SWEEPABLE, AlgoConfig, ArmsConfig, Config, ConfigError, TaskConfig, TrainConfig, resolve
from tabsim.config.mapping import config_mapping

ARM, TRACED, STATIC = "arm", "traced", "static"
_SECTIONS = {"task": TaskConfig, "arms": ArmsConfig, "algo": AlgoConfig, "train": TrainConfig}
# Fields a factor may not vary: seeds are the runner's replication axis, arms are the arm factor.
_NOT_FACTORS = {"train.seeds", "train.seed", "train.chunk_conditions", "arms.arms"}
_RESERVED = {"seed", "arm", "step"}
def field_kind(field: str) -> tuple[str, str]:
    """How a factor's config field is run: ``(kind, canonical field)``.

    Args:
      field: ``"arm"``, a sweepable name (``"prior_strength"``) or dotted path
        (``"task.prior_strength"``, ``"algo.filter"``), ``"preset"``, or a dotted static field
        (``"algo.estimator"``, ``"task.n_prompts"``, ``"train.steps"``, ...).

    Returns:
      ``("arm", "arm")``, ``("traced", <Hyper field>)`` or ``("static", <dotted path>)``.
    """
    if not isinstance(field, str) or not field:
        raise ValueError(f"factor field must be a non-empty string, got {field!r}")
    if field in ("arm", "arms.arm"):
        return ARM, "arm"
    if field in SWEEPABLE:
        return TRACED, field
    if field == "preset":
        return STATIC, "preset"
    section, _, name = field.partition(".")
    if section in _SECTIONS and name:
        if SWEEPABLE.get(name) == (section, name):
            return TRACED, name
        if field in _NOT_FACTORS:
            raise ValueError(f"factor field {field!r} cannot be a factor: seeds are the runner's replication "
                             f"axis (pass seeds=) and arms are varied with the 'arm' field")
        if name not in _SECTIONS[section].model_fields:
            raise ValueError(f"factor field {field!r}: {section} has no field {name!r}; allowed: "
                             f"{', '.join(sorted(_SECTIONS[section].model_fields))}")
        return STATIC, field
    raise ValueError(f"factor field {field!r} is unknown; allowed: 'arm', 'preset', a sweepable field "
                     f"({', '.join(sorted(SWEEPABLE))}) or a dotted static field like 'algo.estimator'")


@dataclasses.dataclass(frozen=True)
class Factor:
    """One factor: a frame column ``name`` whose ``levels`` set the config ``field``.

    Attributes:
      name: column name in the output frame (not ``seed``, ``arm`` or ``step``).
      field: config field, see :func:`field_kind`.
      levels: the levels, in order (for two-level effect coding the first is coded +1).
      labels: optional display values of the levels in the frame (default: the levels).
    """

    name: str
    field: str
    levels: tuple
    labels: tuple | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"factor name must be a non-empty string, got {self.name!r}")
        if self.name in _RESERVED:
            raise ValueError(f"factor name {self.name!r} is reserved; pick another (reserved: seed, arm, step)")
        levels = tuple(self.levels) if isinstance(self.levels, (list, tuple)) else None
        if not levels:
            raise ValueError(f"factor {self.name!r}: levels must be a non-empty list, got {self.levels!r}")
        if len(set(map(repr, levels))) != len(levels):
            raise ValueError(f"factor {self.name!r}: levels repeat: {list(levels)}")
        object.__setattr__(self, "levels", levels)
        kind, canon = field_kind(self.field)
        if kind == ARM:
            bad = [x for x in levels if x not in ARMS]
            if bad:
                raise ValueError(f"factor {self.name!r}: unknown arm(s) {bad}; allowed: {', '.join(ARMS)}")
        if kind == TRACED:
            for x in levels:
                if isinstance(x, str) or not isinstance(x, (int, float, bool, np.integer, np.floating)):
                    raise ValueError(f"factor {self.name!r}: {self.field} is numeric; level {x!r} is not a number")
        if self.labels is not None:
            labels = tuple(self.labels)
            if len(labels) != len(levels) or len(set(map(repr, labels))) != len(labels):
                raise ValueError(f"factor {self.name!r}: labels must be {len(levels)} distinct values, one per "
                                 f"level, got {list(labels)}")
            object.__setattr__(self, "labels", labels)

    @property
    def kind(self) -> str:
        return field_kind(self.field)[0]

    @property
    def target(self) -> str:
        return field_kind(self.field)[1]

    def label(self, i: int):
        return (self.labels or self.levels)[i]


def as_factors(factors) -> tuple[Factor, ...]:
    """Normalise factor declarations: :class:`Factor` values or a mapping ``name -> {field: levels}``."""
    if isinstance(factors, Factor):
        return (factors,)
    if isinstance(factors, Mapping):
        out = []
        for name, spec in factors.items():
            if isinstance(spec, Factor):
                out.append(spec)
                continue
            if not isinstance(spec, Mapping) or len(spec) != 1:
                raise ValueError(f"factor {name!r}: declare it as {{field: [levels]}} with exactly one field, "
                                 f"e.g. {{'task.prior_strength': [0.8, 0.35]}}; got {spec!r}")
            (field, levels), = spec.items()
            out.append(Factor(name, field, tuple(levels) if isinstance(levels, (list, tuple)) else levels))
        factors = out
    factors = tuple(factors)
    for f in factors:
        if not isinstance(f, Factor):
            raise ValueError(f"factors must be Factor values or a mapping name -> {{field: levels}}, got {f!r}")
    names = [f.name for f in factors]
    if len(set(names)) != len(names):
        raise ValueError(f"factor names repeat: {names}")
    targets = [f.target for f in factors]
    if len(set(targets)) != len(targets):
        raise ValueError(f"two factors set the same field: {[f.field for f in factors]}")
    return factors


@dataclasses.dataclass(frozen=True)
class Design:
    """A full factorial of ``factors`` on ``base``, replicated over ``seeds``.

    Attributes:
      base: the config mapping every cell starts from (validated by :func:`tabsim.config.resolve`).
      factors: the factors; cells are their full factorial, in declaration order.
      seeds: the seed ids; every cell runs every seed (paired across cells and arms).
      name: a label for progress and provenance.
    """

    base: dict
    factors: tuple
    seeds: tuple
    name: str = "design"


def make_design(base: Config | dict | None, factors=(), *, seeds: int | Sequence[int] | None = None,
                name: str = "design") -> Design:
    """Validate a design: the base config, the factors (and their levels) and the seeds.

    A ``sweep`` in ``base`` becomes one traced factor per field (named by the field).

    Raises:
      ConfigError: a bad config value or factor level, naming the field, value and allowed range.
      ValueError: a malformed factor or seed list.
    """
    if isinstance(base, Config):
        base = base.model_dump(mode="json")
    base = copy.deepcopy(dict(base or {}))
    sweep = base.pop("sweep", {}) or {}
    facs = list(as_factors(factors))
    have = {f.target for f in facs}
    for fname, levels in sweep.items():
        if fname not in have:
            facs.append(Factor(fname, fname, tuple(levels)))
    facs = tuple(as_factors(facs))
    if sum(f.kind == ARM for f in facs) > 1:
        raise ValueError("at most one factor can vary the arm")
    cfg = resolve(base)
    if cfg.train.prompt_metrics is not None:  # a design's frame is its means; the per-prompt frame is ts.run's
        raise ConfigError(f"train.prompt_metrics: {cfg.train.prompt_metrics} is recorded by ts.run and tabsim run, not "
                          "by a factorial design; leave it unset here (run the cell with ts.run for its prompts)")
    if seeds is None:
        seeds = cfg.train.seeds
    if isinstance(seeds, (int, np.integer)) and not isinstance(seeds, bool):
        if seeds < 1:
            raise ValueError(f"seeds must be >= 1, got {seeds}")
        seed_list = tuple(range(cfg.train.seed, cfg.train.seed + int(seeds)))
    else:
        try:
            seed_list = tuple(int(s) for s in seeds)
        except (TypeError, ValueError):
            raise ValueError(f"seeds must be a count or a list of ints, got {seeds!r}") from None
        bad = [s for s in seed_list if not 0 <= s < 2**31]
        if not seed_list or bad or len(set(seed_list)) != len(seed_list):
            raise ValueError(f"seeds must be distinct ints in [0, 2**31), at least one; got {list(seeds)[:8]}...")
    design = Design(base=base, factors=facs, seeds=seed_list, name=name)
    for static in static_combos(design):  # every level of every factor is validated before anything runs
        program_config(design, static)
    return design


def _set_path(d: dict, path: str, value) -> None:
    if path == "preset":
        d["preset"] = value
        return
    section, _, name = path.partition(".")
    d.setdefault(section, {})
    d[section] = dict(d[section])
    d[section][name] = value


def static_combos(design: Design) -> list[tuple]:
    statics = [f for f in design.factors if f.kind == STATIC]
    return list(itertools.product(*(range(len(f.levels)) for f in statics)))


def program_config(design: Design, static: tuple) -> Config:
    """The resolved config of one static combination, with every traced level validated."""
    statics = [f for f in design.factors if f.kind == STATIC]
    data = copy.deepcopy(design.base)
    for f, i in zip(statics, static):
        _set_path(data, f.target, f.levels[i])
    arm_f = next((f for f in design.factors if f.kind == ARM), None)
    sweep = {f.target: [float(x) for x in f.levels] for f in design.factors if f.kind == TRACED}
    try:
        cfg = resolve({**data, "sweep": sweep})
    except ConfigError as err:
        where = ", ".join(f"{f.name}={f.levels[i]!r}" for f, i in zip(statics, static))
        raise ConfigError(f"{err}" + (f"\n  (in the cell {where})" if where else "")) from None
    if arm_f is not None:
        arms = list(cfg.arms.arms) + [a for a in arm_f.levels if a not in cfg.arms.arms]
        if arms != list(cfg.arms.arms):
            cfg = resolve({**data, "sweep": sweep, "arms": {**data.get("arms", {}), "arms": arms}})
    # a swept ent_coef decides that the entropy term is compiled (tabsim.runtime.run.algo_spec): keep it
    kept = {k: v for k, v in sweep.items() if k == "ent_coef"}
    return resolve({**config_mapping(cfg), "sweep": kept})
