"""The traced hyperparameters: one frozen pytree of scalars (or vmapped vectors).

Everything numeric that does not fix an array shape or pick a code path lives here, so changing it
never recompiles and any subset of it can be a ``vmap`` axis of a sweep.
"""
from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np

from tabsim.sim.pytree import pytree_dataclass


@pytree_dataclass
class Hyper:
    # task
    prior_strength: float = 0.5  # p_s, mass on the correct answers before the format boost
    format_boost: float = 0.2  # f: the format answer's prior mass is multiplied by (1 + f K)
    heterogeneity: float = 20.0  # Beta concentration of per-prompt p_s (if heterogeneous)
    # arms
    gamma: float = 0.5  # random arm: P(reward = 1)
    fpr: float = 0.0  # noisy arm: false-positive rate
    fnr: float = 0.0  # noisy arm: false-negative rate
    # update
    lr: float = 0.05
    beta: float = 0.01  # KL coefficient
    std_eps: float = 1e-8
    std_ddof: float = 0.0  # 0 population std, 1 Bessel
    eps_low: float = 0.2
    eps_high: float = 0.2
    dual_clip_c: float = 3.0
    sapo_tau_pos: float = 1.0
    sapo_tau_neg: float = 1.05
    ent_coef: float = 0.0
    max_grad_norm: float = float("inf")  # inf = no gradient-norm clipping
    filter: float = 1.0  # 1 = dynamic-sampling filter on (drop zero-variance groups)
    adam_b1: float = 0.9
    adam_b2: float = 0.999
    adam_eps: float = 1e-8
    gvpo_beta: float = 0.1  # GVPO: the implicit reward's scale beta (arXiv 2504.19599)
    kl_cov_ratio: float = 2e-4  # KL-Cov: share of the batch's tokens with the largest covariance (arXiv 2505.22617)
    kl_cov_coef: float = 1.0  # KL-Cov: coefficient of |log ratio| on those tokens

    baseline_shift: float = -0.1  # AsymRE: delta added to the group-mean baseline (arXiv 2506.20520)
    hint_lambda: float = 0.5  # behaviour "hint": mass of the correct answers mixed into the sampler (tabsim.sim.behaviour)
    mismatch_sigma: float = 0.1  # behaviour "mismatch": std of the sampler's logit noise
    is_cap: float = 2.0  # importance-sampling correction: the cap C (TRL vllm_importance_sampling_cap)
    kl_target: float = 0.1  # adaptive KL: target KL (verl algorithm.kl_ctrl.target_kl)
    kl_horizon: float = 10000.0  # adaptive KL: horizon (verl algorithm.kl_ctrl.horizon)
    ref_mixup_alpha: float = 1.0  # reference sync: ref <- (1 - alpha) ref + alpha z (TRL ref_model_mixup_alpha)
    # DisCO (arXiv 2505.12366), read only by the disco surrogate
    disco_tau: float = 10.0  # the log-sum-exp temperature over the negatives
    disco_delta: float = 1e-4  # the KL budget
    disco_beta: float = 1e3  # the squared-hinge penalty's weight


    # the reward composer (tabsim.sim.rewards), read only when algo.reward_terms lists the term
    overlong_max: float = 4.0  # DAPO overlong punishment: L_max, in tokens (arXiv 2503.14476)
    overlong_cache: float = 1.0  # ... L_cache: the ramp's width before L_max
    overlong_factor: float = 1.0  # ... the penalty's weight (verl's overlong_buffer.penalty_factor)
    rank_penalty: float = 0.25  # unlikeliness reward's rank penalty (arXiv 2506.02355)
    style_weight: float = 1.0  # the style (habit) term's weight
    # the token-weight stage (tabsim.sim.algos.token_weights), read only when algo.token_weight names it
    top_entropy_quantile: float = 1.0  # top_entropy: share of the batch's tokens kept, by entropy (arXiv 2506.01939)
    gtpo_conflict_weight: float = 2.0  # gtpo_conflict: weight of a positive answer's conflict token (arXiv 2508.03772)

    sgrpo_noise: float = 0.1  # S-GRPO: the assumed symmetric reward-flip rate p (arXiv 2508.05928)
    correct_mass_ratio: float = 1.0  # bandit: the j-th correct answer's share of p_s, r^j / sum_i r^i (task.*)
    real_tau: float = 0.5  # REAL (arXiv 2602.05630): the scores' temperature


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
