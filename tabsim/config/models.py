"""The config's sections as pydantic models, the sweepable fields and the static ones."""
from __future__ import annotations

import hashlib
import itertools
import json
import sys
from typing import Literal

from pydantic import Field, field_validator, model_serializer, model_validator

# the names, in plain Python: a config is refused before JAX loads (a test checks it)
from tabsim.base.choices import (AGGREGATIONS, ANSWER_METRICS, ARMS, ESTIMATORS,
                                 HYPER_FIELDS, KL_ESTIMATORS, KL_PLACEMENTS,
                            MAX_COMPOSITIONS, OPTIMIZERS, RATIOS, RNGS, SURROGATES, check_tree, n_compositions)
from tabsim.base.hyper_defaults import HYPER_DEFAULTS as D
from tabsim.config.base import BIG, LR_MIN, SEED_END, Section, one_of, suggest
from tabsim.base.choices import OPTIONAL_METRICS, TOKEN_WEIGHTS
from tabsim.config.prompt_metrics import check_prompt_metrics
from tabsim.config.behaviour import BehaviourKnobs, check_behaviour
from tabsim.config.groups import ALGO_KNOBS as TRACKER_KNOBS, ALGO_UNWRITTEN as TRACKER_UNWRITTEN
from tabsim.config.groups import GroupKnobs, TrackerKnobs, check_prompt_state
from tabsim.config.allocation import ALGO_KNOBS as ALLOC_KNOBS, ALGO_UNWRITTEN as ALLOC_UNWRITTEN
from tabsim.config.allocation import AllocationKnobs, check_allocation
from tabsim.config.group_edge import ALGO_KNOBS as EDGE_KNOBS, ALGO_UNWRITTEN as EDGE_UNWRITTEN, EdgeKnobs, check_edges
from tabsim.config.losses import LOSS_KNOB_OF, LossKnobs
from tabsim.config.length import LENGTH_KNOB_OF, LengthKnobs
from tabsim.config.tree import TreeConfig
from tabsim.config.rewards import check_rewards
from tabsim.config.facts import check_facts
from tabsim.config.schedule import EVAL_POINTS, default_eval_every  # noqa: F401 (re-exported)


class TaskConfig(Section):
    env: Literal["bandit", "tree"] = "bandit"
    n_prompts: int = Field(40, ge=1, le=1_000_000)
    n_answers: int = Field(8, ge=2, le=4096)
    n_correct: int = Field(2, ge=1)
    prior_strength: float = Field(D["prior_strength"], gt=0.0, lt=1.0)
    format_boost: float = Field(D["format_boost"], ge=0.0, le=1e4)
    heterogeneity: float | None = Field(None, gt=0.0, le=1e6, description="Beta concentration; None = homogeneous")
    correct_mass_ratio: float | None = Field(None, gt=0.0, le=BIG, description="bandit: the j-th correct answer gets "
                                              "p_s r^j / sum_i r^i (j = 0..k-1); None = the equal split p_s / k")
    tree: TreeConfig = Field(default_factory=TreeConfig, description="tree-MDP structure (env = tree)")

    @field_validator("tree")
    @classmethod
    def _tree(cls, v, info):
        env = info.data.get("env", "bandit")
        given = v.model_dump()
        if env != "tree":
            if given:
                raise ValueError(f"task.tree: only read when task.env = 'tree' (it is {env!r}); remove "
                                 f"{', '.join(map(str, given))} or set task.env = 'tree'")
            return v
        check_tree(given, info.data.get("n_answers"), big=BIG)  # the leaves against task.n_answers
        return v

    @model_serializer(mode="wrap")
    def _equal_split_unwritten(self, handler):
        # the equal split's config (and so its digest, stores and files) is the one written before the field
        out = handler(self)
        if self.correct_mass_ratio is None:
            out.pop("correct_mass_ratio", None)
        return out

    @model_validator(mode="after")
    def _k_lt_K(self):
        if self.n_correct >= self.n_answers:
            raise ValueError(f"n_correct must be < n_answers={self.n_answers} (k >= K leaves no wrong answer), "
                             f"got {self.n_correct}")
        return self


