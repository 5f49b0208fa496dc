"""Rollout allocation per prompt at a fixed total budget (``algo.allocation``; default ``"none"``).

Every prompt of a batch of ``B`` gets ``n_x`` answers with ``sum_x n_x = B n``, ``n`` = ``train.group_size`` (the
uniform allocation's budget), each ``n_x`` at most ``M`` = ``algo.allocation_max``. The program's groups are
``M`` answers wide (a static shape): each group's first ``n_x`` answers are rolled out and the rest masked, so the
group statistics, the loss and the tracked history see only the allotted answers (the step's ``reward_mean`` is
still the mean over all ``M`` answers drawn: every prompt weighted equally, as under the uniform allocation).

``uniform``: every prompt gets ``n`` (the usual groups inside the ``M``-wide programme: a rule's control).

``knapsack``: Knapsack RL (arXiv 2509.25849). The value of giving ``N`` answers to a prompt of success rate ``p``
is the chance of a nonzero GRPO gradient times an information gain,

    Value(N, p) = (1 - p^N - (1 - p)^N) p (1 - p)^2,

and the allocation maximises ``sum_x Value(n_x, p_x)`` at the budget (a knapsack solved by dynamic programming).
Checked against the authors' released code (``liziniu/KnapsackRL`` at 05eeb92: ``sampling_budget_by_knapsack`` and
``solve_by_dp`` in ``verl/trainer/ppo/exploration_utils.py``, the per-prompt estimate in
``verl/utils/dataset/rl_dataset.py``, the settings in ``examples/knapsack_trainer/run_knapsack_grpo_7b.sh``):

* the estimate ``p_x``: the success share of the prompt's last group when it had at least 16 answers, else of its
  last 16 rewards (``reward_buffer_length``, ``robust_epoch_estimation``), a reward counting as a success when
  above 0; a prompt with fewer than 8 rewards seen (``min_buffer_length``) is unknown;
* the base: an unknown prompt gets ``n``, a known one ``min_n = 2`` (their ``min_n = negative_n = positive_n = 2``);
* the remaining budget ``R = B n - sum base``. With no prompt of ``0 < p < 1`` and ``R > 0``: ``R`` is spread over
  the prompts of ``p = 0`` (an unknown prompt counts as ``p = 0``: their ``success_rates`` array is 0 there) in
  equal parts, the first ones in batch order one more, or, with none, every prompt gets ``n``;
* otherwise the fallback: with ``C = sum_eff floor(min(M, log(1 - 0.9) / log(max(p, 1 - p))))`` below ``R``, the
  excess ``R - C`` is spread over the ``p = 0`` prompts (or, with none, over every prompt not of ``0 < p < 1``) and
  ``R = C``;
* the dynamic programme over the prompts of ``0 < p < 1``, each taking ``k = 0 .. M - 2`` more answers for
  ``Value(k + 2, p)`` (``k = 0`` counts 0, as their table does), to total weight exactly ``R`` or, where that is
  out of reach, the largest reachable total, the rest spread over those prompts in equal parts; ties go to the
  smaller ``k`` (their strict ``>`` in increasing ``k``).

Departures: here every ``n_x`` is cut to ``M`` (their allocation can exceed ``max_n`` through the spreads; the
budget cut off is not spent), the programme runs in float32 (theirs in float64: near-ties may break apart), and
where every prompt has ``0 < p < 1`` and the fallback has no prompt to take the excess (their code divides by zero)
there is no fallback. Their ``adv_clip_value`` (5) and importance-ratio cap are not built. ``train.dynamics =
"expected"`` refuses it (state carried between steps), and so do draws with replacement, a group stage, a refill,
a tracker and a prompt skip (:mod:`tabsim.config.allocation`).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from tabsim.base import choices
from tabsim.base.registry import Registry
from tabsim.sim.envs.base import wanted
from tabsim.sim.pytree import pytree_dataclass

ALLOCATIONS = Registry("allocation", builtin=choices.ALLOCATIONS)

WINDOW = 16  # the authors' reward_buffer_length: rewards the estimate reads when the last group had fewer
MIN_SEEN = 8  # their min_buffer_length: rewards seen before a prompt's estimate is used
MIN_N = 2  # their min_n = negative_n = positive_n: the answers every known prompt gets
ALPHA = 0.9  # their cost estimate's confidence: cost = log(1 - alpha) / log(max(p, 1 - p))
ESTIMATORS = ("grpo", "dr_grpo")  # the group estimators computed over the allotted answers


@pytree_dataclass
class AllocState:
    """Per prompt ``[N]``: the last :data:`WINDOW` 0/1 outcomes (``window [N, WINDOW]``, oldest first, right-aligned),
    how many of them are real (``held``), the rewards seen (``seen``) and the success-rate estimate (``rate``)."""

    window: jax.Array
    held: jax.Array
    seen: jax.Array
    rate: jax.Array


def value(n, p):
    """Knapsack RL's value of ``n`` answers at success rate ``p``: ``(1 - p^n - (1 - p)^n) p (1 - p)^2``."""
    return (1.0 - p ** n - (1.0 - p) ** n) * p * (1.0 - p) ** 2


