"""The reference study's design: its sizes (:func:`settings`), its pre-set constants, the paper's
headline numbers and the designs of the five studies (:func:`build_designs`).

Light to import: ``tabsim reproduce --help`` takes :data:`SCALES` from here, so JAX, pandas and the
statistics stack are imported inside the functions that need them.
"""
from __future__ import annotations

import copy
import dataclasses

from tabsim.config.presets import PRESETS

SCALES = ("default", "heavy")  # the study sizes `tabsim reproduce --scale` offers
FIGURE_MODULE = "tabsim.studies.reference.figures"  # the figures' functions, preloaded by the figure pool's server

SWEEP_PRIORS = (0.20, 0.35, 0.50, 0.65, 0.80)
GRID_PRIORS = tuple(round(0.20 + 0.05 * i, 2) for i in range(13))  # crossover grid, 0.20 .. 0.80
STRONG_PRIOR, WEAK_PRIOR, POWER_PRIOR = 0.80, 0.35, 0.50
FAMILY_SEED0 = 100_000  # the families are fresh replications: their seeds differ from the sweep's
# Pre-set decision constants (written down before any run, STYLE section 8).
CI_LEVEL = 0.95
ADDITIVITY_THRESHOLD = 0.20  # interaction ratio (docs/science.md, the reference simulator)
SHARE_THRESHOLD = 0.60  # verdict rule (docs/science.md, the reference simulator)
GATE_TOLERANCE = 0.05  # widest interval (accuracy units) that still counts as a point
TARGET_HALF_WIDTH = 0.02  # power: wanted CI half-width of d_elicit and d_rd
POWER_SEEDS_GRID = (4, 8, 16, 32, 64, 128)
PAPER_SEEDS = 8  # seeds per condition in the reference study
# Interval method of every partition term: Student t for differences, Fieller for ratios. With 8 seeds
# the BCa bootstrap covers ~0.88 of the time where t covers ~0.95 (experiments/interval_coverage,
# tests/plotting/test_figures.py), so the reproduction uses t; the reference gate keeps the paper's percentile rule.
INTERVAL_METHOD = "t"

# The paper's headline numbers (docs/science.md, the reference simulator).
PAPER = {
    "rd_fraction_0.20": 1.39, "rd_fraction_0.80": 0.05, "interaction_ratio": 0.385, "coef_AC": -0.089,
    "elicitation_share_strong": 0.98, "rd_share_weak": 1.18,
}
HEAVY_TASK = {"n_prompts": 80, "n_answers": 10}
HEAVY_TRAIN = {"group_size": 10, "batch_size": 20}


@dataclasses.dataclass(frozen=True)
class Settings:
    """Sizes of the five studies (validated by :func:`settings`)."""

    preset: str
    scale: str
    seeds: int  # per condition: sweep, crossover grid, families
    steps: int
    factorial_seeds: int
    factorial_steps: int
    pilot_seeds: int  # seeds of one pilot of the gate
    pilot_replicates: int
    power_seeds: int  # pilot seeds behind the power curve
    task: dict
    train: dict
    n_resamples: int = 2000
    overrides: dict = dataclasses.field(default_factory=dict)  # ``--set``: config values over the preset and scale

    def base(self, steps: int) -> dict:
        """Every study's base config: the preset, the scale's sizes, the overrides, then ``steps``."""
        # lazy: tabsim.config loads JAX; `tabsim reproduce --help` imports this module
        from tabsim.config import deep_merge

        base = deep_merge({"preset": self.preset, "task": dict(self.task), "train": dict(self.train)}, self.overrides)
        base["train"] = {**base["train"], "steps": steps}
        return base


# Config values that the studies set themselves, or that an option of `tabsim reproduce` sets: an override
# of one would be replaced without a word, so it is refused with what to use instead.
STUDY_KEYS = {
    "preset": "choose the preset with --preset (preset= in Python)",
    "sweep": "the five studies set their own factors and levels",
    "task.prior_strength": "every study sets the prior strength itself (the sweep, grid, factorial, gate, families "
                           "and power levels are pre-set)",
    "train.steps": "set the training steps of every study with --steps",
    "train.seeds": "set the seeds per condition with --seeds",
    "train.seed": "the studies number their own seeds; set how many with --seeds",
}


def check_overrides(overrides: dict) -> None:
    """Refuse an override of a value the studies or ``reproduce``'s own options set (:data:`STUDY_KEYS`),
    with a ``ValueError`` naming the key and what to use instead."""
    if not isinstance(overrides, dict):
        raise ValueError(f"overrides: expected a mapping such as {{'algo': {{'lr': 0.05}}}}, got {overrides!r}")
    for key, why in STUDY_KEYS.items():
        section, _, name = key.partition(".")
        if section in overrides and (not name or (isinstance(overrides[section], dict) and name in overrides[section])):
            raise ValueError(f"{key}: not overridable in the reproduction: {why}")


