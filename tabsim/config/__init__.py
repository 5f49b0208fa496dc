"""Run configuration: validated at the edge, then split into static structure and traced values.

A config is a nested mapping with the sections ``task``, ``arms``, ``algo``, ``train`` and ``sweep``
(TOML or YAML on disk). ``preset`` names a composition from :mod:`tabsim.presets` whose values the
file's own values override. ``sweep`` maps numeric fields (names of :class:`tabsim.params.Hyper`
fields, e.g. ``prior_strength``, ``lr``, ``gamma``, ``filter``) to lists of levels; their full
factorial is one vmapped grid.
"""
from __future__ import annotations

import copy
import difflib
import hashlib
import itertools
import json
import math
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import (BaseModel, ConfigDict, Field, ValidationError, field_validator, model_serializer,
                      model_validator)

# the names and the tree checks, in plain Python: a config is refused before JAX loads (a test checks it)
from tabsim.choices import (AGGREGATIONS, ANSWER_METRICS, ARMS, ESTIMATORS, HYPER_FIELDS, KL_ESTIMATORS, KL_PLACEMENTS,
                            MAX_COMPOSITIONS, OPTIMIZERS, RATIOS, RNGS, SURROGATES, check_tree, n_compositions)
from tabsim.files.safeload import LoadError, load_json, load_toml, load_yaml
from tabsim.presets import PRESETS


class ConfigError(ValueError):
    """A configuration value is missing, malformed or out of range (the message names the field)."""


# The smallest normal float32: a nonzero float below it is a denormal or zero in the engine's float32
# arithmetic (``lr = 5e-324`` ran as ``lr = 0`` without a word), so it is refused.
TINY = 2.0**-126  # numpy.finfo(numpy.float32).tiny, written out: validation loads no NumPy (a test checks it)


class _Section(BaseModel):
    # strict: no coercion (a float or a string where an integer is meant, 1 or "yes" for a boolean);
    # every float finite (a float field also takes an integer)
    model_config = ConfigDict(extra="forbid", validate_assignment=True, strict=True, allow_inf_nan=False)

    @field_validator("*", mode="after")
    @classmethod
    def _not_denormal(cls, v):
        if isinstance(v, float) and 0.0 < abs(v) < TINY:
            raise ValueError(f"{v!r} is below the smallest float32 number, {TINY:.4g} (the engine computes in "
                             "float32, where it is zero or a denormal); give 0 where 0 is allowed, or a value "
                             f">= {TINY:.4g}")
        return v


def _one_of(field: str, value: str, allowed) -> str:
    if value not in allowed:
        near = difflib.get_close_matches(str(value), [str(a) for a in allowed], n=1)
        hint = f" (did you mean `{near[0]}`?)" if near else ""
        raise ValueError(f"unknown {field} {value!r}{hint}; allowed: {', '.join(sorted(allowed))}")
    return value


# Upper bounds of the float fields: far beyond any useful value, low enough that float32 arithmetic in
# the engine stays finite (1e308 would become inf there and turn every metric into NaN).
BIG = 1e3
# Lower bound of the learning rate: below it an update moves float32 logits of order 1 by less than their
# last bit (float32 resolves 6e-8 relative), so training would silently do nothing.
LR_MIN = 1e-12


class TaskConfig(_Section):
    env: Literal["bandit", "tree"] = "bandit"
    n_prompts: int = Field(40, ge=1, le=1_000_000)
    n_answers: int = Field(8, ge=2, le=4096)
    n_correct: int = Field(2, ge=1)
    prior_strength: float = Field(0.5, gt=0.0, lt=1.0)
    format_boost: float = Field(0.2, ge=0.0, le=1e4)
    heterogeneity: float | None = Field(None, gt=0.0, le=1e6, description="Beta concentration; None = homogeneous")
    tree: dict[str, Any] = Field(default_factory=dict, description="tree-MDP structure (env = tree)")

    @field_validator("tree")
    @classmethod
    def _tree(cls, v, info):
        env = info.data.get("env", "bandit")
        if env != "tree":
            if v:
                raise ValueError(f"task.tree: only read when task.env = 'tree' (it is {env!r}); remove "
                                 f"{', '.join(map(str, v))} or set task.env = 'tree'")
            return v
        check_tree(v, info.data.get("n_answers"), big=BIG)
        return v

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

    @field_validator("arms", mode="before")
    @classmethod
    def _no_booleans(cls, v):
        if isinstance(v, list) and any(isinstance(a, bool) for a in v):
            raise ValueError(f"arms.arms: {v} holds a boolean: YAML reads an unquoted true as a boolean; quote "
                             'the arm name: "true"')
        return v

    @field_validator("arms")
    @classmethod
    def _known(cls, v):
        for a in v:
            _one_of("arm", a, ARMS)
        if len(set(v)) != len(v):
            raise ValueError(f"arms listed twice: {v}")
        return v


