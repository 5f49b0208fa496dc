"""Run configuration: validated at the edge, then split into static structure and traced values.

A config is a nested mapping with the sections ``task``, ``arms``, ``algo``, ``train`` and ``sweep``
(TOML or YAML on disk). ``preset`` names a composition from :mod:`tabsim.presets` whose values the
file's own values override. ``sweep`` maps numeric fields (names of :class:`tabsim.params.Hyper`
fields, e.g. ``prior_strength``, ``lr``, ``gamma``, ``filter``) to lists of levels; their full
factorial is one vmapped grid.
"""
from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import tomllib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from tabsim.algos import AGGREGATIONS, ESTIMATORS, KL_ESTIMATORS, KL_PLACEMENTS, OPTIMIZERS, RATIOS, SURROGATES
from tabsim.arms import ARMS
from tabsim.envs import ANSWER_METRICS
from tabsim.params import HYPER_FIELDS
from tabsim.rng import RNGS


class ConfigError(ValueError):
    """A configuration value is missing, malformed or out of range (the message names the field)."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def _one_of(field: str, value: str, allowed) -> str:
    if value not in allowed:
        raise ValueError(f"unknown {field} {value!r}; allowed: {', '.join(sorted(allowed))}")
    return value


class TaskConfig(_Section):
    env: Literal["bandit", "tree"] = "bandit"
    n_prompts: int = Field(40, ge=1, le=1_000_000)
    n_answers: int = Field(8, ge=2, le=4096)
    n_correct: int = Field(2, ge=1)
    prior_strength: float = Field(0.5, gt=0.0, lt=1.0)
    format_boost: float = Field(0.2, ge=0.0)
    heterogeneity: float | None = Field(None, gt=0.0, description="Beta concentration; None = homogeneous")
    tree: dict[str, Any] = Field(default_factory=dict, description="tree-MDP structure (env = tree)")

    @model_validator(mode="after")
    def _k_lt_K(self):
        if self.n_correct >= self.n_answers:
            raise ValueError(f"n_correct must be < n_answers={self.n_answers} (k >= K leaves no wrong answer), "
                             f"got {self.n_correct}")
        return self


class ArmsConfig(_Section):
    arms: list[str] = Field(default_factory=lambda: ["frozen", "random", "majority", "true"], min_length=1)
    gamma: float = Field(0.5, ge=0.0, le=1.0)
    fpr: float = Field(0.0, ge=0.0, le=1.0)
    fnr: float = Field(0.0, ge=0.0, le=1.0)
    tie: Literal["random", "lowest"] = "random"
    offline_samples: int = Field(64, ge=1, le=100_000)

    @field_validator("arms")
    @classmethod
    def _known(cls, v):
        for a in v:
            _one_of("arm", a, ARMS)
        if len(set(v)) != len(v):
            raise ValueError(f"arms listed twice: {v}")
        return v


class AlgoConfig(_Section):
    estimator: str = "grpo"
    ratio: str = "token"
    surrogate: str = "clip"
    aggregation: str = "token-mean"
    kl: str = "k3"
    kl_placement: str = "none"
    epochs: int = Field(1, ge=1, le=1000)
    minibatches: int = Field(1, ge=1)
    optimizer: str = "sgd"
    lr: float = Field(0.05, gt=0.0)
    beta: float = Field(0.0, ge=0.0)
    std_eps: float = Field(1e-8, ge=0.0)
    std_ddof: Literal[0, 1] = 0
    eps_low: float = Field(0.2, ge=0.0)
    eps_high: float = Field(0.2, ge=0.0)
    dual_clip_c: float = Field(3.0, gt=1.0)
    sapo_tau_pos: float = Field(1.0, gt=0.0)
    sapo_tau_neg: float = Field(1.05, gt=0.0)
    ent_coef: float = Field(0.0, ge=0.0)
    max_grad_norm: float | None = Field(None, gt=0.0)
    filter: bool = False
    adam_b1: float = Field(0.9, ge=0.0, lt=1.0)
    adam_b2: float = Field(0.999, ge=0.0, lt=1.0)
    adam_eps: float = Field(1e-8, gt=0.0)

    @field_validator("estimator")
    @classmethod
    def _est(cls, v):
        return _one_of("estimator", v, ESTIMATORS)

    @field_validator("ratio")
    @classmethod
    def _ratio(cls, v):
        return _one_of("ratio", v, RATIOS)

    @field_validator("surrogate")
    @classmethod
    def _sur(cls, v):
        return _one_of("surrogate", v, SURROGATES)

    @field_validator("aggregation")
    @classmethod
    def _agg(cls, v):
        return _one_of("aggregation", v, AGGREGATIONS)

    @field_validator("kl")
    @classmethod
    def _kl(cls, v):
        return _one_of("kl", v, KL_ESTIMATORS)

    @field_validator("kl_placement")
    @classmethod
    def _klp(cls, v):
        return _one_of("kl_placement", v, KL_PLACEMENTS)

    @field_validator("optimizer")
    @classmethod
    def _opt(cls, v):
        return _one_of("optimizer", v, OPTIMIZERS)


class TrainConfig(_Section):
    steps: int = Field(200, ge=1, le=10_000_000)
    batch_size: int = Field(16, ge=1)
    group_size: int = Field(8, ge=2, le=65536)
    eval_every: int | None = Field(None, ge=1, description="None = only at the start and the end")
    replacement: bool = False
    seeds: int = Field(8, ge=1, le=100_000)
    seed: int = Field(0, ge=0, lt=2**31, description="first seed; seeds are seed, seed+1, ...")
    pass_k: list[int] = Field(default_factory=list)
    maj_k: list[int] = Field(default_factory=list)
    rng: str = "fast"
    chunk_conditions: int | None = Field(None, ge=1, description="conditions per compiled call")
    metrics: list[str] | None = Field(None, description="answer-level metrics to record (None = all)")

    @field_validator("rng")
    @classmethod
    def _rng(cls, v):
        return _one_of("rng", v, RNGS)

    @field_validator("metrics")
    @classmethod
    def _metrics(cls, v):
        if v is None:
            return v
        if not v:
            raise ValueError(f"list at least one of {', '.join(ANSWER_METRICS)} (or leave it unset for all)")
        for m in v:
            _one_of("metric", m, ANSWER_METRICS)
        return [m for m in ANSWER_METRICS if m in v]  # canonical order, no repeats

    @field_validator("pass_k", "maj_k")
    @classmethod
    def _ks(cls, v):
        for k in v:
            if k < 1:
                raise ValueError(f"every k must be >= 1, got {k}")
        return sorted(set(v))


class Config(_Section):
    preset: str | None = None
    task: TaskConfig = Field(default_factory=TaskConfig)
    arms: ArmsConfig = Field(default_factory=ArmsConfig)
    algo: AlgoConfig = Field(default_factory=AlgoConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    sweep: dict[str, list[float]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _cross(self):
        t, tr, a = self.task, self.train, self.algo
        if not tr.replacement and tr.batch_size > t.n_prompts:
            raise ValueError(f"train.batch_size must be <= task.n_prompts={t.n_prompts} when drawing without "
                             f"replacement, got {tr.batch_size}")
        if tr.batch_size % a.minibatches:
            raise ValueError(f"algo.minibatches must divide train.batch_size={tr.batch_size}, got {a.minibatches}")
        if tr.eval_every is not None and tr.steps % tr.eval_every:
            raise ValueError(f"train.eval_every must divide train.steps={tr.steps}, got {tr.eval_every}")
        from tabsim.envs.bandit import MAX_COMPOSITIONS, n_compositions
        for k in tr.maj_k:
            if n_compositions(k, t.n_answers) > MAX_COMPOSITIONS:
                raise ValueError(f"train.maj_k: exact maj@{k} over {t.n_answers} answers enumerates "
                                 f"{n_compositions(k, t.n_answers)} count vectors (max {MAX_COMPOSITIONS}); use a smaller k")
        for name, levels in self.sweep.items():
            if name not in SWEEPABLE:
                raise ValueError(f"sweep.{name}: not a numeric field; sweepable: {', '.join(sorted(SWEEPABLE))}")
            if not levels:
                raise ValueError(f"sweep.{name}: needs at least one level")
        if "heterogeneity" in self.sweep and t.heterogeneity is None:
            # the heterogeneous prior is a static switch: without it the swept concentration is never read
            raise ValueError("sweep.heterogeneity: the prior is homogeneous (task.heterogeneity is not set), so "
                             "the levels would have no effect; set task.heterogeneity (any value > 0) to draw "
                             "per-prompt p_s ~ Beta and sweep its concentration")
        return self

    # -- derived ---------------------------------------------------------------------------------
    def grid(self) -> list[dict[str, float]]:
        """The sweep's full factorial as a list of ``{field: level}`` (one empty dict if no sweep)."""
        names = list(self.sweep)
        return [dict(zip(names, combo)) for combo in itertools.product(*(self.sweep[n] for n in names))]

    def hyper_values(self, overrides: dict[str, float] | None = None) -> dict[str, float]:
        """Traced values for one condition, from this config plus sweep overrides."""
        t, arms, a = self.task, self.arms, self.algo
        v = {
            "prior_strength": t.prior_strength, "format_boost": t.format_boost,
            "heterogeneity": t.heterogeneity if t.heterogeneity is not None else 1.0,
            "gamma": arms.gamma, "fpr": arms.fpr, "fnr": arms.fnr,
            "max_grad_norm": a.max_grad_norm if a.max_grad_norm is not None else math.inf,
            "filter": float(a.filter), "std_ddof": float(a.std_ddof),
        }
        for name in HYPER_FIELDS:
            if name not in v:
                v[name] = float(getattr(a, name))
        v.update(overrides or {})
        return v

    def digest(self) -> str:
        """SHA-256 of the canonical JSON of the resolved config."""
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()


