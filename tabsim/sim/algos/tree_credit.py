"""Process credit on the tree: per-token advantages ``[B, G, T]`` from the states the group's answers share.

In the tree-MDP a state is a prefix, so two answers of one group are in the same state before their token ``t``
exactly when they drew the same tokens ``0 .. t-1`` and both are still running at ``t``
(:func:`same_state`). An estimator here reads the answers' tokens (``reads=("tokens",)``) and returns one
advantage per token; it is registered with ``per_token=True``, which lets
:func:`tabsim.sim.algos.advantages` accept the ``[B, G, T]`` shape (``[B, G]`` when every answer is one token
long, as in a bandit, so the closed-form path reads it as before). Such an advantage flows into the loss as
REINFORCE++'s returns to go do. Each reads the sampled paths, which the exact expected flow does not enumerate,
so they declare ``no_expected``.

Not built, for want of a formula checked against its paper or code: TreeRPO (arXiv 2506.05183; its step groups
are the siblings its N-ary tree sampler draws at every node, and its code was not reachable here) and Segment PO
(arXiv 2505.23564).
"""
from __future__ import annotations

import jax.numpy as jnp

from tabsim.sim.algos.advantages import ESTIMATORS, group_std, register_estimator


def check_group_stage(estimator: str, stage, max_len: int):
    """``stage`` (the schedule's :class:`tabsim.sim.groups.GroupStage`), refused in one ``ValueError`` line when it
    ranks answers by their advantage after it is computed (``phase = "advantage"``, CPPO's ``|A|``) and the
    estimator gives each token its own, on answers longer than one token."""
    ranks = stage.active and stage.meta().get("phase") == "advantage" and max_len > 1
    if ranks and ESTIMATORS.meta(estimator).get("per_token", False):
        raise ValueError(f"train.group_stage: {stage.name!r} ranks answers by one advantage each, and algo.estimator "
                         f"= {estimator!r} gives every token its own; use a stage that acts before the advantages "
                         "(gfpo_length, gfpo_efficiency) or a per-answer estimator")
    return stage


def running(lengths, T: int):
    """``[B, G, T]`` True where the answer is still running at token ``t`` (``t < length``)."""
    return jnp.arange(T) < lengths[..., None]


def same_state(tokens, lengths):
    """``[B, G, G, T]``: answers ``i`` and ``j`` of a group are in the same tree state before token ``t``.

    True when both run at ``t`` and drew the same tokens ``0 .. t-1`` (at ``t = 0`` every running answer is at
    the root). ``tokens``: ``[B, G, T]`` ints; ``lengths``: ``[B, G]`` tokens per answer.
    """
    T = tokens.shape[-1]
    eq = (tokens[:, :, None, :] == tokens[:, None, :, :]).astype(jnp.int32)  # [B, G, G, T]
    # prefix equal through t-1: an exclusive running product of the per-token matches
    through = jnp.cumprod(eq, axis=-1)
    before = jnp.concatenate([jnp.ones_like(through[..., :1]), through[..., :-1]], axis=-1) > 0
    run = running(lengths, T)
    return before & run[:, :, None, :] & run[:, None, :, :]


def _group_mean_baseline(values, same):
    """``values [B, G, T]`` minus their mean over the answers in the same state (``same [B, G, G, T]``), 0 where
    the answer is not running; and the matching unbiased std (1 for a state with one answer, as the authors'
    code does)."""
    w = same.astype(values.dtype)
    n = w.sum(2)  # [B, G, T] answers in my state (>= 1 where I run)
    safe = jnp.maximum(n, 1.0)
    mean = (w * values[:, None, :, :]).sum(2) / safe
    centred = values - mean
    sq = (w * (values[:, None, :, :] - mean[:, :, None, :]) ** 2).sum(2)
    std = jnp.where(n > 1, jnp.sqrt(sq / jnp.maximum(n - 1.0, 1.0)), 1.0)
    return centred, std


GIGPO_EPS = 1e-6  # the authors' epsilon in the std-normalised mode


def _gigpo(batch, *, std: bool):
    r, lengths = batch.rewards, batch.lengths
    tokens = batch.tokens
    T = tokens.shape[-1]
    run = running(lengths, T)
    # episode advantage (Eq. 3): the group form over the G answers
    centred_ep = r - r.mean(-1, keepdims=True)
    if std:
        G = r.shape[-1]
        sd = jnp.sqrt((centred_ep**2).sum(-1, keepdims=True) / max(G - 1, 1)) if G > 1 else jnp.ones_like(r[:, :1])
        centred_ep = centred_ep / (sd + GIGPO_EPS)
    # step advantage (Eqs. 5-7): the step's return (the outcome, undiscounted) against the other visits of
    # the same state
    returns = jnp.broadcast_to(r[..., None], run.shape).astype(r.dtype)
    centred_st, sd_st = _group_mean_baseline(returns, same_state(tokens, lengths))
    step = centred_st / (sd_st + GIGPO_EPS) if std else centred_st
    adv = (centred_ep[..., None] + step) * run  # Eq. 8 with w = 1
    return adv


@register_estimator("gigpo", batch=True, reads=("tokens",), per_token=True,
                    no_expected="its step advantage compares the answers that visit the same tree state, which "
                                "the sampled paths decide and the expected flow does not enumerate")