class ArmsConfig(Section):
    arms: list[str] = Field(default_factory=lambda: ["frozen", "random", "majority", "true"], min_length=1)
    gamma: float = Field(D["gamma"], ge=0.0, le=1.0)
    fpr: float = Field(D["fpr"], ge=0.0, le=1.0)
    fnr: float = Field(D["fnr"], ge=0.0, le=1.0)
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
            one_of("arm", a, ARMS)
        if len(set(v)) != len(v):
            raise ValueError(f"arms listed twice: {v}")
        return v


# fields whose value names a registered component, and their built-in names
CHOICES = {"estimator": ESTIMATORS, "ratio": RATIOS, "surrogate": SURROGATES, "aggregation": AGGREGATIONS,
           "kl": KL_ESTIMATORS, "kl_placement": KL_PLACEMENTS, "optimizer": OPTIMIZERS, "token_weight": TOKEN_WEIGHTS}


def registered(field: str) -> tuple[str, ...]:
    """The names ``algo.<field>`` takes: the built-in ones and any registered since.

    A component is registered through :mod:`tabsim.sim.algos`, so one registered at run time is in its
    registry once that module is loaded; a config naming built-in ones never loads it (nor JAX)."""
    algos = sys.modules.get("tabsim.sim.algos")
    extra = getattr(algos, {"kl": "KL_ESTIMATORS"}.get(field, field.upper() + "S"), ()) if algos else ()
    return tuple(dict.fromkeys((*CHOICES[field], *extra)))


# AlgoConfig fields written to a config only when set away from their default (see its serializer)
ALGO_UNWRITTEN_AT_DEFAULT = ("gvpo_beta", "kl_cov_ratio", "kl_cov_coef",
                             "reward_terms", "reward_normalize", "reward_style", "overlong_max", "overlong_cache",
                             "overlong_factor", "rank_penalty", "style_weight", "baseline_shift",
                             "behaviour", "behaviour_lag", "behaviour_old", "is_correction", "hint_lambda",
                             "mismatch_sigma", "is_cap", "kl_schedule", "kl_target", "kl_horizon", "ref_reset_every",
                             "ref_mixup_alpha", "ref_reset_optimizer", "hint_when",
                             "disco_tau", "disco_delta", "disco_beta",
                             "token_weight", "top_entropy_quantile", "gtpo_conflict_weight", "sgrpo_noise", "real_tau",
                             "ctpo_clip_low", "ctpo_clip_high", "ctpo_clip_c", "ctpo_power")
# knob -> (field, component): written whenever that component is chosen (a written config shows what it reads)
ALGO_KNOB_OF = {"gvpo_beta": ("surrogate", "gvpo"), "kl_cov_ratio": ("surrogate", "kl_cov"),
                "kl_cov_coef": ("surrogate", "kl_cov"), "disco_tau": ("surrogate", "disco"),
                "disco_delta": ("surrogate", "disco"), "disco_beta": ("surrogate", "disco"),
                "real_tau": ("surrogate", "real"),
                "ctpo_clip_low": ("surrogate", "ctpo"), "ctpo_clip_high": ("surrogate", "ctpo"),
                "ctpo_clip_c": ("surrogate", "ctpo"), "ctpo_power": ("surrogate", "ctpo")}
ALGO_KNOB_OF.update(**TRACKER_KNOBS, **LOSS_KNOB_OF, **EDGE_KNOBS)  # tabsim.config.groups (tracker, prompt skip), config.losses
ALGO_UNWRITTEN_AT_DEFAULT += (*TRACKER_UNWRITTEN, *EDGE_UNWRITTEN, *LOSS_KNOB_OF, *ALLOC_UNWRITTEN)  # and config.allocation's
ALGO_KNOB_OF.update(**ALLOC_KNOBS)
ALGO_KNOB_OF.update(**LENGTH_KNOB_OF)  # tabsim.config.length
ALGO_UNWRITTEN_AT_DEFAULT += tuple(LENGTH_KNOB_OF)