def spread(total, chosen):
    """``[B]`` ``total`` split over the ``chosen`` positions: ``total // m`` each, the first ``total % m`` in order one
    more (0 elsewhere, and everywhere when nothing is chosen or ``total <= 0``)."""
    m = chosen.sum()
    safe = jnp.maximum(m, 1)
    rank = jnp.cumsum(chosen) - 1
    part = total // safe + (rank < total % safe)
    return jnp.where(chosen & (total > 0), part, 0).astype(jnp.int32)


def solve(p, eff, budget, extra: int, width: int):
    """``[B]`` the extra answers of the dynamic programme: each prompt with ``eff`` takes ``k = 0 .. extra`` for
    ``value(k + MIN_N, p)`` (0 at ``k = 0``), the others none; total exactly ``budget`` where reachable, else the
    largest reachable total below it, the rest spread over the ``eff`` prompts. ``width``: the static bound of
    ``budget``."""
    k = jnp.arange(extra + 1)
    gain = jnp.where(k[None] == 0, 0.0, value(k[None] + MIN_N, p[:, None]))  # [B, K + 1]
    gain = jnp.where(eff[:, None] | (k[None] == 0), gain, -jnp.inf)
    w = jnp.arange(width + 1)
    src = w[:, None] - k[None]  # [W + 1, K + 1]

    def item(dp, g):
        cand = jnp.where(src >= 0, dp[jnp.clip(src, 0)] + g[None], -jnp.inf)
        return cand.max(-1), jnp.argmax(cand, -1).astype(jnp.int32)  # ties: the smaller k

    dp0 = jnp.where(w == 0, 0.0, -jnp.inf).astype(p.dtype)
    dp, choice = jax.lax.scan(item, dp0, gain)  # choice [B, W + 1]
    used = jnp.max(jnp.where(jnp.isfinite(dp) & (w <= budget), w, 0))

    def back(left, c):
        kk = c[left]
        return left - kk, kk

    _, taken = jax.lax.scan(back, used, choice, reverse=True)
    return taken + spread(budget - used, eff)


@ALLOCATIONS.register("knapsack", no_expected="its per-prompt reward history is state carried from step to step")
def knapsack(p, known, n: int, most: int):
    """``[B]`` Knapsack RL's answers per prompt (see the module's docstring) from the estimates ``p [B]`` and whether
    each is known (``known [B]``), at the budget ``B n`` with at most ``most`` per prompt before the cut."""
    B = p.shape[0]
    p = jnp.where(known, p, 0.0)
    eff = known & (p > 0) & (p < 1)
    zero = p == 0
    base = jnp.where(known, MIN_N, n).astype(jnp.int32)
    rest = B * n - base.sum()
    # no prompt of 0 < p < 1: the rest to the p = 0 prompts, or n to every prompt
    none_eff = jnp.where(zero.any(), base + spread(rest, zero), n)
    cost = jnp.log(1.0 - ALPHA) / jnp.log(jnp.maximum(p, 1.0 - p))
    estimate = jnp.where(eff, jnp.floor(jnp.minimum(float(most), cost)), 0.0).sum().astype(jnp.int32)
    takers = jnp.where(zero.any(), zero, ~eff)
    fallback = (estimate < rest) & takers.any()
    extra = jnp.where(fallback, spread(rest - estimate, takers), 0)
    budget = jnp.where(fallback, estimate, rest)
    with_eff = base + extra + solve(p, eff, budget, most - MIN_N, B * n)
    return jnp.where(~eff.any() & (rest > 0), none_eff, with_eff).astype(jnp.int32)


@ALLOCATIONS.register("uniform", no_expected="it runs under the allocation's state carried from step to step")
def uniform(p, known, n: int, most: int):
    """``[B]`` ``n`` answers for every prompt: the usual groups, in the allocation's ``M``-wide programme (the control
    of a rule's contrast: the same width, masking and estimate, only the rule differs)."""
    return jnp.full(p.shape, n, jnp.int32)


# -- the engine's side ----------------------------------------------------------------------------------
def init(algo, env):
    """The allocation's state at the start (None: no allocation)."""
    if getattr(algo, "allocation", "none") == "none":
        return None
    N = env.n_prompts
    return AllocState(window=jnp.zeros((N, WINDOW), jnp.float32), held=jnp.zeros((N,), jnp.int32),
                      seen=jnp.zeros((N,), jnp.int32), rate=jnp.zeros((N,), jnp.float32))


