"""Statistics of tabsim: the partition of the gain, factorial fits, gates, power and verdicts.

Everything here works on pandas frames of run results (one row per seed x arm x condition x step)
and treats seeds as the independent unit: arms of one seed share their random numbers.

* :mod:`tabsim.stats.aggregate` -- aggregates across conditions (IQM, optimality gap, probability of
  improvement, performance profiles) with stratified bootstrap intervals.
* :mod:`tabsim.stats.partition` -- per-seed partition, summaries with intervals, the crossover.
* :mod:`tabsim.stats.intervals` -- paired bootstrap, Student t and Fieller intervals.
* :mod:`tabsim.stats.factorial` -- effect-coded factorial OLS and the interaction ratio.
* :mod:`tabsim.stats.gate` -- points-vs-bounds gate and its stability across pilots.
* :mod:`tabsim.stats.power` -- interval half-width and detection rate against seeds.
* :mod:`tabsim.stats.verdict` -- elicitation / reward-design / mixed verdicts.
"""
from tabsim.stats.aggregate import (
    AGGREGATES,
    aggregate_intervals,
    aggregate_iqm,
    aggregate_mean,
    aggregate_median,
    improvement_interval,
    optimality_gap,
    probability_of_improvement,
    profile_intervals,
    score_distribution,
)
from tabsim.stats.factorial import (
    ADDITIVITY_DECISIONS,
    FactorialResult,
    InteractionRatioResult,
    additivity_decision,
    fit_factorial,
    interaction_ratio,
)
from tabsim.stats.gate import (
    CLASSES,
    GATE_TERMS,
    LOGICAL_RANGE,
    classify,
    classify_terms,
    gate_stability,
    pilot_replicates,
)
from tabsim.stats.intervals import (
    FiellerInterval,
    Interval,
    fieller_interval,
    mean_interval,
    paired_bootstrap,
    ratio_interval,
    root_t_interval,
    t_interval,
)
from tabsim.stats.partition import (
    ACC_COLUMNS,
    ARMS,
    DIFFERENCE_TERMS,
    MAJORITY_ARMS,
    RATIO_TERMS,
    SUMMARY_TERMS,
    CrossoverResult,
    check_identity,
    locate_crossover,
    seed_partition,
    summarize_partition,
)
from tabsim.stats.power import power_curve, recommend_seeds
from tabsim.stats.verdict import (
    ELICITATION_DOMINATED,
    INCONCLUSIVE,
    MIXED,
    REWARD_DESIGN_DOMINATED,
    VERDICTS,
    ShareVerdict,
    share_verdict,
    share_verdicts,
)

__all__ = [
    "AGGREGATES", "aggregate_intervals", "aggregate_iqm", "aggregate_mean", "aggregate_median", "improvement_interval",
    "optimality_gap", "probability_of_improvement", "profile_intervals", "score_distribution",
    "ACC_COLUMNS", "ADDITIVITY_DECISIONS", "ARMS", "CLASSES", "DIFFERENCE_TERMS", "ELICITATION_DOMINATED",
    "GATE_TERMS", "INCONCLUSIVE", "LOGICAL_RANGE", "MAJORITY_ARMS", "MIXED", "RATIO_TERMS",
    "REWARD_DESIGN_DOMINATED", "SUMMARY_TERMS", "VERDICTS",
    "CrossoverResult", "FactorialResult", "FiellerInterval", "InteractionRatioResult", "Interval",
    "ShareVerdict",
    "additivity_decision", "check_identity", "classify", "classify_terms", "fieller_interval",
    "fit_factorial", "gate_stability", "interaction_ratio", "locate_crossover", "mean_interval",
    "paired_bootstrap", "pilot_replicates", "power_curve", "ratio_interval", "recommend_seeds", "root_t_interval",
    "seed_partition", "share_verdict", "share_verdicts", "summarize_partition", "t_interval",
]