class AlgoConfig(EdgeKnobs, BehaviourKnobs, TrackerKnobs, LossKnobs, LengthKnobs, AllocationKnobs):  # config.behaviour, ...
    estimator: str = "grpo"
    ratio: str = "token"
    surrogate: str = "clip"
    aggregation: str = "token-mean"
    kl: str = "k3"
    kl_placement: str = "none"
    epochs: int = Field(1, ge=1, le=1000)
    minibatches: int = Field(1, ge=1, le=65536)
    optimizer: str = "sgd"
    lr: float = Field(D["lr"], gt=0.0, le=BIG)
    beta: float = Field(D["beta"], ge=0.0, le=BIG)
    std_eps: float = Field(D["std_eps"], ge=0.0, le=BIG)
    std_ddof: Literal[0, 1] = int(D["std_ddof"])
    eps_low: float = Field(D["eps_low"], ge=0.0, le=BIG)
    eps_high: float = Field(D["eps_high"], ge=0.0, le=BIG)
    dual_clip_c: float = Field(D["dual_clip_c"], gt=1.0, le=BIG)
    sapo_tau_pos: float = Field(D["sapo_tau_pos"], gt=0.0, le=BIG)
    sapo_tau_neg: float = Field(D["sapo_tau_neg"], gt=0.0, le=BIG)
    ent_coef: float = Field(D["ent_coef"], ge=0.0, le=BIG)
    max_grad_norm: float | None = Field(None, gt=0.0, le=1e6, description="None = no clipping")
    filter: bool = bool(D["filter"])
    adam_b1: float = Field(D["adam_b1"], ge=0.0, lt=1.0)
    adam_b2: float = Field(D["adam_b2"], ge=0.0, lt=1.0)
    adam_eps: float = Field(D["adam_eps"], gt=0.0, le=1.0)
    gvpo_beta: float = Field(D["gvpo_beta"], gt=0.0, le=BIG)
    kl_cov_ratio: float = Field(D["kl_cov_ratio"], gt=0.0, le=1.0)
    kl_cov_coef: float = Field(D["kl_cov_coef"], ge=0.0, le=BIG)
    # the reward composer (tabsim.sim.rewards): its terms, in order, and how they are normalised (static), and
    # the terms' numbers (traced)
    reward_terms: list[str] = Field(default=[], description="reward terms composed with the arm's reward, in order "
                                                             "(none: the arm's reward as is)")
    reward_normalize: str = Field("none", description="none: the terms summed; group: each part z-scored in its "
                                                      "group before the sum")
    reward_style: int = Field(0, ge=0, le=1023, description="the style the 'style' term rewards (tree: an index "
                                                              "into task.tree.styles; bandit: 0, its format answer)")
    overlong_max: float = Field(D["overlong_max"], gt=0.0, le=BIG)
    overlong_cache: float = Field(D["overlong_cache"], gt=0.0, le=BIG)
    overlong_factor: float = Field(D["overlong_factor"], ge=0.0, le=BIG)
    rank_penalty: float = Field(D["rank_penalty"], ge=0.0, le=1.0)
    style_weight: float = Field(D["style_weight"], ge=-BIG, le=BIG)
    disco_tau: float = Field(D["disco_tau"], gt=0.0, le=BIG)
    disco_delta: float = Field(D["disco_delta"], ge=0.0, le=BIG)
    disco_beta: float = Field(D["disco_beta"], ge=0.0, le=BIG)
    real_tau: float = Field(D["real_tau"], gt=0.0, le=BIG)
    ctpo_clip_low: float = Field(D["ctpo_clip_low"], gt=0.0, le=BIG)
    ctpo_clip_high: float = Field(D["ctpo_clip_high"], gt=0.0, le=BIG)
    ctpo_clip_c: float = Field(D["ctpo_clip_c"], gt=0.0, le=BIG)
    ctpo_power: float = Field(D["ctpo_power"], ge=-BIG, le=BIG)

    @model_serializer(mode="wrap")
    def _new_knobs_unwritten_at_default(self, handler):
        # a knob added after a config was written is left out at its default, so that config's digest (and the
        # runs' stores and files) stays the one written before the knob existed
        out = handler(self)
        for name in ALGO_UNWRITTEN_AT_DEFAULT:
            reader = ALGO_KNOB_OF.get(name)
            if reader is not None and getattr(self, reader[0]) == reader[1]:
                continue  # the chosen component reads it: shown even at its default
            if name in out and getattr(self, name) == type(self).model_fields[name].default:
                out.pop(name)
        return out
    baseline_shift: float = Field(D["baseline_shift"], ge=-BIG, le=BIG)
    # the token-weight stage (tabsim.sim.algos.token_weights) and its knobs
    token_weight: str = Field("none", description="a constant weight on each token's surrogate loss; none = no weights")
    top_entropy_quantile: float = Field(D["top_entropy_quantile"], gt=0.0, le=1.0, description="top_entropy: "
                                        "share of the batch's tokens kept, by entropy (TRL top_entropy_quantile)")
    gtpo_conflict_weight: float = Field(D["gtpo_conflict_weight"], ge=0.0, le=BIG, description="gtpo_conflict: "
                                        "weight of a positive answer's conflict token")

    sgrpo_noise: float = Field(D["sgrpo_noise"], ge=0.0, lt=0.5)

    @field_validator(*CHOICES)
    @classmethod
    def _choice(cls, v, info):
        return one_of(info.field_name, v, registered(info.field_name))

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