def gigpo(batch):
    """GiGPO: an episode advantage plus a step advantage from anchor-state groups (mean-normalised mode).

    Feng et al., "Group-in-Group Policy Optimization for LLM Agent Training", arXiv 2505.10978, as the authors'
    verl-agent code (``gigpo/core_gigpo.py``: ``compute_gigpo_outcome_advantage``, ``episode_norm_reward``,
    ``build_step_group``, ``step_norm_reward``; read in a copy of verl-agent at c23d586). Token ``t`` of answer
    ``i`` is one step in state ``s = prefix_t(i)``::

        A_t(i) = (r_i - mean_g r) + (R_t(i) - mean_{j: s_t(j) = s} R_t(j))

    with ``R_t = r`` the step's undiscounted return (Eq. 5 with ``gamma = 1``, verl's default; the outcome is
    the only reward) and weight ``w = 1`` on the step term (the code's ``step_advantage_w`` default); the code's
    default ``mode = "mean_norm"`` subtracts the mean only. A state visited by one answer gets step advantage 0
    (its own mean). On a bandit every answer is at the root, so ``A = 2 (r - mean_g)``; at the root of a tree the
    step group is the whole group. Difference from the code: its default episode mean runs over every step row of
    the group (``compute_mean_std_cross_steps``), so a longer answer weighs more; here it is the paper's Eq. 3,
    over the answers. Not exposed: ``gamma < 1`` and ``w != 1``.
    """
    return _gigpo(batch, std=False)


@register_estimator("gigpo_std", batch=True, reads=("tokens",), per_token=True,
                    no_expected="its step advantage compares the answers that visit the same tree state, which "
                                "the sampled paths decide and the expected flow does not enumerate")
def gigpo_std(batch):
    """GiGPO in the code's ``mode = "mean_std_norm"`` (the paper's Eq. 3 and 7 with ``F_norm = std``), the mode of
    the authors' ALFWorld script (verl-agent ``examples/gigpo_trainer/run_alfworld.sh``; the ``gigpo`` preset).

    As :func:`gigpo`, with both terms divided by their group's unbiased std plus ``1e-6`` (``torch.std``; a
    one-answer state's std is 1, its step advantage 0). On a bandit ``A = 2 (r - mean_g) / (std_g + 1e-6)``, twice
    GRPO with the Bessel std.
    """
    return _gigpo(batch, std=True)


@register_estimator("tempo", batch=True, reads=("tokens",), per_token=True,
                    no_expected="its TD corrections read which answers of the group share each prefix, which the "
                                "sampled paths decide and the expected flow does not enumerate")
def tempo(batch):
    """TEMPO: GRPO's advantage plus the prefix tree's TD correction at each token.

    Tran, Yao, Yu, "Exploiting Tree Structure for Credit Assignment in RL Training of LLMs", arXiv 2509.18314, as the
    authors' released code (github.com/fatebreaker/tempo, ``verl/trainer/ppo/core_algos.py``,
    ``compute_tempo_outcome_advantage``, read at 0a1c273). With ``P_t(i)`` the group's answers in the same state
    as answer ``i`` before its token ``t`` (the same prefix; ``P_0`` is the group) and ``B_t(i)`` those of them that
    draw the same token ``t`` (the prefix through ``t``)::

        A_t(i) = (r_i - mean_g r + V(s_{t+1}) - V(s_t)) / (std_g + eps),   V(s_t) = mean_{k in P_t(i)} r_k,
                                                                          V(s_{t+1}) = mean_{k in B_t(i)} r_k

    ``V`` is the mean raw outcome of the group's answers through the prefix (Prefix-to-Tree) and the TD term is
    divided by the group's std with GRPO's part. Where no answer leaves the branch (``B_t = P_t``, not a branching
    token) the term is 0 and the token gets GRPO's advantage; once an answer is alone (``P_t = {i}``) every later
    token gets GRPO's (the code's early exit gives the same). ``hp.std_ddof`` / ``hp.std_eps`` as ``grpo`` (the code:
    ``torch.std``, Bessel, and 1e-6); a homogeneous group gets 0. On a bandit every answer is at the root and
    ``B_0`` holds the answers of the same arm, so where the reward is a function of the answer (every arm but
    ``random`` and ``noisy``) ``A = 2 (r - mean_g) / (std_g + eps)``.
    The code's ``lam`` and ``entropys`` arguments are unused there, and so not built.
    """
    r, lengths, tokens = batch.rewards, batch.lengths, batch.tokens
    run = running(lengths, tokens.shape[-1])
    # k drew i's real tokens 0 .. t: the prefix through t (B_t(i), for i running at t)
    eq = (tokens[:, :, None, :] == tokens[:, None, :, :]) & run[:, :, None, :] & run[:, None, :, :]
    after = jnp.cumprod(eq.astype(jnp.int32), axis=-1) > 0
    # ... through t - 1 (P_t(i)); as the code, an answer that reached the prefix and stopped there counts in it
    # (in the tree it cannot: its last token is STOP, which a running answer does not draw)
    before = jnp.concatenate([jnp.ones_like(after[..., :1]), after[..., :-1]], axis=-1)

    def mean_over(members):
        w = members.astype(r.dtype)
        return (w * r[:, None, :, None]).sum(2) / jnp.maximum(w.sum(2), 1.0)

    td = mean_over(after) - mean_over(before)  # V(s_{t+1}) - V(s_t), [B, G, T]
    centred = (r - r.mean(-1, keepdims=True))[..., None]
    std = group_std(r, batch.hp.std_ddof)[..., None]
    adv = (centred + td) / (std + batch.hp.std_eps)
    homogeneous = r.max(-1, keepdims=True) == r.min(-1, keepdims=True)  # exactly 0, also with eps = 0
    adv = jnp.where(homogeneous[..., None], 0.0, adv)
    return adv * run
