"""Advantage estimators with a baseline other than the group's own mean, or that read the rollout's context.

Registered into :data:`tabsim.sim.algos.advantages.ESTIMATORS` when :mod:`tabsim.sim.algos` is imported. The
count-only ones (``ngrpo``, ``raft``, ``asymre``) are functions of a group's rewards alone, so the exact
expected flow runs them as it runs GRPO; ``pvpo`` reads each prompt's reference success rate ``p0``
(``reads=("p0",)``, see :mod:`tabsim.sim.algos.batch`) and has no exact flow.
"""
from __future__ import annotations

import jax.numpy as jnp

from tabsim.sim.algos.advantages import register_estimator

R_MAX = 1.0  # the largest reward an arm gives (tabsim's rewards are 0/1): NGRPO's virtual sample


@register_estimator("ngrpo")
def ngrpo(rewards, *, lengths, valid, hp):
    """NGRPO's advantage calibration: the group z-score with a virtual maximum-reward sample in its statistics.

    ``A_i = (r_i - mean(r_1..r_G, r_max)) / (std(r_1..r_G, r_max) + eps)`` for the G real answers (NGRPO, Nan et
    al., arXiv 2509.18851). Checked against the authors' released trainer (``compute_ngrpo_outcome_advantage``
    in github.com/nangongrui-ngr/NGRPO): every group with more than one answer gets ``add_max_reward_num = 1``
    virtual sample of reward ``max_reward = 1.0``, mean and ``torch.std`` (Bessel) run over the G + 1 values,
    ``eps = 1e-6``; the virtual sample's own advantage is not used. ``hp.std_ddof`` / ``hp.std_eps`` pick the
    std and epsilon (the authors: 1, 1e-6). An all-wrong group gets ``-1/sqrt(G + 1)`` on every answer with the
    Bessel std (not 0, which is the point); an all-right group 0 (every value equals ``r_max``). The real
    answers' advantages do not sum to zero, and a mixed group's differ from GRPO's: NGRPO on (k of G right) is
    GRPO on (k + 1 of G + 1 right) restricted to the real answers, e.g. 1 of 8: +1.764 / -0.504 (GRPO:
    +2.475 / -0.354). Its asymmetric clip (looser for A > 0) is the ``clip`` surrogate with ``eps_high >
    eps_low`` (the authors' script: 0.24 / 0.16).

    Args:
      rewards: ``[B, G]`` rewards in ``[0, r_max]``.
    Returns:
      ``[B, G]`` advantages.
    """
    g = rewards.shape[-1]
    n = g + 1.0
    mean = (rewards.sum(-1, keepdims=True) + R_MAX) / n
    sq = ((rewards - mean) ** 2).sum(-1, keepdims=True) + (R_MAX - mean) ** 2
    std = jnp.sqrt(sq / (n - hp.std_ddof))
    solved = (rewards.min(-1, keepdims=True) == R_MAX)  # every value equals r_max: 0/0 when eps = 0
    return jnp.where(solved, 0.0, (rewards - mean) / jnp.where(solved, 1.0, std + hp.std_eps))


@register_estimator("raft")
def raft(rewards, *, lengths, valid, hp):
    """Positive-only advantage ``A = max(r, 0)``: RAFT / RAFT++ (Xiong et al., arXiv 2504.11343).

    Rejection-sampling fine-tuning as a policy gradient: only rewarded answers move, each by its reward. Checked
    against the authors' released trainer (``compute_raft_outcome_advantage`` in github.com/RLHFlow/Minimal-RL):
    the answer's reward with negative rewards set to 0 and no group baseline, averaged by the loss over every
    token of the batch (verl's ``token-mean``, the rejected answers' tokens counted with A = 0). On tabsim's 0/1
    rewards ``A = 1[r = 1]``. RAFT is this with the ``reinforce`` surrogate (``-A log pi``), RAFT++ with the
    PPO clip (the authors' ``policy_loss=plusplus``).
    """
    return jnp.maximum(rewards, 0.0)


@register_estimator("asymre")
def asymre(rewards, *, lengths, valid, hp):
    """Asymmetric REINFORCE: the group mean shifted by ``delta``, ``A = r - (mean_g + delta)``.

    Arnal et al., arXiv 2506.20520: an off-policy REINFORCE whose baseline ``V`` sits below the behaviour
    policy's value (``delta < 0``) leans on the rewarded answers. Checked against the implementation of
    arXiv 2509.24203's authors (Trinity-RFT ``asymre``: ``mean(group rewards) + baseline_shift``, default
    ``-0.1``; not the AsymRE authors' own code, which we did not find). ``delta = hp.baseline_shift``. Homogeneous
    groups are not zeroed: they get ``-delta`` (an all-right or all-wrong group moves by ``+0.1`` at the default).
    ``delta = 0`` is ``dr_grpo``.
    """
    centred = jnp.where(rewards.max(-1, keepdims=True) == rewards.min(-1, keepdims=True), 0.0,
                        rewards - rewards.mean(-1, keepdims=True))
    return centred - hp.baseline_shift


@register_estimator("pvpo", batch=True, reads=("p0",),
                    no_expected="its baseline is each prompt's reference success rate, which the exact flow's "
                                "tables (one advantage per count of rewards in a group) do not carry")
def pvpo(batch):
    """PVPO's static value baseline: ``A = r - V_ref(x)``, ``V_ref(x) = p0(x)`` the reference success rate.

    PVPO (Feng et al., arXiv 2508.21104) rolls the reference model out on each prompt before training and uses
    the mean reward of those rollouts as a fixed anchor, ``A_i = r_i - mean(r_ref)`` (the paper's advantage,
    as its summaries quote it; we could not read its code). In a table the anchor is exact: ``p0``, the prior
    policy's probability of a correct answer (:func:`tabsim.sim.algos.context.reference_success`), which is the
    expected reference reward under the ``true`` arm; under another arm it is still the success rate, not that
    arm's expected reward. The paper refreshes the anchor from time to time; here it stays the prior's.
    Homogeneous groups are not zeroed (an all-wrong group gets ``-p0``).

    Args:
      batch: ``rewards [B, G]``, ``p0 [B]``.
    Returns:
      ``[B, G]`` advantages.
    """
    return batch.rewards - batch.p0[:, None].astype(batch.rewards.dtype)