# fields whose value names a registered component, and their built-in names
CHOICES = {"estimator": ESTIMATORS, "ratio": RATIOS, "surrogate": SURROGATES, "aggregation": AGGREGATIONS,
           "kl": KL_ESTIMATORS, "kl_placement": KL_PLACEMENTS, "optimizer": OPTIMIZERS}


def registered(field: str) -> tuple[str, ...]:
    """The names ``algo.<field>`` takes: the built-in ones and any registered since.

    A component is registered through :mod:`tabsim.algos`, so one registered at run time is in its
    registry once that module is loaded; a config naming built-in ones never loads it (nor JAX)."""
    algos = sys.modules.get("tabsim.algos")
    extra = getattr(algos, {"kl": "KL_ESTIMATORS"}.get(field, field.upper() + "S"), ()) if algos else ()
    return tuple(dict.fromkeys((*CHOICES[field], *extra)))


class AlgoConfig(_Section):
    estimator: str = "grpo"
    ratio: str = "token"
    surrogate: str = "clip"
    aggregation: str = "token-mean"
    kl: str = "k3"
    kl_placement: str = "none"
    epochs: int = Field(1, ge=1, le=1000)
    minibatches: int = Field(1, ge=1, le=65536)
    optimizer: str = "sgd"
    lr: float = Field(0.05, gt=0.0, le=BIG)
    beta: float = Field(0.0, ge=0.0, le=BIG)
    std_eps: float = Field(1e-8, ge=0.0, le=BIG)
    std_ddof: Literal[0, 1] = 0
    eps_low: float = Field(0.2, ge=0.0, le=BIG)
    eps_high: float = Field(0.2, ge=0.0, le=BIG)
    dual_clip_c: float = Field(3.0, gt=1.0, le=BIG)
    sapo_tau_pos: float = Field(1.0, gt=0.0, le=BIG)
    sapo_tau_neg: float = Field(1.05, gt=0.0, le=BIG)
    ent_coef: float = Field(0.0, ge=0.0, le=BIG)
    max_grad_norm: float | None = Field(None, gt=0.0, le=1e6, description="None = no clipping")
    filter: bool = False
    adam_b1: float = Field(0.9, ge=0.0, lt=1.0)
    adam_b2: float = Field(0.999, ge=0.0, lt=1.0)
    adam_eps: float = Field(1e-8, gt=0.0, le=1.0)

    @field_validator(*CHOICES)
    @classmethod
    def _choice(cls, v, info):
        return _one_of(info.field_name, v, registered(info.field_name))

    @field_validator("lr")
    @classmethod
    def _lr_min(cls, v):
        if v < LR_MIN:
            raise ValueError(f"algo.lr: must be in [{LR_MIN:g}, {BIG:g}], got {v!r} (a smaller rate moves float32 "
                             "logits by less than their last bit: training would do nothing)")
        return v

    @field_validator("std_ddof", mode="before")
    @classmethod
    def _ddof_int(cls, v):
        if isinstance(v, bool) or not isinstance(v, int):  # Literal[0, 1] alone takes True and 1.0
            raise ValueError(f"must be the integer 0 or 1, got {v!r}")
        return v


SEED_END = 2**31  # seeds are int32 in the engine: every seed of a run is in [0, SEED_END)


