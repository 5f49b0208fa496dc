"""Prompt sampling by a learnability score refreshed from rollouts (``algo.curriculum``; default ``"none"``).

``vas``: the variance half of MMR1's Variance-Aware Sampling (VAS, arXiv 2509.21268). Every prompt ``x`` carries a
weight ``w_x``. Every ``k`` steps (``algo.vas_every``), and before the first, each of the ``N`` prompts is rolled out
``n`` times (``algo.vas_rollouts``) from the current policy; with ``p_x`` the share of its ``n`` answers rewarded
(reward > 0) its score is ``s_x = p_x (1 - p_x)``, min-max normalised over the prompts,

    s'_x = (s_x - min s) / (max s - min s + 1e-8),      w_x <- m w_x + (1 - m) s'_x     (w_x = s'_x the first time)

(``m``: ``algo.vas_momentum``, traced). Each step's batch of ``C = batch_size + refill`` prompts is
``floor(C rho)`` prompts drawn with probability proportional to ``w`` with replacement and ``C - floor(C rho)``
drawn uniformly (``rho``: ``algo.vas_ratio``, traced; the uniform part is the step's usual draw).

Checked against the authors' released code (``LengSicong/MMR1`` at d8161a0): ``verl/curriculum/metrics.py``
``calculate_learnability_metric`` (the pass rate over ``curriculum_rollout_n`` rollouts of each prompt, its
``pass_rate * (1 - pass_rate)``); ``verl/trainer/ray_trainer.py`` ``_compute_curriculum_weights`` (every prompt of
the training set rolled out, min-max scaling with ``+ 1e-8``), ``_update_curriculum_weights`` (``momentum * old +
(1 - momentum) * new``, the first computation taken as is; computed before training and again after every step
whose ``global_step % curriculum_update_freq == 0``, the data iterator then rebuilt with the new weights);
``verl/curriculum/samplers.py`` ``MixedCurriculumSampler`` (``int(batch_size * mixture_ratio)`` indices of a
``WeightedRandomSampler`` with replacement, the rest from a shuffled pass over the data); ``examples/mmr1.yaml``
(``curriculum_metrics: [learnability]``, momentum 0.0, update every 4 steps, ratio 0.5, 8 rollouts). Their config's
comment reads "1 means no momentum" but its code keeps the old weights at 1; this follows the code.

What differs here: their rollouts are scored by the reward function's accuracy; here by the run's arm (the reward
the run trains on: under the ``true`` arm the verifier, as theirs; a label-free arm sees no verifier); an answer
counts as right when its reward is above 0. Their uniform half continues one shuffled pass over the data from batch
to batch; here it is the step's usual draw (without replacement within the batch unless ``train.replacement``).
The two halves may share a prompt. Where every prompt has the same score (all weights 0), the weighted half is
drawn uniformly (their sampler would fail). Not built: VAS's other half, the rollout diversity score (self-BLEU and
edit distances between a prompt's answers), which has no counterpart in a table of answer ids. The refresh's
rollouts are addressed at ``step + VAS_STREAM`` (apart from the training draws).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from tabsim.base import choices
from tabsim.base.registry import Registry
from tabsim.sim import arms as arms_mod
from tabsim.sim import prompt_skip
from tabsim.sim import rng as R
from tabsim.sim import tracker
from tabsim.sim.pytree import pytree_dataclass

CURRICULA = Registry("curriculum", builtin=choices.CURRICULA)

MINMAX_EPS = 1e-8  # the authors' min-max scaling: (s - min) / (max - min + 1e-8)
VAS_STREAM = 0x10000000  # the refresh's rollouts and the weighted draw's uniforms: step + this


@pytree_dataclass
class VasState:
    """Per-prompt sampling weights ``[N]`` (the momentum average of the normalised scores)."""

    weights: jax.Array


@CURRICULA.register("vas", no_expected="its per-prompt weights are state refreshed from rollouts between steps")
def vas(n_prompts: int) -> VasState:
    """VAS's state before the first refresh (which happens at step 0 and replaces it)."""
    return VasState(weights=jnp.zeros((n_prompts,), jnp.float32))


