"""DCPO's smooth advantage standardization across steps (``algo.tracker = "dcpo_sas"``).

DCPO (Dynamic Clipping Policy Optimization, arXiv 2509.02333). Each prompt ``x`` carries the mean ``mu_x``, the
standard deviation ``sigma_x`` and the count ``k_x - 1`` of its earlier groups' rewards. At its ``k``-th group, with
the group's mean ``m`` and Bessel standard deviation ``s``, the cumulative statistics are

    mu = m,  sigma = s                                                  (k = 1)
    mu = ((k - 1) mu_x + m) / k,
    sigma^2 = ((k - 1) sigma_x^2 + s^2 + (k - 1) / k (m - mu_x)^2) / k   (k > 1),

each answer's two z-scores are ``z_new = (r - m) / s`` and ``z_old = (r - mu) / sigma`` (0 where the deviation is 0),
their two blends ``a1 = z_old / k + (1 - 1/k) z_new`` and ``a2 = z_new / k + (1 - 1/k) z_old``, and the advantage is
the one of smaller magnitude, ``A = a1 if |a1| < |a2| else a2``. After the step the prompt keeps ``mu``, ``sigma``
and ``k``.

Checked against the authors' released code (``lime-RL/DCPO``, ``verl/trainer/ppo/core_algos.py``:
``compute_dcpo_outcome_advantage`` and ``get_mean_std``; ``verl/trainer/ppo/ray_trainer.py`` ``compute_advantage``,
which adds 1 to ``times``; ``recipe/dcpo/src/dcpo_ray_trainer.py``, which keeps each prompt's ``mean``, ``std`` and
``times`` between steps; ``verl/utils/dataset/rl_dataset.py``, which starts them at 0): ``torch.std`` (Bessel), no
epsilon, a zero deviation giving a zero z-score, the blend weights ``1 / (times + 1)``, and their
``user_old_mean_ratio`` left at 1. Their trainer keeps the statistics only with ``reward_model.use_old_mean.enable``
(``USE_OLD_MEAN_ENABLE``, off unless set: their released ``run_dcpo.sh`` does not set it, and each step then starts
from ``times = 0``: the plain z-score); this tracker is the rule with it on. A prompt drawn twice in one batch
(``train.replacement``) keeps one of its groups' statistics. ``train.dynamics = "expected"`` refuses it (state
carried between steps).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from tabsim.sim.pytree import pytree_dataclass


@pytree_dataclass
class SasState:
    """Per-prompt cumulative reward mean, standard deviation and group count ``[N]``."""

    mean: jax.Array
    std: jax.Array
    times: jax.Array

    def statistics(self, idx, rewards):
        """``(mu, sigma, k, m, s)`` ``[B]``: the cumulative statistics after this step's groups ``rewards [B, G]``,
        the count ``k`` including them, and the groups' own mean and Bessel standard deviation."""
        m = rewards.mean(-1)
        s = jnp.sqrt(((rewards - m[:, None]) ** 2).sum(-1) / (rewards.shape[-1] - 1))
        before, old_mean, old_std = self.times[idx], self.mean[idx], self.std[idx]
        k = before + 1.0
        mean = jnp.where(before == 0, m, (old_mean * before + m) / k)
        var = (before * old_std ** 2 + s ** 2 + before / k * (m - old_mean) ** 2) / k
        return mean, jnp.where(before == 0, s, jnp.sqrt(var)), k, m, s

    def advantages(self, idx, rewards, rollout=None):
        """``[B, G]`` the smaller-magnitude blend of the step's and the cumulative z-scores."""
        mean, std, k, m, s = self.statistics(idx, rewards)
        z_new = zscore(rewards, m, s)
        z_old = zscore(rewards, mean, std)
        w = (1.0 / k)[:, None]
        a1 = w * z_old + (1.0 - w) * z_new
        a2 = w * z_new + (1.0 - w) * z_old
        return jnp.where(jnp.abs(a1) < jnp.abs(a2), a1, a2)

    def advance(self, idx, rewards, rollout=None, hp=None):
        """The state after the step: the batch's prompts keep their cumulative statistics and count."""
        mean, std, k, _, _ = self.statistics(idx, rewards)
        return SasState(mean=self.mean.at[idx].set(mean), std=self.std.at[idx].set(std),
                        times=self.times.at[idx].set(k))


def zscore(rewards, mean, std):
    """``(r - mean) / std`` per group, 0 where ``std`` is 0 (the authors' ``if std > 0``)."""
    ok = std > 0
    return jnp.where(ok[:, None], (rewards - mean[:, None]) / jnp.where(ok, std, 1.0)[:, None], 0.0)


def init(n_prompts: int, dtype=jnp.float32) -> SasState:
    """Every prompt unseen: mean, std and count 0 (the authors' dataset columns)."""
    zero = jnp.zeros((n_prompts,), dtype)
    return SasState(mean=zero, std=zero, times=zero)