def settings(*, scale: str = "default", seeds: int | None = None, steps: int | None = None,
             preset: str = "paper", n_resamples: int = 2000, overrides: dict | None = None) -> Settings:
    """Study sizes for a scale, with optional overrides; bad values raise ``ValueError`` naming them.

    ``default``: the paper's sizes (8 seeds x 200 steps, N=40, K=8, G=8, batch 16). ``heavy``: 50
    seeds x 400 steps for the sweep, 100 seeds x 500 steps for the factorial, N=80, K=10, G=10,
    batch 20. ``seeds`` / ``steps`` override every study. ``overrides`` is a nested config mapping
    (``{"algo": {"lr": 0.05}}``, what ``--set algo.lr=0.05`` gives) applied over the preset and the
    scale in the base of every study; values the studies set themselves are refused
    (:data:`STUDY_KEYS`), and so is a study that would record no pass@1 or run no seeds.
    """
    from tabsim.config import (  # lazy: tabsim.config loads JAX; `tabsim reproduce --help` imports this module
        ConfigError,
        deep_merge,
        resolve,
    )

    if scale not in SCALES:
        raise ValueError(f"scale: unknown scale {scale!r}; allowed: {', '.join(SCALES)}")
    if preset not in PRESETS:
        raise ValueError(f"preset: unknown preset {preset!r}; allowed: {', '.join(sorted(PRESETS))}")
    for name, val, lo in (("seeds", seeds, 2), ("steps", steps, 1)):
        if val is not None and (isinstance(val, bool) or not isinstance(val, int) or val < lo):
            raise ValueError(f"{name}: must be an integer >= {lo}, got {val!r}")
    heavy = scale == "heavy"
    s = seeds if seeds is not None else (50 if heavy else PAPER_SEEDS)
    fs = seeds if seeds is not None else (100 if heavy else PAPER_SEEDS)
    st = steps if steps is not None else (400 if heavy else None)
    fst = steps if steps is not None else (500 if heavy else None)
    task = dict(HEAVY_TASK) if heavy else {}
    train = dict(HEAVY_TRAIN) if heavy else {}
    overrides = {} if overrides is None else overrides
    check_overrides(overrides)
    try:
        cfg = resolve(deep_merge({"preset": preset, "task": task, "train": train}, overrides))
    except ConfigError as err:
        raise ValueError(f"preset {preset!r}" + (" with the overrides" if overrides else "") + f": {err}") from None
    need = ("frozen", "random", "majority", "true")
    missing = [a for a in need if a not in cfg.arms.arms]
    if missing:
        lacks = "arms.arms" if "arms" in overrides else "the preset"
        raise ValueError(f"preset {preset!r}: the partition needs arms {list(need)}; {lacks} lacks {missing}")
    if cfg.train.metrics is not None and "pass1" not in cfg.train.metrics:
        raise ValueError(f"train.metrics: {cfg.train.metrics} lacks pass1, which every study of the reproduction "
                         "analyses; add it (e.g. --set train.metrics=[pass1,entropy]) or leave train.metrics unset")
    if cfg.train.dynamics != "sampled":
        raise ValueError(f"train.dynamics: {cfg.train.dynamics!r}; the reproduction's intervals are over seeds, so "
                         "it needs sampled training (dynamics = 'sampled')")
    st = st if st is not None else cfg.train.steps
    fst = fst if fst is not None else cfg.train.steps
    pilot = min(PAPER_SEEDS, s)
    return Settings(preset=preset, scale=scale, seeds=s, steps=st, factorial_seeds=fs, factorial_steps=fst,
                    pilot_seeds=pilot, pilot_replicates=8, power_seeds=max(32, s), task=task, train=train,
                    n_resamples=n_resamples, overrides=copy.deepcopy(overrides))


def uniform_prior(cfg) -> float:
    """p_s that makes every answer equally likely without the format boost: ``k / K``."""
    return cfg.task.n_correct / cfg.task.n_answers


def mode_switch_prior(cfg) -> float:
    """Prior strength where a correct answer becomes the prior's mode.

    ``p / k = (1 - p) (1 + f K) / (K - k)``  =>  ``p* = k (1 + f K) / (k (1 + f K) + K - k)``.
    """
    k, K, f = cfg.task.n_correct, cfg.task.n_answers, cfg.task.format_boost
    return k * (1 + f * K) / (k * (1 + f * K) + K - k)


def build_designs(s: Settings) -> dict:
    """The designs of the five studies (units shared between them run once)."""
    # lazy: both load JAX (tabsim.studies.factorial pandas too); see settings()
    from tabsim.config import resolve
    from tabsim.studies.factorial import Factor, make_design

    base, fbase = s.base(s.steps), s.base(s.factorial_steps)
    cfg = resolve(base)
    seeds = range(s.seeds)
    prior = lambda levels: Factor("prior_strength", "task.prior_strength", tuple(levels))  # noqa: E731
    fmt = lambda f: Factor("format_boost", "task.format_boost", (f,))  # noqa: E731
    f0 = cfg.task.format_boost
    n_gate = s.pilot_seeds * s.pilot_replicates
    return {
        "prior_sweep": make_design(base, [prior(SWEEP_PRIORS)], seeds=seeds, name="prior_sweep"),
        "crossover_grid": make_design(base, [prior(GRID_PRIORS)], seeds=seeds, name="crossover_grid"),
        "factorial": make_design(fbase, [
            Factor("reward", "arm", ("true", "majority")),
            Factor("filter", "algo.filter", (1, 0), labels=("on", "off")),
            Factor("prior", "task.prior_strength", (STRONG_PRIOR, WEAK_PRIOR)),
        ], seeds=range(s.factorial_seeds), name="factorial"),
        "gate_strong": make_design(base, [prior([STRONG_PRIOR]), fmt(f0)], seeds=range(n_gate), name="gate_strong"),
        "gate_uniform": make_design(base, [prior([uniform_prior(cfg)]), fmt(0.0)], seeds=range(n_gate),
                                    name="gate_uniform"),
        "families": make_design(base, [Factor("family", "task.prior_strength", (STRONG_PRIOR, WEAK_PRIOR),
                                              labels=("strong", "weak"))],
                                seeds=range(FAMILY_SEED0, FAMILY_SEED0 + s.seeds), name="families"),
        "power": make_design(base, [prior([POWER_PRIOR])], seeds=range(s.power_seeds), name="power"),
    }
