"""The traced hyperparameters: one frozen pytree of scalars (or vmapped vectors).

Everything numeric that does not fix an array shape or pick a code path lives here, so changing it
never recompiles and any subset of it can be a ``vmap`` axis of a sweep.
"""
from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np

from tabsim.base.hyper_defaults import HYPER_DEFAULTS as D
from tabsim.sim.pytree import pytree_dataclass


@pytree_dataclass
class Hyper:
    """The traced numbers; their defaults are :data:`tabsim.base.hyper_defaults.HYPER_DEFAULTS`, the config's."""

    # task
    prior_strength: float = D["prior_strength"]  # p_s, mass on the correct answers before the format boost
    format_boost: float = D["format_boost"]  # f: the format answer's prior mass is multiplied by (1 + f K)
    heterogeneity: float = D["heterogeneity"]  # Beta concentration of per-prompt p_s (if heterogeneous)
    # arms
    gamma: float = D["gamma"]  # random arm: P(reward = 1)
    fpr: float = D["fpr"]  # noisy arm: false-positive rate
    fnr: float = D["fnr"]  # noisy arm: false-negative rate
    # update
    lr: float = D["lr"]
    beta: float = D["beta"]  # KL coefficient
    std_eps: float = D["std_eps"]
    std_ddof: float = D["std_ddof"]  # 0 population std, 1 Bessel
    eps_low: float = D["eps_low"]
    eps_high: float = D["eps_high"]
    dual_clip_c: float = D["dual_clip_c"]
    sapo_tau_pos: float = D["sapo_tau_pos"]
    sapo_tau_neg: float = D["sapo_tau_neg"]
    ent_coef: float = D["ent_coef"]
    max_grad_norm: float = D["max_grad_norm"]  # inf = no gradient-norm clipping
    filter: float = D["filter"]  # 1 = dynamic-sampling filter on (drop zero-variance groups)
    adam_b1: float = D["adam_b1"]
    adam_b2: float = D["adam_b2"]
    adam_eps: float = D["adam_eps"]
    gvpo_beta: float = D["gvpo_beta"]  # GVPO: the implicit reward's scale beta (arXiv 2504.19599)
    # KL-Cov: share of the batch's tokens with the largest covariance (arXiv 2505.22617)
    kl_cov_ratio: float = D["kl_cov_ratio"]
    kl_cov_coef: float = D["kl_cov_coef"]  # KL-Cov: coefficient of |log ratio| on those tokens

    baseline_shift: float = D["baseline_shift"]  # AsymRE: delta added to the group-mean baseline (arXiv 2506.20520)
    # behaviour "hint": mass of the correct answers mixed into the sampler (tabsim.sim.behaviour)
    hint_lambda: float = D["hint_lambda"]
    mismatch_sigma: float = D["mismatch_sigma"]  # behaviour "mismatch": std of the sampler's logit noise
    is_cap: float = D["is_cap"]  # importance-sampling correction: the cap C (TRL vllm_importance_sampling_cap)
    kl_target: float = D["kl_target"]  # adaptive KL: target KL (verl algorithm.kl_ctrl.target_kl)
    kl_horizon: float = D["kl_horizon"]  # adaptive KL: horizon (verl algorithm.kl_ctrl.horizon)
    # reference sync: ref <- (1 - alpha) ref + alpha z (TRL ref_model_mixup_alpha)
    ref_mixup_alpha: float = D["ref_mixup_alpha"]
    # DisCO (arXiv 2505.12366), read only by the disco surrogate
    disco_tau: float = D["disco_tau"]  # the log-sum-exp temperature over the negatives
    disco_delta: float = D["disco_delta"]  # the KL budget
    disco_beta: float = D["disco_beta"]  # the squared-hinge penalty's weight


    # the reward composer (tabsim.sim.rewards), read only when algo.reward_terms lists the term
    overlong_max: float = D["overlong_max"]  # DAPO overlong punishment: L_max, in tokens (arXiv 2503.14476)
    overlong_cache: float = D["overlong_cache"]  # ... L_cache: the ramp's width before L_max
    overlong_factor: float = D["overlong_factor"]  # ... the penalty's weight (verl's overlong_buffer.penalty_factor)
    rank_penalty: float = D["rank_penalty"]  # unlikeliness reward's rank penalty (arXiv 2506.02355)
    style_weight: float = D["style_weight"]  # the style (habit) term's weight
    # the token-weight stage (tabsim.sim.algos.token_weights), read only when algo.token_weight names it
    # top_entropy: share of the batch's tokens kept, by entropy (arXiv 2506.01939)
    top_entropy_quantile: float = D["top_entropy_quantile"]
    # gtpo_conflict: weight of a positive answer's conflict token (arXiv 2508.03772)
    gtpo_conflict_weight: float = D["gtpo_conflict_weight"]

    sgrpo_noise: float = D["sgrpo_noise"]  # S-GRPO: the assumed symmetric reward-flip rate p (arXiv 2508.05928)
    # bandit: the j-th correct answer's share of p_s, r^j / sum_i r^i (task.*)
    correct_mass_ratio: float = D["correct_mass_ratio"]
    real_tau: float = D["real_tau"]  # REAL (arXiv 2602.05630): the scores' temperature
    # the per-prompt tracker (tabsim.sim.tracker), read only when algo.tracker names one
    tracker_rho: float = D["tracker_rho"]  # spo_stream: the Beta posterior's discount per visit (arXiv 2509.13232)
    # CTPO-LA (arXiv 2605.07331): log-space clip bounds at position t, times t^ctpo_power
    ctpo_clip_low: float = D["ctpo_clip_low"]
    ctpo_clip_high: float = D["ctpo_clip_high"]
    ctpo_clip_c: float = D["ctpo_clip_c"]  # the dual clip's log-space threshold
    ctpo_power: float = D["ctpo_power"]
    holder_p: float = D["holder_p"]  # HölderPO (arXiv 2605.12058): the power mean's exponent over token ratios
    # GRESO (arXiv 2506.02177): the skip rule's starting exploration probabilities and the target share of
    # zero-variance groups, read only when algo.prompt_skip names greso (tabsim.sim.prompt_skip)
    skip_p_easy: float = D["skip_p_easy"]
    skip_p_hard: float = D["skip_p_hard"]
    skip_target: float = D["skip_target"]
    # Clip-Cov (arXiv 2505.22617, verl clip_cov): share of the valid tokens cut, and the covariance band drawn from
    clip_cov_ratio: float = D["clip_cov_ratio"]
    clip_cov_lb: float = D["clip_cov_lb"]
    clip_cov_ub: float = D["clip_cov_ub"]
    # VAS (MMR1, arXiv 2509.21268): the share of a batch drawn by weight and the weights' momentum, read only when
    # algo.curriculum names vas (tabsim.sim.vas)
    vas_ratio: float = D["vas_ratio"]
    vas_momentum: float = D["vas_momentum"]
    # PPO with a tabular critic (algo.tracker = "value", tabsim.sim.critic): the critic's step size
    value_lr: float = D["value_lr"]
    # DRPO (arXiv 2510.04474): the length reward's temperature lambda over the positives, read only by the drpo surrogate
    drpo_lambda: float = D["drpo_lambda"]
    # OPMD as arXiv 2509.24203 reads it (Trinity-RFT rec, regularizer k2): the squared log-ratio's coefficient, read only by
    # the opmd surrogate (tabsim.sim.algos.rec)
    opmd_coef: float = D["opmd_coef"]


HYPER_FIELDS = tuple(f.name for f in dataclasses.fields(Hyper))


def stack_hypers(rows: list[dict], shared=()) -> Hyper:
    """Stack per-condition dicts of hyperparameter values into one Hyper of ``[C]`` arrays.

    Fields named in ``shared`` (equal in every condition of a run) are kept as float32 scalars: the
    engine then holds one copy instead of one per run. A different set of shared fields compiles anew.
    """
    distinct: dict = {}  # a chunk repeats one mapping for every seed of a condition: each is read once
    at = np.asarray([distinct.setdefault(id(r), (len(distinct), r))[0] for r in rows], dtype=np.intp)
    values = [r for _, r in distinct.values()]
    return Hyper(**{name: np.float32(rows[0][name]) if name in shared else
                    np.asarray([float(r[name]) for r in values], dtype=np.float32)[at] for name in HYPER_FIELDS})
