"""The expected flow's optional metric difficulty_tilt: the exponent of each prompt's step along its own pass@1 gradient
against p (1 - p), its success rate's variance.

JAX against a NumPy least-squares fit of direction()'s per-prompt scale (fast); hand cases with a known exponent and
the NaN cases; the config's one-line refusal under sampled dynamics; with -m heavy, the flow's recorded values of
RLOO (0), GRPO (about -1/2) and DisCO-b (about -1) on two-answer prompts with large groups.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tabsim.base.precision import scope
from tabsim.config import ConfigError, resolve
from tabsim.sim.expected.difficulty import difficulty_tilt, prompt_scale
from tabsim.sim.expected.direction import direction, policy_gradient

TILT = jax.jit(difficulty_tilt)  # one small program a shape (eager JAX compiles every operation)


def _np_tilt(delta, logits, correct):
    """The reference: direction()'s scale and NumPy's pass@1, fitted with np.polyfit on the live prompts."""
    scale = direction(delta, logits, correct)["scale"]
    pi = np.exp(logits - logits.max(-1, keepdims=True))
    pi /= pi.sum(-1, keepdims=True)
    p = (pi * correct).sum(-1)
    ok = np.isfinite(scale) & (scale > 0) & (p > 0) & (p < 1)
    return float(np.polyfit(np.log(p[ok] * (1 - p[ok])), np.log(scale[ok]), 1)[0])


def test_tilt_is_the_least_squares_fit_of_directions_scale():
    with scope("float64"):
        rng = np.random.default_rng(11)
        z, c = rng.normal(0, 1.5, (12, 5)), np.zeros((12, 5))
        c[:, :2] = 1.0
        delta = policy_gradient(z, c) * rng.uniform(0.5, 3.0, (12, 1)) + rng.normal(0, 1e-3, (12, 5))
        got = float(TILT(jnp.asarray(delta), jnp.asarray(z), jnp.asarray(c)))
        assert got == pytest.approx(_np_tilt(delta, z, c), abs=1e-9)
        scale, p = jax.jit(prompt_scale)(jnp.asarray(delta), jnp.asarray(z), jnp.asarray(c))
        np.testing.assert_allclose(np.asarray(scale), direction(delta, z, c)["scale"], rtol=1e-9)


@pytest.mark.parametrize("beta", [0.0, -0.5, -1.0, 0.5])
def test_a_step_of_known_exponent_has_that_tilt(beta):
    """delta_p = (p (1 - p))^beta g_p: the tilt is beta exactly (float32: to 1e-4); two answers, one correct."""
    p = np.array([0.1, 0.25, 0.5, 0.7, 0.95])
    z = np.stack([np.log(p), np.log(1 - p)], -1)
    c = np.tile([1.0, 0.0], (5, 1))
    delta = policy_gradient(z, c) * (p * (1 - p))[:, None] ** beta * 7.0
    got = float(TILT(jnp.asarray(delta, jnp.float32), jnp.asarray(z, jnp.float32), jnp.asarray(c)))
    assert got == pytest.approx(beta, abs=1e-4)


def test_no_tilt_without_two_success_rates_or_a_step():
    z, c = np.zeros((3, 2), np.float32), np.tile(np.float32([1.0, 0.0]), (3, 1))  # every prompt at p = 1/2
    g = policy_gradient(z, c).astype(np.float32)
    assert math.isnan(float(TILT(g, z, c)))
    z2 = np.float32([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0]])
    assert math.isnan(float(TILT(np.zeros((3, 2), np.float32), z2, c)))  # an arm that does not move


def test_difficulty_tilt_only_under_the_expected_flow():
    cfg = {"preset": "grpo", "algo": {"kl_placement": "none", "beta": 0.0}, "arms": {"arms": ["true"]},
           "train": {"steps": 1, "metrics": ["pass1", "difficulty_tilt"]}}
    assert resolve({**cfg, "train": {**cfg["train"], "dynamics": "expected"}}).train.metrics[-1] == "difficulty_tilt"
    with pytest.raises(ConfigError) as e:
        resolve(cfg)
    line = str(e.value).splitlines()[-1].strip()
    assert line.startswith("train.metrics: 'difficulty_tilt' is recorded by the exact expected flow only")


@pytest.mark.heavy  # three compiled flows (about 30 s)
def test_flow_records_the_tilts_of_rloo_grpo_and_disco_b():
    """Two answers (one correct), G = 64 (almost every group mixed), prompts p ~ Beta(2, 2): RLOO's expected step
    is the pass@1 gradient (tilt 0); GRPO's z-score about 1 / sqrt(p (1 - p)) times it, DisCO-b's about
    1 / (p (1 - p)) times it (arXiv 2505.12366's weights read against the gradient of mean pass@1)."""
    import tabsim as ts

    raw = {"preset": "grpo", "task": {"n_answers": 2, "n_correct": 1, "format_boost": 0.0, "heterogeneity": 4.0,
                                      "prior_strength": 0.5},
           "algo": {"kl_placement": "none", "beta": 0.0, "surrogate": "reinforce"}, "arms": {"arms": ["true"]},
           "train": {"steps": 1, "seed": 98100, "seeds": 2, "group_size": 64, "dynamics": "expected",
                     "metrics": ["pass1", "difficulty_tilt"]}}
    tilt = {}
    for est in ("rloo", "grpo", "disco_b"):
        fin = ts.run({**raw, "algo": {**raw["algo"], "estimator": est}}, progress=False).final()
        tilt[est] = fin["difficulty_tilt"].to_numpy()
    np.testing.assert_allclose(tilt["rloo"], 0.0, atol=1e-3)
    assert ((tilt["grpo"] < -0.35) & (tilt["grpo"] > -0.6)).all(), tilt
    assert ((tilt["disco_b"] < -0.8) & (tilt["disco_b"] > -1.1)).all(), tilt
