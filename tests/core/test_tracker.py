"""Per-prompt trackers (tabsim.sim.tracker): SPO's Beta value tracker against a NumPy reference written from the
authors' released trainer (verl-recipe spo), its prompt weights and weighted draws, and the config's refusals."""
from __future__ import annotations

import numpy as np
import pytest

from tabsim.base import choices
from tabsim.config import ConfigError, resolve
from tabsim.sim import tracker as T


def spo_reference(alpha, beta, idx, rewards, rho):
    """The authors' SPO step, one answer per copy of a prompt: p = alpha / (alpha + beta); A = r - p, then
    (A - mean) / (std + 1e-8) over the batch (torch's Bessel std); alpha <- rho alpha + r, beta <- rho beta + 1 - r
    per copy, each from the same alpha, beta, the last copy written staying."""
    alpha, beta = np.array(alpha, float), np.array(beta, float)
    prompts = np.repeat(idx, rewards.shape[1])  # G copies of each prompt, in order
    r = rewards.reshape(-1)
    a = r - alpha[prompts] / (alpha[prompts] + beta[prompts])
    adv = (a - a.mean()) / (a.std(ddof=1) + 1e-8)
    new_a, new_b = alpha[prompts] * rho + r, beta[prompts] * rho + (1 - r)
    for i, p in enumerate(prompts):
        alpha[p], beta[p] = new_a[i], new_b[i]
    return adv.reshape(rewards.shape), alpha, beta


def test_registry_is_the_config_list():
    assert T.TRACKERS.names() == choices.TRACKERS
    assert "state carried" in T.TRACKERS.meta("spo_stream")["no_expected"]


def test_spo_advantages_and_update_against_the_authors_step():
    import jax.numpy as jnp
    tr = T.spo_stream(5)
    np.testing.assert_array_equal(tr.alpha, 0.5)
    idx = np.array([3, 0, 4])
    rewards = np.array([[1, 0], [0, 0], [1, 1]], np.float32)
    adv = np.asarray(T.advantages(tr, jnp.asarray(idx), jnp.asarray(rewards)))
    # by hand: p = 1/2 everywhere, A = r - 1/2 = +-1/2 (mean 0), Bessel std sqrt(6 / 4 / 5) = sqrt(0.3)
    np.testing.assert_allclose(adv, (rewards - 0.5) / (np.sqrt(0.3) + 1e-8), rtol=1e-6)
    new = T.advance(tr, jnp.asarray(idx), jnp.asarray(rewards), 0.875)
    # the group's last answer: prompt 3 gets r = 0, prompt 0 r = 0, prompt 4 r = 1; prompts 1, 2 untouched
    np.testing.assert_allclose(new.alpha, [0.4375, 0.5, 0.5, 0.4375, 1.4375])
    np.testing.assert_allclose(new.beta, [1.4375, 0.5, 0.5, 1.4375, 0.4375])
    want_adv, want_a, want_b = spo_reference(tr.alpha, tr.beta, idx, rewards, 0.875)
    np.testing.assert_allclose(adv, want_adv, rtol=1e-6)
    np.testing.assert_allclose(new.alpha, want_a, rtol=1e-6)
    np.testing.assert_allclose(new.beta, want_b, rtol=1e-6)
    # a second step reads the updated values: prompt 4's p = 1.4375 / 1.875
    adv2 = np.asarray(T.advantages(new, jnp.asarray([4, 1]), jnp.asarray([[1.0, 1.0], [0.0, 1.0]])))
    want2, _, _ = spo_reference(new.alpha, new.beta, np.array([4, 1]), np.array([[1.0, 1.0], [0.0, 1.0]]), 0.875)
    np.testing.assert_allclose(adv2, want2, rtol=1e-5)


def test_prompt_weights_and_draws():
    import jax
    import jax.numpy as jnp
    tr = T.BetaTracker(alpha=jnp.asarray([0.5, 9.0, 1.0]), beta=jnp.asarray([0.5, 1.0, 3.0]))
    np.testing.assert_allclose(T.weights(tr), np.sqrt([0.25, 0.09, 0.1875]) + 0.05, rtol=1e-6)
    assert T.weights(None) is None
    u = jax.random.uniform(jax.random.PRNGKey(0), (7,))
    # equal weights: the uniform draw without replacement, prompt for prompt
    np.testing.assert_array_equal(T.weighted_draw(u, jnp.ones(7), 3, False), jax.lax.top_k(u, 3)[1])
    # frequencies proportional to the weights, both ways (4 standard errors of a binomial share)
    w = jnp.asarray([1.0, 2.0, 3.0, 4.0])
    M = 20000
    U = jax.random.uniform(jax.random.PRNGKey(1), (M, 4))
    first = np.asarray(T.weighted_draw(U, w, 1, False))[:, 0]  # a row of uniforms a draw
    drawn = np.asarray(T.weighted_draw(U[:, 0], w, M, True))
    p = np.asarray(w) / 10
    for got in (first, drawn):
        share = np.bincount(got, minlength=4) / M
        assert np.all(np.abs(share - p) < 4 * np.sqrt(p * (1 - p) / M)), share


def test_tracker_refusals_and_a_config_without_one_written_as_before():
    for cfg, msg in (({"algo": {"tracker": "spo_stream", "estimator": "rloo"}},
                      r"algo.tracker: 'spo_stream' gives the advantages itself.*'rloo'"),
                     ({"algo": {"tracker": "spo_stream"}, "train": {"dynamics": "expected"}},
                      r"algo.tracker: 'spo_stream' carries per-prompt state"),
                     ({"algo": {"tracker": "spo"}}, r"unknown tracker 'spo'")):
        with pytest.raises(ConfigError, match=msg) as err:
            resolve(cfg)
        assert len(str(err.value).strip().splitlines()) == 2, str(err.value)
    plain = resolve({}).model_dump()["algo"]
    assert "tracker" not in plain and "tracker_rho" not in plain
    spo = resolve({"preset": "spo_stream"})
    assert spo.model_dump()["algo"]["tracker"] == "spo_stream" and spo.train.group_size == 2


@pytest.mark.heavy  # eager: one-off op compiles (the presets' smoke test steps the spo_stream preset in the suite)
def test_one_step_carries_the_tracker():
    from eager_step import eager_step

    cfg = resolve({"preset": "spo_stream", "task": {"n_prompts": 6, "n_answers": 4, "n_correct": 1},
                   "train": {"steps": 1, "batch_size": 3, "seeds": 1}, "arms": {"arms": ["frozen", "true"]}})
    env, h, task, state, after, _ = eager_step(cfg)
    visited = np.flatnonzero(np.asarray(after.tracker.alpha + after.tracker.beta) != 1.0)
    assert len(visited) == 3  # the batch's three prompts, each alpha + beta = 0.875 + 1
    np.testing.assert_allclose(np.asarray(after.tracker.alpha + after.tracker.beta)[visited], 1.875)
