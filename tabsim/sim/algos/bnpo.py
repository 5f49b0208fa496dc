"""BNPO's estimator (Beta Normalization Policy Optimization, arXiv 2506.02864): the group-mean baseline over a Beta
density fitted to the batch's group means.

``p_x`` is group ``x``'s mean reward; over the batch's kept groups (``valid``) the mean ``m`` and the unbiased
variance ``v`` of the ``p_x`` give ``a = (m (1 - m) / v - 1) m``, ``b = (m (1 - m) / v - 1) (1 - m)`` and
``alpha = max(1 + a / 3, 1)``, ``beta = max(1 + b / 3, 1)``; then

    A_i = min(1 / Beta(alpha, beta).pdf(p_x), 1e6) (r_i - p_x)

Checked against the authors' released trainer (``changyi7231/BNPO``, ``recipe/bnpo/src/bnpo_ray_trainer.py``,
``compute_bnpo_outcome_advantage``): the same moments (``torch.var``: unbiased), the ``1 + a/3`` parameters clamped
at 1, the density's reciprocal clamped to ``[0, 1e6]``, rewards taken as they are (their affine map to ``[0, 1]``
with its defaults 0 and 1) and, for a batch of one group, ``m = 0``, ``v = 1``. The paper's tracked-distribution
reading (a per-prompt Beta updated across steps) is not what the released code does: its Beta is refitted to each
batch, so nothing is carried between steps. Where the group means do not vary (``v = 0``; the authors' code gives
NaN) the density is the uniform one (``alpha = beta = 1``, ``A = r - p_x``), as their code has it for a batch of
one group. Not built: the advantage decomposition
for several reward terms.
"""
from __future__ import annotations

import jax.numpy as jnp
from jax.scipy.stats import beta as beta_dist

from tabsim.sim.algos.advantages import register_estimator

MAX_WEIGHT = 1e6  # the authors' clamp of 1 / density


@register_estimator("bnpo", batch_level=True,
                    no_expected="its normaliser is fitted to the moments of every kept group's mean reward in the "
                                "batch, a batch total the exact flow does not enumerate")
def bnpo(rewards, *, lengths, valid, hp):
    """``A = min(1 / Beta(alpha, beta).pdf(p_x), 1e6) (r - p_x)``, ``alpha, beta`` from the batch's group means."""
    p = rewards.mean(-1)
    w = valid.astype(rewards.dtype)
    n = w.sum()
    m = jnp.where(n > 1, (w * p).sum() / jnp.maximum(n, 1.0), 0.0)
    v = jnp.where(n > 1, (w * (p - m) ** 2).sum() / jnp.maximum(n - 1.0, 1.0), 1.0)
    k = jnp.where(v > 0, m * (1.0 - m) / jnp.where(v > 0, v, 1.0) - 1.0, 0.0)  # v = 0: alpha = beta = 1
    alpha = jnp.maximum(1.0 + k * m / 3.0, 1.0)
    beta = jnp.maximum(1.0 + k * (1.0 - m) / 3.0, 1.0)
    weight = jnp.minimum(1.0 / beta_dist.pdf(p, alpha, beta), MAX_WEIGHT)
    return weight[:, None] * (rewards - p[:, None])