def budgets(algo, state, idx, G: int):
    """``[B]`` the answers each of the batch's prompts gets (None without an allocation), at most ``G``."""
    if state is None:
        return None
    n = ALLOCATIONS[algo.allocation](state.rate[idx], state.seen[idx] >= MIN_SEEN, algo.allocation_n, G)
    return jnp.minimum(n, G)


def answer_mask(n, G: int):
    """``[B, G]`` True on each group's first ``n`` answers."""
    return jnp.arange(G)[None, :] < n[:, None]


def advantages(estimator: str, rewards, n, hp):
    """``(adv [B, G], degenerate [B])``: GRPO's z-score (``hp.std_ddof``, ``hp.std_eps``) or Dr. GRPO's centred reward
    over each group's first ``n`` answers (0 on the others and on groups whose allotted rewards are all equal)."""
    if estimator not in ESTIMATORS:
        raise ValueError(f"algo.estimator: the allocation computes {list(ESTIMATORS)} over each group's allotted "
                         f"answers; got {estimator!r}")
    m = answer_mask(n, rewards.shape[-1])
    mf = m.astype(rewards.dtype)
    count = mf.sum(-1, keepdims=True)
    centred = (rewards - (rewards * mf).sum(-1, keepdims=True) / count) * mf
    flat = (jnp.where(m, rewards, -jnp.inf).max(-1, keepdims=True)
            == jnp.where(m, rewards, jnp.inf).min(-1, keepdims=True))
    adv = centred
    if estimator == "grpo":
        std = jnp.sqrt((centred ** 2).sum(-1, keepdims=True) / (count - hp.std_ddof))
        adv = centred / (std + hp.std_eps)
    return jnp.where(flat, 0.0, adv), flat[:, 0].astype(rewards.dtype)


def advance(algo, state, idx, rewards, G: int):
    """The state after the step: each batch prompt's allotted outcomes (success: reward above 0) join its window
    (the last :data:`WINDOW` kept), its count grows by its ``n`` (:func:`budgets`, from the state before the step),
    and its estimate is the group's success share when ``n >= WINDOW``, else the window's."""
    if state is None:
        return None
    return record(state, idx, rewards, budgets(algo, state, idx, G))


def record(state, idx, rewards, n):
    """:func:`advance` with the answers allotted ``n [B]`` given (None without an allocation)."""
    if state is None:
        return None
    G, L = rewards.shape[-1], WINDOW
    m = answer_mask(n, G)
    succ = (rewards > 0).astype(jnp.float32)
    held = state.held[idx]
    comb = jnp.concatenate([state.window[idx], succ], -1)  # [B, L + G], oldest first
    real = jnp.concatenate([jnp.arange(L)[None, :] >= L - held[:, None], m], -1)
    rank = jnp.cumsum(real[:, ::-1], -1)[:, ::-1]  # real entries at or after each position
    slot = jnp.where(real & (rank <= L), L - rank, L)  # the last L real entries, right-aligned; the rest to slot L
    rows = jnp.arange(idx.shape[0])[:, None]
    window = jnp.zeros((idx.shape[0], L + 1), jnp.float32).at[rows, slot].set(comb)[:, :L]
    new_held = jnp.minimum(held + n, L)
    group = (succ * m).sum(-1) / n
    rate = jnp.where(n >= L, group, window.sum(-1) / new_held)
    return AllocState(window=state.window.at[idx].set(window), held=state.held.at[idx].set(new_held),
                      seen=state.seen.at[idx].set(state.seen[idx] + n), rate=state.rate.at[idx].set(rate))



USEFUL = "effective_ratio"  # the optional metric of useful() (train.metrics names it)


def useful(env, rewards, n) -> dict:
    """``{"effective_ratio": share}`` when ``train.metrics`` names it, else ``{}``: the share of the step's answers
    (the allotted ones, ``n [B]``; None: all ``G`` of every group) that lie in groups whose rewards are not all equal,
    ``sum_x n_x [group x mixed] / sum_x n_x``: Knapsack RL's effective-gradient ratio (the authors'
    ``compute_coverage_metric``: the samples of prompts whose scores have a std above 0, over the batch's samples)."""
    if not wanted(getattr(env, "metrics", None), USEFUL):
        return {}
    G = rewards.shape[-1]
    n = jnp.full(rewards.shape[:1], G, jnp.int32) if n is None else n
    m = answer_mask(n, G)
    flat = jnp.where(m, rewards, -jnp.inf).max(-1) == jnp.where(m, rewards, jnp.inf).min(-1)
    weight = n.astype(rewards.dtype)
    return {USEFUL: (weight * (1.0 - flat)).sum() / weight.sum()}


def diag_keys(env) -> tuple[str, ...]:
    """The per-step diagnostics :func:`useful` adds to the engine's (none unless ``train.metrics`` names it)."""
    return (USEFUL,) if wanted(getattr(env, "metrics", None), USEFUL) else ()
