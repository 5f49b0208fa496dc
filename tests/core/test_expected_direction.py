"""tabsim.sim.expected.direction: the true gradient of the mean pass@1 and an update's direction against it.

The gradient by hand and by finite differences, the direction numbers by hand (fast); the exact expected
updates of RLOO and GRPO against it with -m heavy (one compiled step each).
"""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pytest

from tabsim.sim.algos import AlgoSpec
from tabsim.sim.envs.bandit import BanditEnv
from tabsim.sim.expected import expected_update
from tabsim.sim.expected.direction import direction, policy_gradient
from tabsim.sim.params import Hyper
from tabsim.sim.update import Schedule


def _j(z, c):
    pi = np.exp(z - z.max(-1, keepdims=True))
    pi /= pi.sum(-1, keepdims=True)
    return float((pi * c).sum(-1).mean())


def test_gradient_by_hand_and_by_finite_differences():
    # one prompt, two answers, uniform: pi = (1/2, 1/2), J = 1/2, g = pi (c - J) = (+1/4, -1/4)
    np.testing.assert_allclose(policy_gradient([[0.0, 0.0]], [[1, 0]]), [[0.25, -0.25]], atol=1e-15)
    rng = np.random.default_rng(3)
    z, c = rng.normal(0, 1, (3, 5)), (rng.random((3, 5)) < 0.4).astype(float)
    g = policy_gradient(z, c)
    h, fd = 1e-6, np.zeros_like(z)
    for i in np.ndindex(z.shape):
        up, dn = z.copy(), z.copy()
        up[i] += h
        dn[i] -= h
        fd[i] = (_j(up, c) - _j(dn, c)) / (2 * h)
    np.testing.assert_allclose(g, fd, atol=1e-9)


def test_direction_by_hand():
    """delta = 2 g on prompt 0, g on prompt 1: scales 2 and 1, each prompt along its own gradient."""
    z, c = np.array([[0.0, 0.0], [math.log(3.0), 0.0]]), np.array([[1, 0], [1, 0]])
    g = policy_gradient(z, c)  # prompt 1: pi = (3/4, 1/4), g = pi (c - 3/4) / 2 = (3/32, -3/32)
    np.testing.assert_allclose(g, [[0.125, -0.125], [3 / 32, -3 / 32]], atol=1e-15)
    out = direction(np.array([2 * g[0], g[1]]), z, c)
    np.testing.assert_allclose(out["scale"], [2.0, 1.0])
    np.testing.assert_allclose(out["cosine_p"], [1.0, 1.0])
    assert out["scale_spread"] == pytest.approx(2.0)
    a, b = (g[0] ** 2).sum(), (g[1] ** 2).sum()
    assert out["cosine"] == pytest.approx((2 * a + b) / math.sqrt((4 * a + b) * (a + b)))
    # a prompt with all its mass on a correct answer has no gradient: left out, not a division by 0
    out = direction(np.zeros((2, 2)), np.array([[0.0, 0.0], [0.0, 0.0]]), np.array([[1, 0], [1, 1]]))
    assert np.isnan(out["scale"][1]) and math.isnan(out["cosine"])
    with pytest.raises(ValueError, match="shape"):
        direction(np.zeros((1, 2)), z, c)


@pytest.mark.heavy  # a compiled expected step per estimator (about 4-7 s each)
@pytest.mark.parametrize("estimator,exact", [("rloo", True), ("grpo", False)])
def test_exact_expected_update_of_rloo_is_along_the_gradient_and_grpo_is_not(estimator, exact):
    """RLOO's leave-one-out baseline is unbiased: E[update] = lr P(in batch) grad J exactly (cosine 1, every
    prompt's scale equal); GRPO's per-prompt std reweights prompts of different pass@1 (cosine < 1). G = 4: at
    G = 3 a mixed group of binary rewards has the same std whatever its count (sqrt(2) / 3), and GRPO is unbiased."""
    env = BanditEnv(n_prompts=3, n_answers=3, n_correct=1, tie="lowest", offline_samples=0)
    hp = Hyper(prior_strength=0.45, format_boost=0.0, lr=0.5, std_ddof=0, std_eps=1e-8, filter=0.0)
    task = env.init_task(jnp.asarray([0, 0], jnp.uint32), hp)
    z = np.array([[0.0, 0.0, 0.0], [1.5, 0.0, 0.0], [-1.0, 0.5, 0.0]])
    c = np.asarray(task.correct, np.float64)
    algo = AlgoSpec(estimator=estimator, surrogate="reinforce", aggregation="token-mean")
    sched = Schedule(steps=1, batch_size=3, group_size=4, eval_every=1)
    delta = np.asarray(expected_update(env, algo, sched, "true", task, z, hp, precision="float64")) - z
    out = direction(delta, z, c)
    np.testing.assert_allclose(out["cosine_p"], 1.0, atol=1e-9)  # within a prompt: along its own gradient
    if exact:
        # every prompt is in the batch, and RLOO's expected advantage given the answer is r - J_p exactly
        assert out["cosine"] == pytest.approx(1.0, abs=1e-12) and out["scale_spread"] == pytest.approx(1.0, abs=1e-9)
    else:
        assert out["cosine"] < 1 - 1e-5 and out["scale_spread"] > 1.02  # 0.99990 and 1.033 here
