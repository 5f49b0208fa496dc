"""PPO's tabular critic (``algo.tracker = "value"``, :mod:`tabsim.sim.critic`): verl's GAE at gamma = lambda = 1 and
its masked whitening, written in NumPy from verl's ``core_algos.compute_gae_advantage_return`` and
``verl_F.masked_whiten``; hand values of the advantages and of the critic's step; the config's refusals."""
from __future__ import annotations

from types import SimpleNamespace

import jax.numpy as jnp
import numpy as np
import pytest

import tabsim as ts
from tabsim.base import choices
from tabsim.config import ConfigError
from tabsim.sim import critic
from tabsim.sim import tracker as T


def np_gae(token_rewards, values, mask, gamma=1.0, lam=1.0):
    """verl's backward recursion (values masked by the response mask, so 0 after the last token), then
    ``masked_whiten`` (masked mean, Bessel masked variance, rsqrt(var + 1e-8))."""
    values = values * mask
    last, out = 0.0, []
    T_ = token_rewards.shape[-1]
    for t in reversed(range(T_)):
        nxt = values[:, t + 1] if t < T_ - 1 else 0.0
        delta = token_rewards[:, t] + gamma * nxt - values[:, t]
        last = delta + gamma * lam * last
        out.append(last)
    adv = np.stack(out[::-1], axis=1)
    n = mask.sum()
    mean = (adv * mask).sum() / n
    var = (((adv - mean) ** 2) * mask).sum() / n * n / (n - 1)
    return (adv - mean) / np.sqrt(var + 1e-8)


def test_advantages_are_verls_gae_on_a_tree():
    rng = np.random.default_rng(0)
    B, G, Tn, n_nodes = 3, 4, 3, 7
    table = critic.ValueTable(v=jnp.asarray(rng.normal(size=(5, n_nodes)), jnp.float32))
    idx = jnp.asarray([4, 0, 2])
    lengths = rng.integers(1, Tn + 1, size=(B, G))
    mask = (np.arange(Tn) < lengths[..., None]).astype(np.float32)
    nodes = rng.integers(0, n_nodes, size=(B, G, Tn)) * mask.astype(int)
    rewards = rng.integers(0, 2, size=(B, G)).astype(np.float32)
    rollout = SimpleNamespace(tokens=jnp.zeros((B, G, Tn), jnp.int32), mask=jnp.asarray(mask),
                              nodes=jnp.asarray(nodes, jnp.int32))
    got = np.asarray(critic.advantages(table, idx, jnp.asarray(rewards), rollout))
    # verl's layout: one row per answer, the outcome score on its last token
    values = np.asarray(table.v)[np.asarray(idx)[:, None, None], nodes].reshape(B * G, Tn)
    token_rewards = np.zeros((B * G, Tn), np.float32)
    token_rewards[np.arange(B * G), lengths.reshape(-1) - 1] = rewards.reshape(-1)
    want = np_gae(token_rewards, values, mask.reshape(B * G, Tn)).reshape(B, G, Tn) * mask
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_bandit_advantages_by_hand():
    table = critic.ValueTable(v=jnp.asarray([[0.5], [0.0]]))
    rollout = SimpleNamespace(tokens=jnp.zeros((2, 2, 1), jnp.int32), mask=jnp.ones((2, 2, 1)))
    got = critic.advantages(table, jnp.asarray([0, 1]), jnp.asarray([[1.0, 0.0], [1.0, 1.0]]), rollout)
    # R - V = [[0.5, -0.5], [1, 1]]: mean 0.5, Bessel variance 1.5 / 3 = 0.5
    np.testing.assert_allclose(got, np.asarray([[0.0, -1.0], [0.5, 0.5]]) / np.sqrt(0.5 + 1e-8), atol=1e-6)
    assert got.shape == (2, 2)


def test_the_critic_moves_each_state_toward_its_mean_return():
    table = critic.init(3, 4)
    rollout = SimpleNamespace(tokens=jnp.zeros((2, 2, 2), jnp.int32),
                              mask=jnp.asarray([[[1, 1], [1, 0]], [[1, 1], [1, 1]]], jnp.float32),
                              nodes=jnp.asarray([[[0, 1], [0, 0]], [[0, 2], [0, 1]]], jnp.int32))
    new = np.asarray(critic.advance(table, jnp.asarray([0, 0]), jnp.asarray([[1.0, 0.0], [1.0, 1.0]]), rollout,
                                    0.1).v)
    # prompt 0: root visited by all four answers (mean return 3/4), node 1 by answers 1 and 4 (returns 1, 1),
    # node 2 by answer 3 (1); node 3 and prompts 1, 2 untouched
    np.testing.assert_allclose(new[0], [0.075, 0.1, 0.1, 0.0], atol=1e-7)
    assert not new[1:].any()


def test_registered_as_a_tracker_that_does_not_weight_the_draw():
    assert choices.TRACKERS == T.TRACKERS.names() and "value" in choices.TRACKERS
    assert T.TRACKERS.meta("value")["no_expected"]
    env = SimpleNamespace(n_prompts=3, n_nodes=5)
    table = T.init(SimpleNamespace(tracker="value"), env)
    assert table.v.shape == (3, 5) and T.weights(table) is None


def test_refusals_and_the_default():
    with pytest.raises(ConfigError, match="algo.kl_placement: 'reward'"):
        ts.resolve({"preset": "ppo", "algo": {"kl_placement": "reward", "beta": 0.01}})
    with pytest.raises(ConfigError, match="train.group_stage: 'cppo'.*algo.tracker = 'value'"):
        ts.resolve({"preset": "ppo", "task": {"env": "tree"}, "train": {"group_size": 8, "group_stage": "cppo",
                                                                       "group_keep": 4}})
    with pytest.raises(ConfigError, match="value_lr"):
        ts.resolve({"preset": "ppo", "algo": {"value_lr": 0.0}})
    assert "value_lr" not in ts.resolve({"preset": "grpo"}).model_dump()["algo"]
