"""The defaults of the traced numbers: one table, read by :class:`tabsim.sim.params.Hyper` and by the config.

``ts.Hyper()`` and ``Config().hyper_values()`` give the same numbers because both take them from here (a test
compares every field). Where the config writes "off" as ``None`` or ``False`` (``task.heterogeneity``,
``task.correct_mass_ratio``, ``algo.max_grad_norm``, ``algo.filter``), the value here is the number that
"off" traces to. A new traced field adds its default here, in Hyper's order.
"""
from __future__ import annotations

import math

HYPER_DEFAULTS: dict[str, float] = {
    # task
    "prior_strength": 0.5, "format_boost": 0.2,
    "heterogeneity": 1.0,  # task.heterogeneity None: a homogeneous prior, the concentration unread
    # arms
    "gamma": 0.5, "fpr": 0.0, "fnr": 0.0,
    # update
    "lr": 0.05, "beta": 0.0, "std_eps": 1e-8, "std_ddof": 0.0, "eps_low": 0.2, "eps_high": 0.2, "dual_clip_c": 3.0,
    "sapo_tau_pos": 1.0, "sapo_tau_neg": 1.05, "ent_coef": 0.0,
    "max_grad_norm": math.inf,  # algo.max_grad_norm None: no clipping
    "filter": 0.0,  # algo.filter False: no dynamic-sampling filter
    "adam_b1": 0.9, "adam_b2": 0.999, "adam_eps": 1e-8,
    "gvpo_beta": 0.1, "kl_cov_ratio": 2e-4, "kl_cov_coef": 1.0, "baseline_shift": -0.1,
    # behaviour sampler, importance sampling, KL schedules
    "hint_lambda": 0.5, "mismatch_sigma": 0.1, "is_cap": 2.0, "kl_target": 0.1, "kl_horizon": 10000.0,
    "ref_mixup_alpha": 1.0,
    # reward composer
    "overlong_max": 4.0, "overlong_cache": 1.0, "overlong_factor": 1.0, "rank_penalty": 0.25, "style_weight": 1.0,
    # token weights
    "top_entropy_quantile": 1.0, "gtpo_conflict_weight": 2.0,
    # DisCO
    "disco_tau": 10.0, "disco_delta": 1e-4, "disco_beta": 1e3,
    # S-GRPO's assumed reward-flip rate
    "sgrpo_noise": 0.1,
    "real_tau": 0.5,  # REAL's score temperature
    "tracker_rho": 0.875,  # SPO's tracker: the Beta posterior's discount per visit
    # CTPO's clip bounds, dual clip and power
    "ctpo_clip_low": 0.025, "ctpo_clip_high": 0.05, "ctpo_clip_c": 0.05, "ctpo_power": 0.5,
    "correct_mass_ratio": 1.0,  # task.correct_mass_ratio None: the equal split
    "holder_p": 1.0,  # HölderPO's power-mean exponent (the authors' default, constant)
    # GRESO's skip rule: p_easy, p_hard at the start and the target zero-variance share (the authors' scripts)
    "skip_p_easy": 0.5, "skip_p_hard": 0.5, "skip_target": 0.25,
    "clip_cov_ratio": 2e-4, "clip_cov_lb": 1.0, "clip_cov_ub": 5.0,  # Clip-Cov (verl's defaults)
    "vas_ratio": 0.5, "vas_momentum": 0.0,  # VAS: the weighted share of a batch, the weights' momentum (MMR1's)
    "value_lr": 0.1,  # the tabular critic's step toward the mean return of a state's visits
    "drpo_lambda": 0.1,  # DRPO's length-reward temperature (the authors' recipes)
    "opmd_coef": 0.1,  # OPMD's squared log-ratio coefficient (arXiv 2509.24203's example, regularizer_coef)
}