def init(algo, env):
    """The state ``algo.curriculum`` names at the start of training (None: the usual draw)."""
    name = getattr(algo, "curriculum", "none")
    return None if name == "none" else CURRICULA[name](env.n_prompts)


def scores(rewards):
    """``[N]`` the normalised learnability of each prompt from its rollouts' rewards ``[N, n]``: ``p (1 - p)`` with
    ``p`` the share rewarded above 0, min-max scaled over the prompts."""
    p = (rewards > 0).astype(jnp.float32).mean(-1)
    s = p * (1.0 - p)
    return (s - s.min()) / (s.max() - s.min() + MINMAX_EPS)


def blend(state: VasState, new, first, momentum):
    """``m w + (1 - m) new``, or ``new`` at the first refresh."""
    return VasState(weights=jnp.where(first, new, momentum * state.weights + (1.0 - momentum) * new))


def refresh(algo, state, env, logits, task, arm, arms, seed, step, hp):
    """The state for the step: at steps ``0, k, 2k, ...`` (``k = algo.vas_every``) every prompt rolled out
    ``algo.vas_rollouts`` times from ``logits`` and scored under the arm, the weights blended; else ``state``."""
    if state is None:
        return None
    at = step + VAS_STREAM
    rollout = env.rollout(seed, at, logits, algo.vas_rollouts)
    policy = None
    if any(a in arms_mod.POLICY_ARMS for a in arms):  # an arm that reads the policy's log-probabilities
        policy = (env.token_logq(logits, rollout), rollout.mask)
    rewards = arms_mod.rewards(arm, seed, at, env, task, rollout.answers, hp, arms, policy)
    fresh = blend(state, scores(rewards), step == 0, hp.vas_momentum)
    due = step % algo.vas_every == 0
    return jax.tree_util.tree_map(lambda new, old: jnp.where(due, new, old), fresh, state)


def weighted_part(weights, u):
    """``[C]`` prompts drawn with probability proportional to ``weights [N]`` (uniform where every weight is 0) from
    the uniforms ``u [C]``, with replacement."""
    w = jnp.where(weights.sum() > 0, weights, jnp.ones_like(weights))
    return tracker.weighted_draw(u, w, u.shape[0], True)


def mix(weighted, uniform, ratio):
    """``[C]`` the batch: the first ``floor(C ratio)`` positions from ``weighted``, the rest from ``uniform``."""
    C = weighted.shape[0]
    n_weighted = jnp.floor(C * ratio + 1e-6).astype(jnp.int32)  # int(C ratio), safe against 0.5 * 16 = 7.999...
    return jnp.where(jnp.arange(C) < n_weighted, weighted, uniform)


def draw(state: VasState, sample, env, schedule, seed, step, hp):
    """``[C]`` the step's prompts: ``floor(C rho)`` by weight with replacement, the rest the usual draw
    ``sample(env, schedule, seed, step)``."""
    uniform = sample(env, schedule, seed, step)
    u = R.uniform(seed, uniform.shape, step=step + VAS_STREAM, tag=R.BATCH, rng=env.rng)
    return mix(weighted_part(state.weights, u), uniform, hp.vas_ratio)


def draw_batch(algo, train_state, sample, env, schedule, task, arm, arms, hp):
    """``(state, idx [C])``: the curriculum's state for the step (:func:`refresh`; None without one) and the step's
    prompts (:func:`draw`; without a curriculum the usual draw, a tracker's weights or a skip:
    :func:`tabsim.sim.prompt_skip.draw`)."""
    seed, step = train_state.seed, train_state.step
    state = refresh(algo, train_state.vas, env, train_state.logits, task, arm, arms, seed, step, hp)
    if state is None:
        return None, prompt_skip.draw(train_state, sample, env, schedule)
    return state, draw(state, sample, env, schedule, seed, step, hp)