class TrainConfig(_Section):
    steps: int = Field(200, ge=1, le=10_000_000)
    batch_size: int = Field(16, ge=1, le=1_000_000)
    group_size: int = Field(8, ge=2, le=65536)
    eval_every: int | None = Field(None, ge=1, description="None = only at the start and the end")
    replacement: bool = False
    seeds: int = Field(8, ge=1, le=100_000)
    seed: int = Field(0, ge=0, lt=SEED_END, description="first seed; seeds are seed, seed+1, ...")
    pass_k: list[int] = Field(default_factory=list)
    maj_k: list[int] = Field(default_factory=list)
    rng: str = "fast"
    chunk_conditions: int | None = Field(None, ge=1, le=1_000_000, description="conditions per compiled call")
    metrics: list[str] | None = Field(None, description="answer-level metrics to record (None = all)")
    dynamics: Literal["sampled", "expected"] = Field(
        "sampled", description="sampled: train on sampled batches per seed; expected: iterate the exact "
                               "expected update (bandit; one deterministic flow, seed -1 in the frame)")

    @model_validator(mode="after")
    def _last_seed(self):
        last = self.seed + self.seeds - 1
        if self.dynamics == "sampled" and last >= SEED_END:
            raise ValueError(f"train.seed: the run's seeds are train.seed .. train.seed + train.seeds - 1 = "
                             f"{self.seed} .. {last}, and every seed must be in [0, 2**31) (at most {SEED_END - 1}); "
                             f"lower train.seed to at most {SEED_END - self.seeds} or run fewer seeds")
        return self

    @model_serializer(mode="wrap")
    def _default_dynamics_unwritten(self, handler):
        # a sampled run's config (and so its digest, stores and files) is the one written before the field
        out = handler(self)
        if self.dynamics == "sampled":
            out.pop("dynamics", None)
        return out

    @field_validator("rng")
    @classmethod
    def _rng(cls, v):
        return _one_of("rng", v, RNGS)

    @field_validator("seeds", mode="before")
    @classmethod
    def _seeds(cls, v):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"train.seeds is the number of seeds, an integer >= 1 (got {v!r}); the first seed "
                             "is train.seed (the run uses seeds seed, seed + 1, ..., seed + seeds - 1)")
        return v

    @field_validator("seed", mode="before")
    @classmethod
    def _seed(cls, v):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"train.seed is the first seed, one integer in [0, 2**31) (got {v!r}); the number "
                             "of seeds is train.seeds (the run uses seeds seed, seed + 1, ..., seed + seeds - 1)")
        return v

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
            if not 1 <= k <= 1_000_000:
                raise ValueError(f"every k must be an integer in [1, 1000000], got {k}")
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
        for k in tr.maj_k:
            if n_compositions(k, t.n_answers) > MAX_COMPOSITIONS:
                raise ValueError(f"train.maj_k: exact maj@{k} over {t.n_answers} answers enumerates "
                                 f"{n_compositions(k, t.n_answers)} count vectors (max {MAX_COMPOSITIONS}); use a smaller k")
        for name, levels in self.sweep.items():
            if name not in SWEEPABLE:
                static = static_field(name)
                if static is not None:
                    raise ValueError(f"sweep.{name}: {static_hint(static)}")
                raise ValueError(f"sweep.{name}: not a numeric field{_suggest(name, SWEEPABLE)}; sweepable: "
                                 f"{', '.join(sorted(SWEEPABLE))}")
            if not levels:
                raise ValueError(f"sweep.{name}: needs at least one level")
            if len(set(levels)) != len(levels):
                raise ValueError(f"sweep.{name}: a level is listed twice in {levels} (each level is one condition)")
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


def static_field(name: str) -> str | None:
    """``section.field`` when ``name`` (``n_prompts`` or ``task.n_prompts``) is a config field that a sweep
    cannot vary (it fixes array shapes or the code path), else None."""
    section, _, field = name.rpartition(".")
    for sec, model in _MODELS.items():
        if sec and (section in ("", sec)) and field in model.model_fields and field not in SWEEPABLE:
            return f"{sec}.{field}"
    return None


def static_hint(field: str) -> str:
    """How to vary the static ``field`` (``task.n_prompts``): a factorial design, one program per level."""
    name = field.rpartition(".")[2]
    return (f"{field} is a static field (it fixes array shapes or the code path, so every level is its own "
            f"compiled program); a Config's sweep varies the numeric fields of one program "
            f"({', '.join(sorted(SWEEPABLE))}). ts.run, tabsim run and tabsim sweep take {field} in a sweep and run "
            f"one group per level (docs/cli.md, 'Sweep any field'); or vary {name} as a factorial design: in "
            f"Python ts.run_factorial(base, {{\"{name}\": {{\"{field}\": "
            f"[level1, level2]}}}}, seeds=8); from the command line a plan factor "
            f"- {{name: {name}, field: {field}, levels: [level1, level2]}} run by tabsim prereg run PLAN --exploratory "
            f"(docs/howto.md, 'Define and run a factorial study'); or one tabsim run CONFIG --set {field}=LEVEL "
            "per level")


