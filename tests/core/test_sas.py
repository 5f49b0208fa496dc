"""DCPO's smooth advantage standardization (``algo.tracker = "dcpo_sas"``, :mod:`tabsim.sim.sas`) against a NumPy
transcription of the authors' ``compute_dcpo_outcome_advantage`` and ``get_mean_std`` (lime-RL/DCPO), run over
several steps with per-prompt statistics kept between them as their trainer keeps them, and hand values."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import tabsim as ts
from tabsim.config import ConfigError
from tabsim.sim import sas
from tabsim.sim import tracker as T


def np_get_mean_std(old_mean, old_std, times, new_mean, new_std):
    old_times = times - 1
    if old_times == 0:
        return new_mean, new_std
    mean = (old_mean * old_times + new_mean) / (old_times + 1)
    var = (old_times * old_std ** 2 + new_std ** 2 + old_times / times * (new_mean - old_mean) ** 2) / times
    return mean, np.sqrt(var)


def np_dcpo_step(store, idx, rewards):
    """One step of the authors' estimator over the groups ``rewards [B, G]`` of prompts ``idx``; ``store`` maps a
    prompt to its (mean, std, times), as their trainer's old_mean_std, updated in place."""
    out = np.zeros_like(rewards)
    for b, x in enumerate(idx):
        mean0, std0, times0 = store.get(x, (0.0, 0.0, 0))
        r = rewards[b]
        new_mean, new_std = r.mean(), r.std(ddof=1)
        mean, std = np_get_mean_std(mean0, std0, times0 + 1, new_mean, new_std)
        for i in range(len(r)):
            z_new = (r[i] - new_mean) / new_std if new_std > 0 else 0.0
            z_old = (r[i] - mean) / std if std > 0 else 0.0
            w = 1 / (times0 + 1)
            s1, s2 = w * z_old + (1 - w) * z_new, w * z_new + (1 - w) * z_old
            out[b, i] = s1 if abs(s1) < abs(s2) else s2
        store[x] = (mean, std, times0 + 1)
    return out


def test_against_the_authors_estimator_over_steps():
    rng = np.random.default_rng(1)
    store, state = {}, sas.init(5)
    for _ in range(6):
        idx = rng.choice(5, size=3, replace=False)
        rewards = (rng.random((3, 6)) < rng.random((3, 1))).astype(np.float32)
        want = np_dcpo_step(store, idx, rewards)
        got = np.asarray(T.advantages(state, jnp.asarray(idx), jnp.asarray(rewards)))
        np.testing.assert_allclose(got, want, atol=1e-5)
        state = T.advance(state, jnp.asarray(idx), jnp.asarray(rewards), 0.875)
    for x, (mean, std, times) in store.items():
        np.testing.assert_allclose([state.mean[x], state.std[x], state.times[x]], [mean, std, times], atol=1e-5)


def test_by_hand():
    state, idx = sas.init(2), jnp.asarray([1])
    first = jnp.asarray([[1.0, 0.0, 0.0, 0.0]])  # m 1/4, s 1/2: the group's z-score
    np.testing.assert_allclose(state.advantages(idx, first), [[1.5, -0.5, -0.5, -0.5]], atol=1e-6)
    state = state.advance(idx, first)
    # second group m 1/2, s sqrt(1/3); cumulative mu 3/8, sigma^2 (1/4 + 1/3 + (1/4)^2 / 2) / 2; weights 1/2, 1/2
    second = jnp.asarray([[1.0, 1.0, 0.0, 0.0]])
    s, sigma = np.sqrt(1 / 3), np.sqrt((0.25 + 1 / 3 + 0.0625 / 2) / 2)
    hi, lo = (0.5 / s + 0.625 / sigma) / 2, (-0.5 / s - 0.375 / sigma) / 2
    np.testing.assert_allclose(state.advantages(idx, second), [[hi, hi, lo, lo]], atol=1e-6)
    assert np.allclose([hi, lo], [0.996747, -0.771253], atol=1e-6)
    # a group all alike scores 0 (no epsilon: the authors' "if std > 0")
    assert not np.asarray(sas.init(2).advantages(idx, jnp.ones((1, 4)))).any()


def test_registered_and_refused_under_the_expected_flow():
    assert "dcpo_sas" in T.TRACKERS.names() and T.weights(sas.init(3)) is None
    with pytest.raises(ConfigError, match="algo.tracker: 'dcpo_sas'"):
        ts.resolve({"preset": "dcpo_sas", "train": {"dynamics": "expected"}})
