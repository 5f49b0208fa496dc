"""Reward arms. Every arm sees the same sampled answers and the same reward noise (paired).

``rewards(arm, seed, step, env, task_b, answers, params, arms) -> [B, G]``: the rewards of the run's arms
are computed from one set of uniforms and the arm is picked by indexing, so under ``vmap`` over arms
the only thing that differs between arms is the reward itself (common random numbers).

The label-free arms read no label. ``frequency`` is TTRV's soft frequency reward (arXiv 2510.06783:
``r_1(y_j) = p(y_j)``, the share of the group's answers equal to ``y_j``; its second, entropy
term is not built). ``self_certainty`` and ``entropy`` read the rollout policy (``policy = (logq, mask)``:
the log next-token distributions at the answer's visited nodes ``[B, G, T, V]``, or ``[B, 1, 1, V]`` on a
bandit, and the token mask ``[B, G, T]``):

* ``self_certainty``, Intuitor's reward (arXiv 2505.19590): the mean over the answer's tokens of
  ``KL(U || p_t) = -log V - (1/V) sum_j log p_t(j)``; code built on it computes it per token
  as ``logsumexp(z) - mean(z)`` of the logits ``z``, the same value plus the constant ``log V`` (which a group
  baseline removes).
* ``entropy``, RENT's reward (arXiv 2505.22660): minus the mean over the answer's tokens of the
  entropy of ``p_t`` (the paper's default over all response tokens; its last-chunk variants are not built).

On a bandit every answer of a prompt is sampled at one node, so both are the same for the whole group:
a group-relative estimator gets no signal from them there (the tree's answers visit different nodes).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from tabsim.base.choices import ARMS  # noqa: F401  (the names live without JAX, for the config)
from tabsim.sim.envs.bandit import plurality
from tabsim.sim import rng as R

OFFLINE_ARMS = ("majority_offline", "incorrect")  # read the task's offline majority label
POLICY_ARMS = ("self_certainty", "entropy")  # read the rollout policy's log-probabilities
NOISE_ARMS = ("random", "noisy")  # read the shared reward uniforms
ARM_HELP = {
    "frozen": "no update at all: the base policy",
    "random": "reward ~ Bernoulli(gamma), independent of the answer",
    "majority": "1 iff the answer is its own group's plurality answer (online, TTRL-style)",
    "majority_offline": "1 iff the answer equals the prompt's label fixed from m base-policy samples",
    "incorrect": "offline majority label kept only where it is wrong (other prompts pay nothing)",
    "format": "1 iff the answer is the prompt's designated wrong 'format' answer",
    "true": "1 iff the answer is correct (the verifier)",
    "noisy": "the verifier with false-positive rate fpr and false-negative rate fnr",
    "self_certainty": "Intuitor: mean over the answer's tokens of KL(uniform || policy) (no label)",
    "entropy": "RENT: minus the mean over the answer's tokens of the policy's entropy (no label)",
    "frequency": "TTRV: the share of the group's answers equal to this one (no label)",
}


def arm_id(name: str) -> int:
    return ARMS.index(name)


def token_mean(x, mask):
    """The mean of per-token values ``x`` (broadcast against ``mask [B, G, T]``) over each answer's tokens."""
    return (x * mask).sum(-1) / jnp.maximum(mask.sum(-1), 1.0)


def arm_rewards(name, seed, step, env, task_b, answers, params, u, policy=None):
    """Rewards ``[B, G]`` of the named arm; ``u`` are the shared reward uniforms ``[B, G]``, ``policy`` the
    rollout policy's ``(logq, mask)`` (read by :data:`POLICY_ARMS` only)."""
    if name == "frozen":  # never used for an update
        return jnp.zeros(answers.shape, jnp.float32)
    if name == "frequency":
        return (answers[..., :, None] == answers[..., None, :]).astype(jnp.float32).mean(-1)
    if name in POLICY_ARMS:
        if policy is None:
            raise ValueError(f"arm {name!r} reads the rollout policy, which this caller does not pass (the exact "
                             "expected flow has no such arm; use train.dynamics = 'sampled')")
        logq, mask = policy
        if name == "self_certainty":
            per_token = -jnp.log(float(logq.shape[-1])) - logq.mean(-1)
        else:
            per_token = (jnp.exp(logq) * logq).sum(-1)  # minus the entropy
        return jnp.broadcast_to(token_mean(per_token, mask), answers.shape).astype(jnp.float32)
    if name == "random":
        return (u < params.gamma).astype(jnp.float32)
    if name == "majority":
        label = plurality(seed, step, R.TIE, answers, env.n_answers, env.tie, env.rng)
        return (answers == label[:, None]).astype(jnp.float32)
    if name in ("majority_offline", "incorrect"):
        off = (answers == task_b.offline_label[:, None]).astype(jnp.float32)
        if name == "majority_offline":
            return off
        return off * (1.0 - jnp.take_along_axis(task_b.correct, task_b.offline_label[:, None], 1))
    if name == "format":
        return env.is_format(task_b, answers)
    correct = env.answer_correct(task_b, answers)
    if name == "true":
        return correct
    if name == "noisy":
        return jnp.where(correct > 0, (u >= params.fnr), (u < params.fpr)).astype(jnp.float32)
    raise ValueError(f"unknown arm {name!r}; allowed: {', '.join(ARMS)}")


def all_rewards(seed, step, env, task_b, answers, params, arms=ARMS, policy=None):
    """Rewards of the listed arms, stacked ``[len(arms), B, G]``, all from the same noise. Without ``policy`` a
    policy-reading arm's rows are NaN (a caller that reads another arm, as with the default ``arms``, needs no
    policy; one that reads such an arm without passing it gets NaN, never a made-up reward)."""
    u = None
    if any(a in NOISE_ARMS for a in arms):
        u = R.uniform(seed, answers.shape, step=step, tag=R.REWARD, rng=env.rng)
    return jnp.stack([jnp.full(answers.shape, jnp.nan, jnp.float32) if policy is None and a in POLICY_ARMS else
                      arm_rewards(a, seed, step, env, task_b, answers, params, u, policy) for a in arms])


def rewards(arm, seed, step, env, task_b, answers, params, arms=ARMS, policy=None):
    """Rewards ``[B, G]`` of ``arms[arm]`` (``arm`` a traced position in ``arms``)."""
    stacked = all_rewards(seed, step, env, task_b, answers, params, arms, policy)
    return stacked[arm] if len(arms) > 1 else stacked[0]
