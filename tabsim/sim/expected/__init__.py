"""Expected-update dynamics: ``z_{t+1} = z_t + E[update | z_t]``, computed exactly by enumeration.

The expectation is over everything a training step draws: the batch of prompts, the group of G
answers of each prompt and the reward noise. A group is enumerated by its answer counts (a multinomial
composition: ``C(G + K - 1, K - 1)`` of them, 6,435 for K = 8, G = 8), vectorised in JAX, and the
batch enters through each prompt's chance to be drawn and, for aggregations that normalise over the
batch and the batch-level estimators (GPG, REINFORCE++), through the exact distribution of what the
other kept groups of its batch contribute (:mod:`tabsim.sim.expected.batch`). The iterated map is deterministic: it is the flow
of the mean update, not the mean of the random process (they differ by a Jensen gap, which
``docs/expected.md`` measures).

Two exact paths, chosen when the program is built:

* **linear** (one on-policy update per batch, rewards that do not read the policy): the update is
  linear in each answer's advantage-weighted count, so a step needs only ``P(composition) @ table``
  with tables computed once per run. Every arm is a two-class reward model (each answer is rewarded
  with probability ``rho_0`` or ``rho_1``; the noise is averaged within a class by exchangeability),
  and the online majority arm reads the plurality (and its tie rule) from the composition.
* **general** (off-policy reuse, ``epochs > 1``, or a KL penalty in the reward): every outcome's own
  sequence of updates is run with the engine's loss, vectorised over outcomes. Reward noise is then
  enumerated jointly with the answers (``2K`` symbols).

Refused, with the reason: environments other than the bandit (a small tree has :func:`expected_update`
for one step), Adam (its moments depend on the history of sampled gradients),
the global-norm clip, the batch-level estimators with reuse or the KL in the reward, reuse with prompts
drawn with replacement, and enumerations larger than :data:`MAX_OUTCOMES`.
"""
from __future__ import annotations

from tabsim.sim.expected import batch
from tabsim.sim.expected.flow import (CHUNK_BYTES, EXPECTED_SEED, MAX_BATCH_WORK, MAX_OUTCOMES, NOISE_ARMS, batch_members,
                                  check, expected_bytes, expected_update, linear_path, make_expected_train,
                                  n_outcomes)
from tabsim.sim.expected.general import general_delta, general_step, outcome_table, symbol_table
from tabsim.sim.expected.linear import level_tables, linear_step, linear_tables, node_gradient, two_class

__all__ = ["CHUNK_BYTES", "EXPECTED_SEED", "MAX_BATCH_WORK", "MAX_OUTCOMES", "NOISE_ARMS", "batch", "batch_members",
           "check", "expected_bytes", "expected_update", "general_delta", "general_step", "level_tables",
           "linear_path", "linear_step", "linear_tables", "make_expected_train", "n_outcomes", "node_gradient",
           "outcome_table", "symbol_table", "two_class"]
