"""How well an expected update points along the true policy gradient (bandit).

The objective is the mean pass@1 over prompts, ``J(z) = (1/N) sum_p sum_a pi_p(a) c_p(a)`` with
``pi_p = softmax(z_p)`` and ``c_p(a)`` 1 for a correct answer. Its gradient in the logits is exact:

    dJ/dz_{p,a} = (1/N) pi_p(a) (c_p(a) - J_p),       J_p = sum_a pi_p(a) c_p(a).

Given the exact expected change of the table after one step, ``delta = E[z'] - z``
(:func:`tabsim.sim.expected.expected_update` minus ``z``), :func:`direction` reports

* ``cosine``: ``<delta, g> / (|delta| |g|)`` over the whole table, 1 for an update along ``g`` (an unbiased
  estimator of ``g`` times a positive step); below 1 when the rule weights the prompts differently from
  ``J`` or moves the answers within a prompt off ``g_p``;
* per prompt, ``scale_p = <delta_p, g_p> / |g_p|^2`` (the step the rule takes along the prompt's own
  gradient) and ``cosine_p``. With a reward that treats every correct answer alike, each prompt's expected
  update is a multiple of ``g_p`` (the advantage's expectation given the answer is ``alpha r + beta``, and
  ``beta`` cancels against the softmax's baseline), so ``cosine_p`` is 1 and a rule's bias shows only in how
  ``scale_p`` varies over prompts: the per-prompt std's ``1 / sigma_p`` reweighting (GRPO, arXiv 2402.03300)
  against a batch-wide scale (REINFORCE++, arXiv 2501.03262) or none (RLOO, Dr. GRPO).

The formula of ``g`` is checked in the tests against finite differences of ``J``; prompts whose gradient is
zero (a policy with all or none of its mass on correct answers) carry no direction and are left out of the
per-prompt numbers.

:func:`grad_cosine` is the same whole-table ``cosine`` in JAX: the expected flow records it at every step as the
optional metric ``grad_cosine`` (``train.metrics``, ``train.dynamics = 'expected'`` only), averaged over the steps
of each evaluation interval like the update's diagnostics (NaN at step 0, and for an arm that does not move).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

# a prompt whose |g_p| is below this has no direction to compare (all or none of its mass on correct answers)
MIN_NORM = 1e-12


def policy_gradient(logits, correct) -> np.ndarray:
    """``dJ/dz`` of the mean pass@1 over prompts, ``[N, K]``, in float64."""
    z = np.asarray(logits, np.float64)
    c = np.asarray(correct, np.float64)
    pi = np.exp(z - z.max(-1, keepdims=True))
    pi /= pi.sum(-1, keepdims=True)
    j = (pi * c).sum(-1, keepdims=True)
    return pi * (c - j) / z.shape[0]


def direction(delta, logits, correct) -> dict:
    """The cosine of ``delta`` with the true gradient, and each prompt's scale and cosine along its own.

    ``delta``: the expected change of the table after one step, ``[N, K]``. Returns ``cosine`` (float),
    ``scale`` and ``cosine_p`` (``[N]``, NaN where the prompt's gradient is zero) and ``scale_spread``, the
    largest over the smallest positive ``scale`` (1 when the rule weights every prompt alike).
    """
    d = np.asarray(delta, np.float64)
    g = policy_gradient(logits, correct)
    if d.shape != g.shape:
        raise ValueError(f"delta: shape {d.shape} differs from the table's {g.shape}")
    norm = np.linalg.norm(d) * np.linalg.norm(g)
    cosine = float((d * g).sum() / norm) if norm > 0 else float("nan")
    gg = (g * g).sum(-1)
    live = np.sqrt(gg) > MIN_NORM
    dg = (d * g).sum(-1)
    scale = np.where(live, dg / np.where(live, gg, 1.0), np.nan)
    dn = np.linalg.norm(d, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        cosine_p = np.where(live & (dn > 0), dg / (dn * np.sqrt(gg)), np.nan)
    pos = scale[np.isfinite(scale) & (scale > 0)]
    spread = float(pos.max() / pos.min()) if pos.size else float("nan")
    return {"cosine": cosine, "scale": scale, "cosine_p": cosine_p, "scale_spread": spread}


def grad_cosine(delta, logits, correct):
    """``cosine`` of :func:`direction` in JAX (the flow's precision): ``<delta, g> / (|delta| |g|)``, NaN where
    either is zero. ``delta``, ``logits``, ``correct``: ``[N, K]``."""
    pi = jax.nn.softmax(logits, axis=-1)
    g = pi * (correct - (pi * correct).sum(-1, keepdims=True))  # dJ/dz times N (the cosine ignores the scale)
    norm = jnp.sqrt((delta * delta).sum()) * jnp.sqrt((g * g).sum())
    return jnp.where(norm > 0, (delta * g).sum() / jnp.where(norm > 0, norm, 1.0), jnp.nan)
