"""Reward arms. Every arm sees the same sampled answers and the same reward noise (paired).

``rewards(arm_id, seed, step, env, task_b, answers, params) -> [B, G]``: all arms' rewards are computed from
one set of uniforms and the arm is picked with ``lax.switch``-free indexing, so under ``vmap`` over
arms the only thing that differs between arms is the reward itself (common random numbers).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from tabsim.envs.bandit import plurality
from tabsim import rng as R

ARMS = ("frozen", "random", "majority", "majority_offline", "incorrect", "format", "true", "noisy")
ARM_HELP = {
    "frozen": "no update at all: the base policy",
    "random": "reward ~ Bernoulli(gamma), independent of the answer",
    "majority": "1 iff the answer is its own group's plurality answer (online, TTRL-style)",
    "majority_offline": "1 iff the answer equals the prompt's label fixed from m base-policy samples",
    "incorrect": "offline majority label kept only where it is wrong (other prompts pay nothing)",
    "format": "1 iff the answer is the prompt's designated wrong 'format' answer",
    "true": "1 iff the answer is correct (the verifier)",
    "noisy": "the verifier with false-positive rate fpr and false-negative rate fnr",
}


def arm_id(name: str) -> int:
    return ARMS.index(name)


def all_rewards(seed, step, env, task_b, answers, params):
    """Rewards of every arm, stacked ``[len(ARMS), B, G]`` (the same noise for all)."""
    u = R.uniform(seed, answers.shape, step=step, tag=R.REWARD, rng=env.rng)
    correct = env.answer_correct(task_b, answers)
    label = plurality(seed, step, R.TIE, answers, env.n_answers, env.tie, env.rng)
    majority = (answers == label[:, None]).astype(jnp.float32)
    off = (answers == task_b.offline_label[:, None]).astype(jnp.float32)
    off_wrong = 1.0 - jnp.take_along_axis(task_b.correct, task_b.offline_label[:, None], 1)
    noisy = jnp.where(correct > 0, (u >= params.fnr), (u < params.fpr)).astype(jnp.float32)
    return jnp.stack([
        jnp.zeros_like(correct),  # frozen: never used for an update
        (u < params.gamma).astype(jnp.float32),
        majority,
        off,
        off * off_wrong,
        env.is_format(task_b, answers),
        correct,
        noisy,
    ])


def rewards(arm, seed, step, env, task_b, answers, params):
    """Rewards ``[B, G]`` of arm index ``arm`` (a traced integer)."""
    return all_rewards(seed, step, env, task_b, answers, params)[arm]
