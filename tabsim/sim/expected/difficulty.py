"""How an expected update weighs each prompt against the prompt's success rate (bandit): its difficulty tilt.

Each prompt's step along its own gradient of pass@1 is ``scale_p = <delta_p, g_p> / |g_p|^2`` with
``g_p = pi_p (c_p - p_p) / N`` (:func:`tabsim.sim.expected.direction.direction`'s ``scale``; ``p_p`` the prompt's
pass@1). With a 0/1 reward that treats every correct answer alike each prompt's expected update is a multiple of
``g_p``, so a rule's weighting of the prompts is ``scale_p`` as a function of ``p_p``. The *difficulty tilt* is the
exponent ``beta`` of ``scale_p ~ (p_p (1 - p_p))^beta``: the least-squares slope of ``log scale_p`` on
``log(p_p (1 - p_p))`` over the prompts whose gradient and step are positive.

Against the gradient of the mean pass@1 an unbiased rule has ``beta = 0`` (RLOO's expected update is that gradient
times a constant). Against DisCO's discriminative score (Li et al., arXiv 2505.12366: per question
``E_{o+}[s] - E_{o-}[s]``; with ``s = log pi`` and one-token answers its gradient is ``h_p = pi_p c_p / p_p -
pi_p (1 - c_p) / (1 - p_p) = g_p N / (p_p (1 - p_p))``) the reference tilt is ``-1``, so a rule's tilt against that
score is ``beta + 1``. Checked by hand (not read from the paper, whose body the stored copies do not hold): GRPO's
z-score has, in the limit of large groups, ``E[A grad log pi] = g_p N / sigma_p`` (``beta = -1/2``; ``sqrt(p (1 -
p))`` against DisCO's score, the weight DisCO's abstract calls a question-level difficulty bias); DisCO-b's
``+-G / n+-`` (the ``disco_b`` estimator) has ``G P(mixed) h_p`` (``beta = -1`` where every group is mixed). The
tests compare :func:`difficulty_tilt` with a NumPy least-squares fit and these limits with the exact flow.

:func:`difficulty_tilt` is recorded by the expected flow as the optional metric ``difficulty_tilt``
(``train.metrics``, ``train.dynamics = 'expected'`` only), averaged over each evaluation interval like
``grad_cosine`` (NaN at step 0, for an arm that does not move, and with fewer than two live prompts of distinct
success rates).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from tabsim.sim.expected.direction import MIN_NORM


def prompt_scale(delta, logits, correct):
    """``(scale [N], p [N])``: each prompt's step along its pass@1 gradient (NaN where that gradient is zero, as
    :func:`~tabsim.sim.expected.direction.direction`'s ``scale``) and its pass@1. ``[N, K]`` inputs."""
    pi = jax.nn.softmax(logits, axis=-1)
    p = (pi * correct).sum(-1)
    g = pi * (correct - p[:, None]) / logits.shape[0]
    gg = (g * g).sum(-1)
    live = jnp.sqrt(gg) > MIN_NORM
    return jnp.where(live, (delta * g).sum(-1) / jnp.where(live, gg, 1.0), jnp.nan), p


def difficulty_tilt(delta, logits, correct):
    """The least-squares slope of ``log scale_p`` on ``log(p_p (1 - p_p))`` over the prompts with a positive step
    and ``0 < p_p < 1`` (NaN with fewer than two such prompts or one success rate). ``[N, K]`` inputs."""
    scale, p = prompt_scale(delta, logits, correct)
    q = p * (1.0 - p)
    ok = jnp.isfinite(scale) & (scale > 0) & (q > 0)
    w = ok.astype(scale.dtype)
    n = w.sum()
    x = jnp.log(jnp.where(ok, q, 1.0))
    y = jnp.log(jnp.where(ok, scale, 1.0))
    mx, my = (w * x).sum() / jnp.maximum(n, 1.0), (w * y).sum() / jnp.maximum(n, 1.0)
    sxx, sxy = (w * (x - mx) ** 2).sum(), (w * (x - mx) * (y - my)).sum()
    good = (n >= 2) & (sxx > 1e-8 * n)  # one success rate: x - mean x is rounding alone
    return jnp.where(good, sxy / jnp.where(good, sxx, 1.0), jnp.nan)
