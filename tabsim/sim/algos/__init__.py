"""The GRPO family as a composition of small pure functions.

An algorithm = advantage estimator x ratio level x surrogate x aggregation x KL (estimator and
placement) x filter x reuse schedule x optimizer. :class:`AlgoSpec` names the static choices; the
numeric knobs are traced fields of :class:`tabsim.sim.params.Hyper`. Presets in
:mod:`tabsim.config.presets` are particular compositions (their TRL / verl equivalents: ``docs/presets.md``).
"""
from __future__ import annotations

from tabsim.sim.algos.advantages import ESTIMATORS, TOKEN_RETURNS, register_estimator
from tabsim.sim.algos.aggregation import AGGREGATIONS, register_aggregation
from tabsim.sim.algos.batch import Batch
from tabsim.sim.algos import estimators_ctx  # noqa: F401  (registers the estimators it defines)
from tabsim.sim.algos import bnpo  # noqa: F401  (registers BNPO's estimator)
from tabsim.sim.algos import holder  # noqa: F401  (registers HölderPO's ratio)
from tabsim.sim.algos import clip_cov  # noqa: F401  (registers Clip-Cov's surrogate)
from tabsim.sim.algos import rec  # noqa: F401  (registers REC's surrogates)
from tabsim.sim.algos import drpo  # noqa: F401  (registers DRPO's surrogate)
from tabsim.sim.algos import tree_credit  # noqa: F401  (registers the per-token tree estimators)
from tabsim.sim.algos.kl import KL_ESTIMATORS, register_kl
from tabsim.sim.algos.loss import advantages, policy_loss, reads_logp_only, take_logp, zero_variance
from tabsim.sim.algos.ratios import RATIOS, register_ratio
from tabsim.sim.algos.spec import AlgoSpec
from tabsim.sim.algos.surrogates import SURROGATES, clip_fraction, register_surrogate
from tabsim.base.choices import KL_PLACEMENTS, OPTIMIZERS  # (named without JAX, for the config)

__all__ = ["AGGREGATIONS", "ESTIMATORS", "KL_ESTIMATORS", "KL_PLACEMENTS", "OPTIMIZERS", "RATIOS", "SURROGATES",
           "TOKEN_RETURNS", "AlgoSpec", "Batch", "advantages", "clip_fraction", "policy_loss", "reads_logp_only",
           "register_aggregation", "register_estimator", "register_kl", "register_ratio", "register_surrogate",
           "take_logp", "zero_variance"]
