"""Per-prompt trackers carried in the training state (``TrainState.tracker``), chosen by ``algo.tracker``.

``spo_stream``: the value tracker of SPO (Single-stream Policy Optimization, arXiv 2509.13232; the name ``spo`` is
Simple Policy Optimization's surrogate). Each prompt ``x`` keeps a Beta posterior ``(alpha_x, beta_x)`` of its
success rate, ``p_x = alpha_x / (alpha_x + beta_x)``;

* the baseline replaces the group's: ``A_i = r_i - p_x`` with the tracker's value before the step, then normalised
  over every answer of the batch, ``A <- (A - mean_batch A) / (std_batch A + 1e-8)`` (Bessel std);
* after the step, ``alpha_x <- rho alpha_x + r`` and ``beta_x <- rho beta_x + (1 - r)`` (``rho``:
  ``algo.tracker_rho``, traced);
* prompts are drawn with probability proportional to ``sqrt(p_x (1 - p_x)) + 0.05`` (without replacement:
  Gumbel top-k, the successive weighted draws of ``numpy.random.choice(replace=False, p=...)``; with
  replacement: independent draws); with equal weights the draw without replacement is the uniform one, prompt for
  prompt;
* every prompt starts at ``alpha = beta = 0.5``.

Checked against the authors' released trainer (``verl-project/verl-recipe``, ``spo/spo_ray_trainer.py`` and
``spo/config/spo_trainer.yaml``): the baseline ``r - alpha / (alpha + beta)``, the batch normalisation with
``advantages.std() + 1e-8``, the update ``rho alpha + r``, ``rho beta + (1 - r)``, the weights
``sqrt(p (1 - p)) + 0.05`` (``EXPLORATION_EPSILON``), the start ``0.5, 0.5`` when no offline estimate is given
(``offline_N = 0``) and ``rho`` 0.875 (``rho.type: constant``, ``rho.value``). Not built: the KL-adaptive
``rho = clip(2^(-D / 0.06), 0.875, 0.96)`` (``D`` the mean absolute log-ratio of the prompt's last response
between the policy that drew it and the current one; it needs each prompt's last response stored) and the start
from offline samples. SPO is single-stream (one answer per prompt); tabsim's groups hold ``G >= 2`` answers of a
prompt, all with the same ``p_x``, and the tracker takes the group's last answer's reward, which is what the
authors' trainer does with repeated copies of a prompt in a batch (each copy's update is computed from the same
``alpha, beta``, and the last one written stays). A prompt drawn twice in one batch (``train.replacement``) keeps
one of its groups' updates. ``train.dynamics = "expected"`` refuses a tracker (it is state carried between steps).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from tabsim.base import choices
from tabsim.base.registry import Registry
from tabsim.sim import critic, sas
from tabsim.sim.pytree import pytree_dataclass

TRACKERS = Registry("tracker", builtin=choices.TRACKERS)

EXPLORATION = 0.05  # SPO's sampling weight floor (the authors' EXPLORATION_EPSILON)
ADV_EPS = 1e-8  # SPO's batch normalisation: (A - mean) / (std + 1e-8)


@pytree_dataclass
class BetaTracker:
    """Per-prompt Beta posteriors of the success rate: ``alpha``, ``beta`` ``[N]``."""

    alpha: jax.Array
    beta: jax.Array

    def value(self):
        return self.alpha / (self.alpha + self.beta)


@TRACKERS.register("spo_stream", no_expected="its Beta posteriors are state carried from step to step")
def spo_stream(n_prompts: int, dtype=jnp.float32) -> BetaTracker:
    """SPO's start: ``alpha = beta = 0.5`` for every prompt."""
    half = jnp.full((n_prompts,), 0.5, dtype)
    return BetaTracker(alpha=half, beta=half)


@TRACKERS.register("value", no_expected="its state values are learned from the sampled returns, step to step",
                   per_state=True)
def value(n_prompts: int, n_nodes: int = 1) -> critic.ValueTable:
    """PPO's critic as a table (:mod:`tabsim.sim.critic`): every state's value 0 at the start."""
    return critic.init(n_prompts, n_nodes)


@TRACKERS.register("dcpo_sas", no_expected="its per-prompt reward statistics are state carried from step to step")
def dcpo_sas(n_prompts: int) -> sas.SasState:
    """DCPO's smooth advantage standardization (:mod:`tabsim.sim.sas`): every prompt unseen."""
    return sas.init(n_prompts)


def init(algo, env):
    """The tracker ``algo.tracker`` names at the start of training (None: no tracker)."""
    name = getattr(algo, "tracker", "none")
    if name != "none" and TRACKERS.meta(name).get("per_state", False):  # one entry per (prompt, node)
        return TRACKERS[name](env.n_prompts, getattr(env, "n_nodes", 1))
    return None if name == "none" else TRACKERS[name](env.n_prompts)


def weights(tracker):
    """``[N]`` prompt sampling weights ``sqrt(p (1 - p)) + 0.05`` (None without a tracker)."""
    if not isinstance(tracker, BetaTracker):  # none, or a tracker that does not weight the draw (critic, SAS)
        return None
    p = tracker.value()
    return jnp.sqrt(p * (1.0 - p)) + EXPLORATION


def advantages(tracker, idx, rewards, rollout=None):
    """``[B, G]`` SPO's advantages: ``r - p_x``, normalised over every answer of the batch (Bessel std); another
    tracker's own (the critic's, :func:`tabsim.sim.critic.advantages`, reading the ``rollout``'s states; DCPO's SAS,
    :mod:`tabsim.sim.sas`)."""
    if not isinstance(tracker, BetaTracker):  # a tracker that computes its own (the critic, DCPO's SAS)
        return tracker.advantages(idx, rewards, rollout)
    a = rewards - tracker.value()[idx][:, None]
    mean = a.mean()
    std = jnp.sqrt(((a - mean) ** 2).sum() / (a.size - 1))
    return (a - mean) / (std + ADV_EPS)


def advance(tracker, idx, rewards, rho, rollout=None, hp=None):
    """The tracker after the step: ``alpha <- rho alpha + r``, ``beta <- rho beta + (1 - r)`` at the batch's prompts,
    ``r`` the reward of each group's last answer (see the module's docstring); a value table's states moved toward
    their returns (:func:`tabsim.sim.critic.advance`, step ``hp.value_lr``); DCPO's SAS statistics extended
    (:mod:`tabsim.sim.sas`)."""
    if tracker is None:
        return None
    if not isinstance(tracker, BetaTracker):  # a tracker that advances itself (the critic, DCPO's SAS)
        return tracker.advance(idx, rewards, rollout, hp)
    r = rewards[:, -1]
    alpha = tracker.alpha.at[idx].set(rho * tracker.alpha[idx] + r)
    beta = tracker.beta.at[idx].set(rho * tracker.beta[idx] + (1.0 - r))
    return BetaTracker(alpha=alpha, beta=beta)


def weighted_draw(u, w, B: int, replacement: bool):
    """``[B]`` prompts drawn with probability proportional to ``w [N]`` from the uniforms ``u`` (``[N]`` without
    replacement: the top ``B`` of ``log w + Gumbel(u)``; ``[B]`` with replacement: inverse CDF)."""
    if replacement:
        cdf = jnp.cumsum(w) / w.sum()
        return jnp.minimum(jnp.searchsorted(cdf, u, side="right"), w.shape[0] - 1).astype(jnp.int32)
    gumbel = -jnp.log(-jnp.log(u))  # increasing in u (u = 0, 1: -inf, inf): equal weights keep the uniform draw
    return jax.lax.top_k(jnp.log(w) + gumbel, B)[1]
