"""Measured null effects: what published runs got from rewards that carry no information about correctness.

A table without a RANDOM arm gets its ``d_null`` bounded by the simulator calibration, which holds
only if the model trains like some structure of the simulated families. For some models the answer
is known: a random-reward run was published for them. This registry holds those measurements (model,
benchmark, training setup, the base and the trained accuracy, the source), like the benchmark
registry holds item counts; every audit consults it (:func:`tabsim.audit.checks.outside_family`):

* a simulator bound on ``d_null`` that a measurement for the same model and benchmark lies outside
  of is contradicted and not used;
* a model measured outside the reach of every simulated family (the family cannot produce what the
  model did) gets no simulator bound on any benchmark.

Numbers as their sources print them (accuracy in percent); the shipped tables in
``experiments/audits`` hold the same numbers (a test keeps them in step). Format-reward and
incorrect-label runs are recorded too (``reward``); only ``random`` runs with the simulated reward
probability check ``d_null`` bounds.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Optional

from scipy import stats as sps

from tabsim.audit.estimate import binomial_var

REWARDS = ("random", "format", "incorrect")

SPURIOUS = ("Shao et al., Spurious Rewards: Rethinking Training Signals in RLVR, arXiv 2506.10947 v1, Figure 1 "
            "(MATH-500, greedy, after 150 GRPO steps)")
SPURIOUS_SETUP = ("GRPO, 150 steps, 1024 rollouts per batch reused for 8 clipped (0.2) minibatch updates, no KL, "
                  "16 samples per prompt")
GRPO_DECOMP = ("adamthuvesen, grpo-decomp, github.com/adamthuvesen/grpo-decomp, results/FINDINGS.md (GSM8K test, "
               "greedy pass@1, 6 seeds per arm)")


@dataclasses.dataclass(frozen=True)
class NullMeasurement:
    """One published run of a null reward.

    Attributes:
      model: the base model as the source names it (compared without case or punctuation).
      benchmark: the evaluation set (a registry name where there is one).
      reward: ``random`` (reward ~ Bernoulli(gamma)), ``format`` or ``incorrect`` (trained toward a wrong
        majority label).
      gamma: the random reward's probability (None for the others).
      base: accuracy before training (percent).
      after: accuracy after training with this reward (percent; the mean over seeds when seeds are given).
      n_items: items of the benchmark.
      setup: the training setup (algorithm, steps, reuse, clipping, training set).
      source_id: the source's id (as in ``experiments/audits``).
      citation: where the numbers are printed.
      seeds: per-seed accuracies after training, when the source reports them.
    """

    model: str
    benchmark: str
    reward: str
    gamma: Optional[float]
    base: float
    after: float
    n_items: int
    setup: str
    source_id: str
    citation: str
    seeds: tuple = ()

    @property
    def gain(self) -> float:
        return self.after - self.base

    def interval(self, ci: float = 0.95) -> tuple:
        """``(gain, low, high)``: the item-unit (binomial) interval of the gain, plus the seed spread when given."""
        var = float(binomial_var(self.base, self.n_items)) + float(binomial_var(self.after, self.n_items))
        if len(self.seeds) > 1:
            mean = sum(self.seeds) / len(self.seeds)
            var += sum((x - mean) ** 2 for x in self.seeds) / (len(self.seeds) - 1) / len(self.seeds)
        half = float(sps.norm.ppf(0.5 + ci / 2.0)) * math.sqrt(var)
        return self.gain, self.gain - half, self.gain + half

    def label(self) -> str:
        return f"{self.source_id} ({self.reward} reward, {self.model} on {self.benchmark})"


def _spurious(model: str, base: float, random: float, fmt: float, incorrect: float) -> tuple:
    common = dict(model=model, benchmark="MATH-500", base=base, n_items=500, setup=SPURIOUS_SETUP,
                  source_id="spurious-rewards", citation=SPURIOUS)
    return (NullMeasurement(reward="random", gamma=0.5, after=base + random, **common),
            NullMeasurement(reward="format", gamma=None, after=base + fmt, **common),
            NullMeasurement(reward="incorrect", gamma=None, after=base + incorrect, **common))


_DECOMP_RANDOM = (75.28, 74.45, 76.65, 77.03, 76.04, 75.59)

MEASUREMENTS = (
    *_spurious("Qwen2.5-Math-7B", 49.4, random=21.4, fmt=16.4, incorrect=24.6),
    *_spurious("Qwen2.5-7B", 41.6, random=7.7, fmt=4.2, incorrect=28.5),
    *_spurious("Llama3.1-8B-Instruct", 36.8, random=-4.9, fmt=6.1, incorrect=1.3),
    *_spurious("OLMo2-7B", 9.0, random=-8.5, fmt=0.0, incorrect=-6.7),
    NullMeasurement(model="Qwen2.5-Math-1.5B", benchmark="GSM8K", reward="random", gamma=0.5, base=76.4,
                    after=sum(_DECOMP_RANDOM) / len(_DECOMP_RANDOM), n_items=1319, seeds=_DECOMP_RANDOM,
                    setup="GRPO on GSM8K (train split), 6 seeds", source_id="grpo-decomp", citation=GRPO_DECOMP),
)


def random_measurements(measurements=None, *, gamma: float = 0.5) -> tuple:
    """The random-reward runs at reward probability ``gamma`` (the simulated families' one)."""
    ms = MEASUREMENTS if measurements is None else measurements
    return tuple(m for m in ms if m.reward == "random" and m.gamma is not None and abs(m.gamma - gamma) < 1e-9)


def null_envelope(registry, ci: float = 0.95) -> Optional[tuple]:
    """``(low, high)``: the range of ``d_null`` that published random-reward runs reached, intervals included.

    The simulated families' own reach of ``d_null`` is a few points (their clipping drift is small), while
    real models moved by -8.5 to +21.4 points under a random reward. A model without a measurement of its
    own may be any of them, so a simulator bound on a missing RANDOM arm is widened to this range
    (:func:`tabsim.audit.completions.with_null_envelope`). None when ``registry`` is empty.

    Args:
      registry: :class:`NullMeasurement` records (random reward at the families' probability).
      ci: level of each measurement's interval.
    """
    ivs = [m.interval(ci) for m in registry]
    if not ivs:
        return None
    return min(lo for _, lo, _ in ivs), max(hi for _, _, hi in ivs)