# sweepable field -> (section, field) used to validate each level
SWEEPABLE = {
    "prior_strength": ("task", "prior_strength"), "format_boost": ("task", "format_boost"),
    "heterogeneity": ("task", "heterogeneity"), "gamma": ("arms", "gamma"), "fpr": ("arms", "fpr"),
    "fnr": ("arms", "fnr"),
    **{n: ("algo", n) for n in HYPER_FIELDS if n not in ("prior_strength", "format_boost", "heterogeneity",
                                                          "gamma", "fpr", "fnr")},
}


def _deep_merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict) and k != "sweep":
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _format_error(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "config"
        msg = e["msg"].removeprefix("Value error, ")
        got = e.get("input")
        shown = "" if isinstance(got, dict) else f" (got {got!r})"
        lines.append(f"{loc}: {msg}{shown}")
    return "invalid config:\n  " + "\n  ".join(lines)


def resolve(data: dict | None = None, **overrides) -> Config:
    """Build a validated :class:`Config` from a mapping (and a preset it names).

    Raises:
      ConfigError: naming every bad field, its value and the allowed range.
    """
    from tabsim.presets import PRESETS

    data = _deep_merge(dict(data or {}), overrides)
    name = data.get("preset")
    if name is not None:
        if name not in PRESETS:
            raise ConfigError(f"preset: unknown preset {name!r}; allowed: {', '.join(sorted(PRESETS))}")
        data = _deep_merge(PRESETS[name], data)
    if not isinstance(data.get("sweep", {}), dict):
        raise ConfigError("sweep: must be a table of field = [levels]")
    try:
        cfg = Config.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_error(err)) from None
    # every sweep level must be a valid value of its field
    problems = []
    for name, levels in cfg.sweep.items():
        section, field = SWEEPABLE[name]
        for i, level in enumerate(levels):
            try:
                getattr(cfg, section).__class__.model_validate({**getattr(cfg, section).model_dump(), field: level})
            except ValidationError as err:
                problems.append(f"sweep.{name}[{i}]: {err.errors()[0]['msg']} (got {level!r})")
    if problems:
        raise ConfigError("invalid config:\n  " + "\n  ".join(problems))
    return cfg


def load_config(path: str | Path, **overrides) -> Config:
    """Read a TOML or YAML config file with a safe loader and validate it."""
    return resolve(read_config_file(path), **overrides)


def read_config_file(path: str | Path) -> dict:
    """The mapping in a TOML or YAML config file, read with a safe loader (not yet validated)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    text = path.read_text()
    try:
        if path.suffix == ".toml":
            data = tomllib.loads(text)
        elif path.suffix in (".yaml", ".yml"):
            data = yaml.safe_load(text) or {}
        else:
            raise ConfigError(f"{path}: unknown config format {path.suffix!r}; allowed: .toml, .yaml, .yml")
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as err:
        raise ConfigError(f"{path}: malformed config file: {err}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a table/mapping, got {type(data).__name__}")
    return data
