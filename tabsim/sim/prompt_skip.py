"""Skipping prompts before the rollout by their reward history (``algo.prompt_skip``; default ``"none"``).

``greso``: GRESO (GRPO with Efficient Selective Rollout, arXiv 2506.02177). Each prompt ``x`` keeps two counts:
``e_x`` the number of its most recent groups, in a row, in which every answer was right, and ``h_x`` the number in
which every answer was wrong (at most one of them is above 0). Before the rollout a prompt is skipped with
probability

    P_skip(x) = 1 - max(p_easy^e_x, 0.01)   (e_x > 0),     1 - max(p_hard^h_x, 0.01)   (h_x > 0),     0 otherwise,

and after each step the two exploration probabilities move towards a target share of zero-variance groups
``t`` (``algo.skip_target``), a third of it for the all-right groups and two thirds for the all-wrong ones:
``p_easy <- p_easy - 0.01`` where the step's share of all-right groups is ``>= t / 3``, ``+ 0.01`` otherwise
(likewise ``p_hard`` against ``2 t / 3``), each kept in ``[0.05, 0.95]``. The starts are ``algo.skip_p_easy``,
``algo.skip_p_hard`` (traced).

Checked against the authors' released trainer (``Infini-AI-Lab/GRESO``, ``verl/trainer/ttis/presampling_selector.py``
and ``verl/trainer/ppo/ray_trainer.py``, read at b277843): ``easy_probabilistic_skip`` counts the trailing groups of
the prompt's reward trace whose mean is ``>= 0.98`` and skips with ``1 - max(p ** count, 0.01)``;
``hard_probabilistic_skip`` does the same for the trailing groups of mean ``<= 0.11`` (their wrong answer scores
0.1: every answer wrong); ``filter_examples_all_probabilistic`` tests the easy rule first, then the hard one; the
targets are ``target_zero_variance / 3`` (easy) and ``* 2 / 3`` (hard), the step 0.01, the bounds ``min_p = 0.05``,
``max_p = 0.95``, the shares taken over every group rolled out for the step, the adaptation only from the second
epoch (``epoch > 0``); their scripts set ``p_easy = p_hard = 0.5`` and ``target_zero_variance = 0.25``. Here a
group is all right when every answer's outcome reward is 1 or more and all wrong when none is above 0 (the
one-sided filters' tests, :mod:`tabsim.sim.groups`); the two rules are exclusive, so one uniform a prompt decides.

The draw: a random order of all ``N`` prompts (the step's usual draw, uniform or a tracker's weights, taken
``N`` deep), each skipped or not, and the first ``C = batch_size + refill`` kept prompts in that order are rolled
out (DAPO's refill, ``train.refill``, then keeps ``B`` informative ones among them: GRESO runs with dynamic
sampling). Where fewer than ``C`` are kept the first skipped ones in order fill the batch (the authors' loader
would go on into the next epoch and draw the skips again). "Epoch" here: the adaptation starts at the step at
which the steps before it have rolled out ``N`` prompts (``step C >= N``). Not built: their adaptive sampling
batch size (a throughput device: the number of prompts drawn per generation round). With ``C = N`` every prompt is
rolled out each step and nothing is skipped. ``train.dynamics = "expected"`` refuses it (state carried between
steps) and so does ``train.replacement`` (the authors' loader draws each prompt once an epoch).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from tabsim.base import choices
from tabsim.base.registry import Registry
from tabsim.sim import rng as R
from tabsim.sim import tracker
from tabsim.sim.pytree import pytree_dataclass

PROMPT_SKIPS = Registry("prompt skip", builtin=choices.PROMPT_SKIPS)

KEEP_FLOOR = 0.01  # the authors' max(p ** count, 0.01): every prompt keeps this chance to be rolled out
P_STEP, P_MIN, P_MAX = 0.01, 0.05, 0.95  # the exploration probabilities' step and bounds (their min_p, max_p)
SKIP_STREAM = 0x20000000  # the skip uniforms' step address, step + this (beyond every training step)


@pytree_dataclass
class SkipState:
    """Per-prompt runs of all-right (``easy``) and all-wrong (``hard``) groups ``[N]`` and the two exploration
    probabilities (scalars)."""

    easy: jax.Array
    hard: jax.Array
    p_easy: jax.Array
    p_hard: jax.Array


@PROMPT_SKIPS.register("greso", no_expected="its per-prompt reward history is state carried from step to step")
def greso(n_prompts: int, hp) -> SkipState:
    """GRESO's start: no history, ``p_easy`` and ``p_hard`` from ``algo.skip_p_easy``, ``algo.skip_p_hard``."""
    zero = jnp.zeros((n_prompts,), jnp.int32)
    return SkipState(easy=zero, hard=zero, p_easy=jnp.asarray(hp.skip_p_easy, jnp.float32),
                     p_hard=jnp.asarray(hp.skip_p_hard, jnp.float32))


