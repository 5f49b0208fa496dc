"""Advantage estimators with a baseline other than the group's own mean, or that read the rollout's context.

Registered into :data:`tabsim.sim.algos.advantages.ESTIMATORS` when :mod:`tabsim.sim.algos` is imported. The
count-only ones (``ngrpo``, ``raft``, ``asymre``, ``grpo_lead``, ``disco_b``, ``s_grpo``) are functions of a group's
rewards alone, so the exact expected flow runs them as it runs GRPO; ``pvpo`` reads each prompt's reference success
rate ``p0`` (``reads=("p0",)``, see :mod:`tabsim.sim.algos.batch`) and ``edge`` each answer's entropy, so they have
no exact flow.
"""
from __future__ import annotations

import jax.numpy as jnp

from tabsim.sim.algos.advantages import grpo as group_zscore, register_estimator

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


# GRPO-LEAD's logistic difficulty weight w(x) = LEAD_A + (LEAD_B - LEAD_A) / (1 + exp(LEAD_K (x - LEAD_X0))): the
# defaults of its authors' logistic_reweight (github.com/aeroplanepaper/GRPO-LEAD, verl/trainer/ppo/core_algos.py)
LEAD_A, LEAD_B, LEAD_X0, LEAD_K = 0.4, 1.5, 0.75, 10.0


def lead_weight(x):
    """GRPO-LEAD's logistic weight of a correct ratio ``x``: ``0.4 + 1.1 / (1 + exp(10 (x - 0.75)))``."""
    return LEAD_A + (LEAD_B - LEAD_A) / (1.0 + jnp.exp(LEAD_K * (x - LEAD_X0)))


@register_estimator("grpo_lead")
def grpo_lead(rewards, *, lengths, valid, hp):
    """GRPO-LEAD's difficulty-aware reweighting of the group z-score: ``A' = A w(p)`` for ``A > 0``, ``A w(1 - p)``
    otherwise.

    ``p`` the group's share of rewards above 0 (its correct ratio), ``w(x) = 0.4 + 1.1 / (1 + exp(10 (x - 0.75)))``
    (Zhang & Zuo, arXiv 2504.09696). Checked against the authors' released trainer
    (``compute_grpo_outcome_advantage`` and ``logistic_reweight`` in github.com/aeroplanepaper/GRPO-LEAD): the
    z-score with ``torch.std`` (Bessel) and eps 1e-6, then the weight of ``p`` for a positive advantage and of
    ``1 - p`` for the others, so a rare success on a hard prompt is amplified (1 of 8: ``w = 1.49``) and a rare
    failure on an easy prompt likewise (7 of 8 right: the failure's weight ``w(1/8) = 1.49``, the successes'
    ``w(7/8) = 0.65``). ``hp.std_ddof`` / ``hp.std_eps`` pick the std (the authors: 1, 1e-6). The paper's other two
    parts are rewards, not this estimator: the length-dependent accuracy reward and the -1 for a wrong answer (on
    0/1 rewards the z-score is the same with -1/+1). Homogeneous groups give 0.
    """
    z = group_zscore(rewards, lengths=lengths, valid=valid, hp=hp)
    p = (rewards > 0).astype(rewards.dtype).mean(-1, keepdims=True)
    return z * jnp.where(z > 0, lead_weight(p), lead_weight(1.0 - p))


@register_estimator("disco_b")
def disco_b(rewards, *, lengths, valid, hp):
    """DisCO's discriminative weights: ``A = G / n+`` on each rewarded answer, ``-G / n-`` on the others.

    DisCO-b (Li et al., arXiv 2505.12366) maximises ``mean_{o+} s(o) - mean_{o-} s(o)`` per question, ``s`` a
    score of the whole answer. Checked against the authors' released loss (``compute_policy_loss_discob_logL`` in
    github.com/Optimization-AI/DisCO): positives are rewards == 1, negatives == 0, groups without both are left out,
    ``s`` is the answer's mean token log-probability and the per-question terms are summed and divided by the
    number of questions. As advantages: the gradient of that objective is ``sum_i w_i grad s_i / B`` with ``w = 1/n+``
    or ``-1/n-``; tabsim's ``seq-mean-token-mean`` aggregation divides by ``B G``, hence the factor G: with the
    ``reinforce`` surrogate (``-A log pi``) and ``seq-mean-token-mean`` this is DisCO-b's ``log L`` score term exactly
    (its KL constraint is a separate loss term). The weight a group gets, ``sum |A| = 2G``, is flat in the group's
    success rate (GRPO's is ``~ sqrt(p (1 - p))``). Answers with any other reward get 0.
    """
    g = rewards.shape[-1]
    pos = (rewards == 1.0).astype(rewards.dtype)
    neg = (rewards == 0.0).astype(rewards.dtype)
    n_pos, n_neg = pos.sum(-1, keepdims=True), neg.sum(-1, keepdims=True)
    mixed = (n_pos > 0) & (n_neg > 0)
    w = pos * g / jnp.maximum(n_pos, 1.0) - neg * g / jnp.maximum(n_neg, 1.0)
    return jnp.where(mixed, w, 0.0)


