"""The static half of a config: what fixes array shapes or picks a code path.

A validated :class:`~tabsim.config.Config` splits into the static structure built here (the
environment object, the algorithm's composition, the schedule, and the key that names one compiled
program) and the traced values of :meth:`Config.hyper_values`. This module loads JAX (through the
environments and the engine); the rest of :mod:`tabsim.config` does not.
"""
from __future__ import annotations

from tabsim.sim.algos import AGGREGATIONS, ESTIMATORS, KL_ESTIMATORS, RATIOS, SURROGATES, AlgoSpec
from tabsim.sim.arms import OFFLINE_ARMS
from tabsim.sim.rewards import RewardSpec
from tabsim.config.models import Config
from tabsim.config.curriculum import curriculum_fields, curriculum_key
from tabsim.config.allocation import allocation_fields, allocation_width
from tabsim.sim.envs import ENVS
from tabsim.sim.groups import GroupStage
from tabsim.sim.update import Schedule


def make_env(cfg: Config):
    """The environment object for ``cfg.task`` (static structure only)."""
    t, tr = cfg.task, cfg.train

    offline = any(a in OFFLINE_ARMS for a in cfg.arms.arms)  # otherwise the label is never drawn
    common = dict(tie=cfg.arms.tie, offline_samples=cfg.arms.offline_samples if offline else 0, pass_k=tuple(tr.pass_k),
                  maj_k=tuple(tr.maj_k), rng=tr.rng, metrics=tr.metrics,
                  **({"maj_draws": tr.maj_draws} if tr.maj_draws is not None else {}),
                  **({"prompt_metrics": tuple(tr.prompt_metrics)} if tr.prompt_metrics is not None else {}))
    if t.env == "bandit":
        return ENVS["bandit"](n_prompts=t.n_prompts, n_answers=t.n_answers, n_correct=t.n_correct,
                              heterogeneous=t.heterogeneity is not None,
                              **({"unequal": True} if t.correct_mass_ratio is not None else {}), **common)
    if "tree" not in ENVS:
        raise ValueError("task.env: 'tree' is not available in this version; allowed: bandit")
    return ENVS["tree"](n_prompts=t.n_prompts, n_answers=t.n_answers, n_correct=t.n_correct,
                        heterogeneous=t.heterogeneity is not None, **t.tree.env_kwargs(), **common)


def static_key(cfg: Config) -> tuple:
    """Everything that fixes shapes or code paths; equal keys share one compiled program."""
    t, tr = cfg.task, cfg.train
    return (t.env, t.n_prompts, t.n_answers, t.n_correct, t.heterogeneity is not None,
            tuple(sorted((k, str(v)) for k, v in t.tree.env_kwargs().items())), cfg.arms.tie, cfg.arms.offline_samples,
            tuple(cfg.arms.arms), algo_spec(cfg), schedule(cfg), tuple(tr.pass_k), tuple(tr.maj_k), tr.rng,
            None if tr.metrics is None else tuple(tr.metrics)) + (("expected",) if expected(cfg) else ()) + \
        (("unequal",) if t.correct_mass_ratio is not None else ()) + \
        (("maj_draws", tr.maj_draws) if tr.maj_draws is not None else ()) + \
        (("prompt_metrics", tuple(tr.prompt_metrics)) if tr.prompt_metrics is not None else ()) + \
        ((("reward", reward_spec(cfg)) if cfg.algo.reward_terms else ()) + curriculum_key(cfg.algo)) + \
        user_components(cfg)


USER_COMPONENTS = "user"  # marks the part of a static key that names a user's registered components


def user_components(cfg: Config) -> tuple:
    """``((USER_COMPONENTS, ((kind, name, version), ...)),)`` for the components of ``cfg`` a user registered (an
    estimator, ratio, surrogate, aggregation, KL estimator or environment), else ``()``: a component
    registered again under its name (a notebook cell run twice) is a new program, not the earlier one's."""
    spec = algo_spec(cfg)
    named = ((ESTIMATORS, spec.estimator), (RATIOS, spec.ratio), (SURROGATES, spec.surrogate),
             (AGGREGATIONS, spec.aggregation), (KL_ESTIMATORS, spec.kl), (ENVS, cfg.task.env))
    found = tuple((reg.kind, name, reg.version(name)) for reg, name in named if name in reg and not reg.is_own(name))
    return ((USER_COMPONENTS, found),) if found else ()


def expected(cfg: Config) -> bool:
    """Whether ``cfg`` asks for the exact expected flow (``train.dynamics = "expected"``)."""
    return cfg.train.dynamics == "expected"


def algo_spec(cfg: Config) -> AlgoSpec:
    """The algorithm's static composition; the entropy term and the gradient clip are compiled when their
    knob is set or swept."""
    a = cfg.algo
    return AlgoSpec(reward=reward_spec(cfg),
                    estimator=a.estimator, ratio=a.ratio, surrogate=a.surrogate, aggregation=a.aggregation,
                    kl=a.kl, kl_placement=a.kl_placement, epochs=a.epochs, minibatches=a.minibatches,
                    optimizer=a.optimizer, entropy_bonus=a.ent_coef > 0 or "ent_coef" in cfg.sweep,
                    grad_clip=a.max_grad_norm is not None or "max_grad_norm" in cfg.sweep,
                    behaviour=a.behaviour, behaviour_lag=a.behaviour_lag if a.behaviour == "stale" else 1,
                    hint_when=a.hint_when if a.behaviour == "hint" else "always",
                    behaviour_old=a.behaviour_old if a.behaviour != "policy" else "policy",
                    is_correction=a.is_correction, kl_schedule=a.kl_schedule, ref_reset_every=a.ref_reset_every,
                    ref_reset_optimizer=a.ref_reset_optimizer if a.ref_reset_every else True,
                    token_weight=a.token_weight, tracker=a.tracker,
                    prompt_skip=a.prompt_skip, **curriculum_fields(a), **allocation_fields(cfg))


def reward_spec(cfg: Config) -> RewardSpec | None:
    """The composed reward's static structure (None without reward terms: the arm's reward as is)."""
    a = cfg.algo
    if not a.reward_terms:
        return None
    return RewardSpec(terms=tuple(a.reward_terms), normalize=a.reward_normalize, style=a.reward_style)


def schedule(cfg: Config) -> Schedule:
    """The static training schedule (``eval_every`` unset: only the start and the end)."""
    tr = cfg.train
    return Schedule(steps=tr.steps, batch_size=tr.batch_size, group_size=allocation_width(cfg),
                    eval_every=tr.eval_every or tr.steps, replacement=tr.replacement,
                    groups=GroupStage(tr.group_stage, tr.group_keep or 0), refill=tr.refill)