def _suggest(name, allowed) -> str:
    """`` (did you mean `x`?)`` for the closest of ``allowed`` to a misspelt ``name``, else ``""``."""
    near = difflib.get_close_matches(str(name), [str(a) for a in allowed], n=1, cutoff=0.6)
    return f" (did you mean `{near[0]}`?)" if near else ""


def _deep_merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict) and k != "sweep":
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


SECTIONS = ("task", "arms", "algo", "train", "sweep")


def _check_sections(data: dict, where: str, *, empty_tables: bool = False) -> None:
    """A section left empty (YAML ``train:`` with nothing under it reads as null) is refused, not read as
    the defaults; with ``empty_tables`` (a file) so is an empty table (TOML ``[train]``, YAML ``train: {}``),
    but for ``sweep``, where ``{}`` means "no sweep" (it replaces a preset's)."""
    for k in SECTIONS:
        if k in data and data[k] is None:
            raise ConfigError(f"{where}{k}: the section is empty (nothing under {k}:); give its fields, indented "
                              f"under it, or remove the line")
        if empty_tables and k != "sweep" and data.get(k) == {}:
            raise ConfigError(f"{where}{k}: the section is empty (a [{k}] table, or {k}: {{}}, with no fields); "
                              f"give its fields, or remove it to keep the preset's")


def _check_keys(x, where: str = "") -> None:
    """Every mapping key is a name (YAML turns ``true:``, ``~:`` or ``1:`` into other types)."""
    if isinstance(x, dict):
        for k, v in x.items():
            here = f"{where}.{k}" if where else str(k)
            if not isinstance(k, str):
                hint = " (YAML reads an unquoted true / false as a boolean: quote the key)" if isinstance(k, bool) else ""
                raise ConfigError(f"{here}: a key must be a name, got {k!r}{hint}")
            _check_keys(v, here)
    elif isinstance(x, list):
        for i, v in enumerate(x):
            _check_keys(v, f"{where}[{i}]")


