"""Reward arms. Every arm sees the same sampled answers and the same reward noise (paired).

``rewards(arm, seed, step, env, task_b, answers, params, arms) -> [B, G]``: the rewards of the run's arms
are computed from one set of uniforms and the arm is picked by indexing, so under ``vmap`` over arms
the only thing that differs between arms is the reward itself (common random numbers).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from tabsim.base.choices import ARMS  # noqa: F401  (the names live without JAX, for the config)
from tabsim.sim.envs.bandit import plurality
from tabsim.sim import rng as R

OFFLINE_ARMS = ("majority_offline", "incorrect")  # read the task's offline majority label
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
}


def arm_id(name: str) -> int:
    return ARMS.index(name)


def arm_rewards(name, seed, step, env, task_b, answers, params, u):
    """Rewards ``[B, G]`` of the named arm; ``u`` are the shared reward uniforms ``[B, G]``."""
    if name == "frozen":  # never used for an update
        return jnp.zeros(answers.shape, jnp.float32)
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


def all_rewards(seed, step, env, task_b, answers, params, arms=ARMS):
    """Rewards of the listed arms, stacked ``[len(arms), B, G]``, all from the same noise."""
    u = None
    if any(a in NOISE_ARMS for a in arms):
        u = R.uniform(seed, answers.shape, step=step, tag=R.REWARD, rng=env.rng)
    return jnp.stack([arm_rewards(a, seed, step, env, task_b, answers, params, u) for a in arms])


def rewards(arm, seed, step, env, task_b, answers, params, arms=ARMS):
    """Rewards ``[B, G]`` of ``arms[arm]`` (``arm`` a traced position in ``arms``)."""
    stacked = all_rewards(seed, step, env, task_b, answers, params, arms)
    return stacked[arm] if len(arms) > 1 else stacked[0]