def init(algo, env, hp):
    """The state ``algo.prompt_skip`` names at the start of training (None: no skipping)."""
    name = getattr(algo, "prompt_skip", "none")
    return None if name == "none" else PROMPT_SKIPS[name](env.n_prompts, hp)


def keep_probability(state: SkipState):
    """``[N]`` each prompt's chance to be rolled out: ``max(p_easy^e, 0.01) max(p_hard^h, 0.01)`` (one factor is 1)."""
    def keep(p, n):
        return jnp.maximum(p ** n.astype(jnp.float32), KEEP_FLOOR)
    return keep(state.p_easy, state.easy) * keep(state.p_hard, state.hard)


def first_kept(order, kept, C: int):
    """``[C]`` the first ``C`` prompts of ``order [N]`` whose ``kept [N]`` (in ``order``'s positions) is true, in
    order, followed where fewer by the first skipped ones, in order."""
    n = order.shape[0]
    return order[jnp.argsort(jnp.where(kept, 0, n) + jnp.arange(n))[:C]]


def draw(train_state, sample, env, schedule):
    """``[C]`` the step's prompts: ``sample(env, schedule, seed, step, weights)`` (``weights``: the tracker's, or
    None) without a skip state, else the first ``C`` kept prompts of that draw taken over all ``N`` prompts (see
    the module's docstring)."""
    state, seed, step = train_state.prompt_skip, train_state.seed, train_state.step
    weights = tracker.weights(train_state.tracker)
    if state is None:
        return sample(env, schedule, seed, step, weights)
    n = env.n_prompts
    C = schedule.batch_size + schedule.refill
    u = R.uniform(seed, (n,), step=step, tag=R.BATCH, rng=env.rng)
    order = jax.lax.top_k(u, n)[1] if weights is None else tracker.weighted_draw(u, weights, n, False)
    skip_u = R.uniform(seed, (n,), step=step + SKIP_STREAM, tag=R.BATCH, rng=env.rng)
    return first_kept(order, skip_u[order] < keep_probability(state)[order], C)


def advance(state, idx, rewards, step, hp):
    """The state after the step from the outcome rewards ``[C, G]`` of the prompts ``idx [C]`` rolled out: the runs
    extended or reset, and (from the second pass over the prompts) ``p_easy``, ``p_hard`` moved towards their
    targets."""
    if state is None:
        return None
    right = rewards.min(-1) >= 1
    wrong = rewards.max(-1) <= 0
    easy = state.easy.at[idx].set(jnp.where(right, state.easy[idx] + 1, 0))
    hard = state.hard.at[idx].set(jnp.where(wrong, state.hard[idx] + 1, 0))
    adapt = step * idx.shape[0] >= state.easy.shape[0]

    def toward(p, share, target):
        moved = jnp.clip(jnp.where(share >= target, p - P_STEP, p + P_STEP), P_MIN, P_MAX)
        return jnp.where(adapt, moved, p).astype(p.dtype)

    return SkipState(easy=easy, hard=hard, p_easy=toward(state.p_easy, right.mean(), hp.skip_target / 3),
                     p_hard=toward(state.p_hard, wrong.mean(), hp.skip_target * 2 / 3))