@register_estimator("edge", batch=True, reads=("entropy",), batch_level=True,
                    no_expected="it divides each answer's advantage by the rollout policy's entropy along that answer "
                                "and multiplies by the batch's mean entropy, neither of which the exact flow's tables "
                                "carry")
def edge(batch):
    """EDGE-GRPO's entropy-driven advantage: ``A_i = z_i * mean_batch(H) / H_i``, ``H_i`` the answer's mean entropy.

    Zhang et al., arXiv 2507.21848. Checked against the authors' released trainer (``trl_edge``,
    ``grpo_aha_trainer._compute_loss`` with ``EDA=True`` in github.com/ZhangXJ199/EDGE-GRPO): the group z-score
    (TRL's: Bessel std, eps 1e-4) is *divided* by the answer's mean token entropy and multiplied by the mean of that
    entropy over the batch's answers, so a confident (low-entropy) answer gets the larger advantage; an abstract's
    reading ``A H_i / mean H`` has it the other way round. Differences kept deliberately: ``H_i`` here is the rollout
    policy's entropy averaged over the answer's own nodes (``Batch.entropy``, a constant); the authors' is the
    entropy of the policy being trained, averaged over the padded completion width and not detached (their
    gradient has an extra term through it; its value at the first pass is the same); their batch is the answers
    gathered across devices in one micro-step, here the batch's kept answers (``valid``). An entropy below 1e-6
    counts as 1e-6. The paper's guided error correction (a correct answer injected into all-wrong groups) is a
    sampler change, not part of this estimator. ``hp.std_ddof`` / ``hp.std_eps`` pick the z-score (TRL: 1, 1e-4).

    Args:
      batch: ``rewards [B, G]``, ``entropy [B, G]``, ``valid [B]``.
    Returns:
      ``[B, G]`` advantages.
    """
    z = group_zscore(batch.rewards, lengths=batch.lengths, valid=batch.valid, hp=batch.hp)
    h = jnp.maximum(batch.entropy.astype(z.dtype), 1e-6)
    w = jnp.broadcast_to(batch.valid[:, None], h.shape).astype(z.dtype)
    mean_h = (h * w).sum() / jnp.maximum(w.sum(), 1.0)
    return z * mean_h / h


def s_grpo_weight(k, n, p, eps=1e-8):
    """S-GRPO's noise-aware weight ``w*(n, k, p) = (1 - 2p) t (1 - t) / (sqrt(q (1 - q) + eps) sqrt(t (1 - t) + eps))``,
    ``q = k / n`` the observed success rate and ``t = clip((q - p) / (1 - 2p), 0, 1)`` the de-noised one."""
    q = k / n
    t = jnp.clip((q - p) / (1.0 - 2.0 * p), 0.0, 1.0)
    return (1.0 - 2.0 * p) * t * (1.0 - t) / (jnp.sqrt(q * (1.0 - q) + eps) * jnp.sqrt(t * (1.0 - t) + eps))


@register_estimator("s_grpo")
def s_grpo(rewards, *, lengths, valid, hp):
    """S-GRPO's noise-aware advantage: the group z-score times ``w*(n, k, p)`` (:func:`s_grpo_weight`).

    Shen et al., "Mitigating Think-Answer Mismatch in LLM Reasoning Through Noise-Aware Advantage Reweighting",
    arXiv 2508.05928. Checked against the authors' released trainer (``group_weight`` and
    ``compute_monte_carlo_advantages`` with ``critic_type drgrpo`` in github.com/shenpeijun0212/S-GRPO,
    train/train_S-GRPO.py): ``A = (r - mean_g) w* / (std_g + 1e-8)`` with ``torch.std`` (Bessel), ``k`` the
    rewards above 0, ``p = hp.sgrpo_noise`` the assumed symmetric flip rate (their scripts: 0.1) and eps 1e-8 inside
    the square roots. A group whose observed rate is within ``p`` of 0 or 1 (``t`` clipped to 0 or 1) gets weight 0:
    an unbalanced group is gated off; ``p = 0`` leaves ``w* ~ 1`` on mixed groups (``t = q``). ``hp.std_ddof`` /
    ``hp.std_eps`` pick the z-score's std (the authors: 1, 1e-8).
    """
    k = (rewards > 0).astype(rewards.dtype).sum(-1, keepdims=True)
    return group_zscore(rewards, lengths=lengths, valid=valid, hp=hp) * s_grpo_weight(k, rewards.shape[-1],
                                                                                      hp.sgrpo_noise)