class TrainConfig(GroupKnobs):  # the group stage's and refill's fields: tabsim.config.groups
    steps: int = Field(200, ge=1, le=10_000_000)
    batch_size: int = Field(16, ge=1, le=1_000_000)
    group_size: int = Field(8, ge=2, le=65536)
    eval_every: int | None = Field(None, ge=1, description="None = only at the start and the end")
    replacement: bool = False
    seeds: int = Field(8, ge=1, le=100_000)
    seed: int = Field(0, ge=0, lt=SEED_END, description="first seed; seeds are seed, seed+1, ...")
    pass_k: list[int] = Field(default_factory=list)
    maj_k: list[int] = Field(default_factory=list)
    maj_draws: int | None = Field(None, ge=100, le=1_000_000, description="sampled groups per prompt estimating a "
                                  "maj@k above the exact enumeration cap (None: such a k is refused)")
    rng: str = "fast"
    chunk_conditions: int | None = Field(None, ge=1, le=1_000_000, description="conditions per compiled call")
    metrics: list[str] | None = Field(None, description="answer-level metrics to record (None = all)")
    dynamics: Literal["sampled", "expected"] = Field(
        "sampled", description="sampled: train on sampled batches per seed; expected: iterate the exact "
                               "expected update (bandit; one deterministic flow, seed -1 in the frame)")
    prompt_metrics: list[str] | None = Field(None, description="metrics also recorded per prompt (Result.prompts)")
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
        if self.maj_draws is None:  # likewise a run with every maj@k exact
            out.pop("maj_draws", None)
        if self.prompt_metrics is None:  # likewise a run without per-prompt metrics
            out.pop("prompt_metrics", None)
        return self.group_fields_unwritten(out)  # likewise the group stage's and refill's at their defaults

    @field_validator("rng")
    @classmethod
    def _rng(cls, v):
        return one_of("rng", v, RNGS)

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
        known = ANSWER_METRICS + OPTIONAL_METRICS  # the optional ones are recorded only when named
        if not v:
            raise ValueError(f"list at least one of {', '.join(known)} (or leave it unset for "
                             f"{', '.join(ANSWER_METRICS)})")
        for m in v:
            one_of("metric", m, known)
        return [m for m in known if m in v]  # canonical order, no repeats

    @field_validator("pass_k", "maj_k")
    @classmethod
    def _ks(cls, v):
        for k in v:
            if not 1 <= k <= 1_000_000:
                raise ValueError(f"every k must be an integer in [1, 1000000], got {k}")
        return sorted(set(v))