def _plain(x):
    """Python values for NumPy scalars and arrays, lists for tuples (the Python API may pass any)."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    np = sys.modules.get("numpy")  # a NumPy value comes only from a process that has loaded NumPy
    if np is not None and isinstance(x, (np.generic, np.ndarray)):
        return _plain(x.tolist()) if isinstance(x, np.ndarray) else x.item()
    return x


_MODELS = {"": None, "task": TaskConfig, "arms": ArmsConfig, "algo": AlgoConfig, "train": TrainConfig}


def _hint(loc: tuple, err: dict) -> str:
    """Extra words for an error: a suggestion for a misspelt key, the quoting of a YAML boolean."""
    got = err.get("input")
    if err["type"] == "extra_forbidden":
        model = Config if len(loc) == 1 else _MODELS.get(str(loc[0]))
        if model is not None:
            return _suggest(loc[-1], model.model_fields)
    if err["type"] in ("int_type", "float_type") and isinstance(got, str):
        try:
            float(got)
        except ValueError:
            return ""
        return "; a string: write the number without quotes (YAML 1.1 files such as plans need 1.0e-2, not 1e-2)"
    if err["type"] == "string_type" and isinstance(got, bool):
        return (f"; YAML reads an unquoted {str(got).lower()} as a boolean: quote it "
                f"(\"{str(got).lower()}\")")
    return ""


def _format_error(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "config"
        msg = e["msg"].removeprefix("Value error, ")
        if loc == "config" or msg.startswith((loc + ".", loc + ":", loc + " ")):
            lines.append(msg + _hint(e["loc"], e))  # the message names the field itself
            continue
        got = e.get("input")
        quiet = isinstance(got, dict) or e["type"] == "extra_forbidden" or "got " in msg or repr(got) in msg
        shown = "" if quiet else f" (got {got!r})"
        if e["type"] == "extra_forbidden":
            msg = "unknown field"
        lines.append(f"{loc}: {msg}{shown}{_hint(e['loc'], e)}")
    return "invalid config:\n  " + "\n  ".join(lines)


def _sweep_level_problems(cfg: "Config") -> list[str]:
    """Every sweep level checked as a value of its field (0 / 1 for the switches ``filter`` and ``std_ddof``)."""
    problems = []
    for name, levels in cfg.sweep.items():
        section, field = SWEEPABLE[name]
        model = getattr(cfg, section)
        for i, level in enumerate(levels):
            value: Any = level
            if field in ("filter", "std_ddof"):
                if level not in (0.0, 1.0):
                    problems.append(f"sweep.{name}[{i}]: a switch; its levels are 0 and 1 (got {level!r})")
                    continue
                value = bool(level) if field == "filter" else int(level)
            try:
                model.__class__.model_validate({**model.model_dump(), field: value})
            except ValidationError as err:
                problems.append(f"sweep.{name}[{i}]: {err.errors()[0]['msg'].removeprefix('Value error, ')} "
                                f"(got {level!r})")
    return problems


def resolve(data: dict | None = None, **overrides) -> Config:
    """Build a validated :class:`Config` from a mapping (and a preset it names).

    Values are taken as they are: a float where an integer is meant, a string where a number is meant
    or a number where a boolean is meant is refused, and every number must be finite and in range.

    Raises:
      ConfigError: naming every bad field, its value and the allowed range.
    """
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"config: expected a mapping of sections (task, arms, algo, train, sweep), "
                          f"got {type(data).__name__}")
    _check_sections(data or {}, "")
    data = _plain(_deep_merge(dict(data or {}), overrides))
    _check_keys(data)
    name = data.get("preset")
    if name is not None:
        if not isinstance(name, str) or name not in PRESETS:
            raise ConfigError(f"preset: unknown preset {name!r}{_suggest(name, PRESETS)}; allowed: "
                              f"{', '.join(sorted(PRESETS))}")
        data = _deep_merge(PRESETS[name], data)
    if not isinstance(data.get("sweep", {}), dict):
        raise ConfigError("sweep: must be a table of field = [levels]")
    try:
        cfg = Config.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_error(err)) from None
    problems = _sweep_level_problems(cfg)
    if problems:
        raise ConfigError("invalid config:\n  " + "\n  ".join(problems))
    return cfg


CONFIG_MAX_BYTES = 1 << 20  # a config is a few hundred bytes
CONFIG_SUFFIXES = (".toml", ".yaml", ".yml", ".json")


def load_config(path: str | Path, **overrides) -> Config:
    """Read a TOML or YAML config file with a safe loader and validate it.

    Raises:
      ConfigError: the file cannot be read (see :mod:`tabsim.files.safeload` for the limits) or a value is
        bad; the message names the file and every bad field.
    """
    data = read_config_file(path)
    try:
        return resolve(data, **overrides)
    except ConfigError as err:
        raise ConfigError(str(err).replace("invalid config:", f"invalid config {path}:", 1)) from None


def read_config_file(path: str | Path) -> dict:
    """The mapping in a TOML, YAML or JSON config file, read with a safe loader (not yet validated).

    JSON is what a run writes as its ``config.json`` (the resolved config: rerunning it runs the same
    config, with the same digest). YAML is read with the YAML 1.2 core schema (only ``true``/``false`` are booleans; ``1e-3`` is a
    number). The file must be UTF-8, at most 1 MiB, nested at most 64 levels, and hold settings.
    """
    path = Path(path)
    if path.suffix not in CONFIG_SUFFIXES:
        if not path.exists():
            raise ConfigError(f"config file not found: {path}")
        raise ConfigError(f"{path}: unknown config format {path.suffix!r}; allowed: {', '.join(CONFIG_SUFFIXES)}")
    try:
        if path.suffix == ".toml":
            data = load_toml(path, max_bytes=CONFIG_MAX_BYTES, what="config file")
        elif path.suffix == ".json":  # a run's own config.json: the resolved config, rerun as it is
            data = load_json(path, max_bytes=CONFIG_MAX_BYTES, what="config file")
        else:
            data = load_yaml(path, schema="core", max_bytes=CONFIG_MAX_BYTES, what="config file")
    except LoadError as err:
        if "not found" in err.problem:
            raise ConfigError(f"config file not found: {path}") from None
        raise ConfigError(str(err).replace("malformed", "malformed config file:", 1)) from None
    if not isinstance(data, dict):
        hint = " (TOML written in a YAML file? name it .toml)" if isinstance(data, str) and " = " in data else ""
        raise ConfigError(f"{path}: the top level must be a table/mapping of sections, got "
                          f"{type(data).__name__}{hint}")
    if not data:  # `{}` (JSON): nothing to run but the defaults, as an empty TOML or YAML file
        raise ConfigError(f"{path}: the config is empty (no sections); give at least a preset or a section")
    _check_sections(data, f"{path}: ", empty_tables=True)
    return data