class Config(Section):
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
        check_prompt_state(tr, a)  # the tracker and the prompt skip (tabsim.config.groups)
        check_allocation(tr, a)  # tabsim.config.allocation
        if not tr.replacement and tr.batch_size + tr.refill > t.n_prompts:
            raise ValueError(f"train.refill: batch_size + refill = {tr.batch_size} + {tr.refill} candidate prompts "
                             f"must be <= task.n_prompts={t.n_prompts} when drawing without replacement")
        check_edges(t, tr, a)  # a stage ranking answers by advantage, a curriculum (tabsim.config.group_edge)
        if tr.batch_size % a.minibatches:
            raise ValueError(f"algo.minibatches must divide train.batch_size={tr.batch_size}, got {a.minibatches}")
        if tr.eval_every is not None and tr.steps % tr.eval_every:
            raise ValueError(f"train.eval_every must divide train.steps={tr.steps}, got {tr.eval_every}")
        check_behaviour(t, tr, a)  # the behaviour sampler and KL schedules (tabsim.config.behaviour)
        for k in tr.maj_k:
            if n_compositions(k, t.n_answers) > MAX_COMPOSITIONS and tr.maj_draws is None:
                raise ValueError(f"train.maj_k: exact maj@{k} over {t.n_answers} answers enumerates "
                                 f"{n_compositions(k, t.n_answers)} count vectors (max {MAX_COMPOSITIONS}); use a smaller k "
                                 "or set train.maj_draws to estimate it from that many sampled groups")
        check_prompt_metrics(t, tr)
        for name, levels in self.sweep.items():
            if name not in SWEEPABLE:
                static = static_field(name)
                if static is not None:
                    raise ValueError(f"sweep.{name}: {static_hint(static)}")
                raise ValueError(f"sweep.{name}: unknown field{suggest(name, field_names())}; a sweep varies the "
                                 f"numeric fields ({', '.join(sorted(SWEEPABLE))}, bare or dotted: algo.lr) "
                                 "and, in groups, the static ones (task.n_prompts, algo.estimator, preset, ...)")
            if not levels:
                raise ValueError(f"sweep.{name}: needs at least one level")
            if len(set(levels)) != len(levels):
                raise ValueError(f"sweep.{name}: a level is listed twice in {levels} (each level is one condition)")
        check_rewards(self)  # the reward composer's settings (tabsim.config.rewards)
        check_facts(self)  # the environments' optional facts (tabsim.config.facts)
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
            "heterogeneity": t.heterogeneity if t.heterogeneity is not None else D["heterogeneity"],
            "correct_mass_ratio": t.correct_mass_ratio if t.correct_mass_ratio is not None else D["correct_mass_ratio"],
            "gamma": arms.gamma, "fpr": arms.fpr, "fnr": arms.fnr,
            "max_grad_norm": a.max_grad_norm if a.max_grad_norm is not None else D["max_grad_norm"],
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
    "fnr": ("arms", "fnr"), "correct_mass_ratio": ("task", "correct_mass_ratio"),
    **{n: ("algo", n) for n in HYPER_FIELDS if n not in ("prior_strength", "format_boost", "heterogeneity",
                                                          "gamma", "fpr", "fnr", "correct_mass_ratio")},
}


def traced_name(name: str) -> str | None:
    """The sweep's name of a numeric field (``lr`` for ``lr`` or ``algo.lr``, ``gamma`` for ``arms.gamma``),
    or None for a static or unknown field."""
    if name in SWEEPABLE:
        return name
    section, _, field = str(name).partition(".")
    return field if SWEEPABLE.get(field) == (section, field) else None


def field_names() -> list[str]:
    """Every name a sweep, ``--vary`` or ``--set`` may give a field by: the numeric fields bare and dotted
    (``lr``, ``algo.lr``), the static ones dotted (``task.n_prompts``), and ``preset``."""
    dotted = [f"{sec}.{f}" for sec, model in SECTION_MODELS.items() if sec for f in model.model_fields]
    return ["preset", *sorted(SWEEPABLE), *dotted]


def static_field(name: str) -> str | None:
    """``section.field`` when ``name`` (``n_prompts`` or ``task.n_prompts``) is a config field that a sweep
    cannot vary (it fixes array shapes or the code path), else None."""
    section, _, field = name.rpartition(".")
    for sec, model in SECTION_MODELS.items():
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



SECTION_MODELS = {"": None, "task": TaskConfig, "arms": ArmsConfig, "algo": AlgoConfig, "train": TrainConfig}
