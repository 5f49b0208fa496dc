"""KL and reference schedules: a KL coefficient that adapts to the measured KL, and a reference policy that is
reset to the online policy every ``N`` steps. Their state is ``TrainState.kl_state`` (None when neither is on:
the reference is then the task's prior and ``beta`` the traced ``Hyper.beta``, as before).

**Adaptive KL** (``algo.kl_schedule = "adaptive"``), verl's ``AdaptiveKLController``
(``verl/trainer/ppo/core_algos.py``, from Ziegler et al., arXiv 1909.08593), as ``apply_kl_penalty`` in
``verl/trainer/ppo/ray_trainer.py`` drives it (both read): the batch is scored with the current ``beta``,
then

    kl_t   = mean over answers of (sum_t kl_t m_t / sum_t m_t)        (the KL estimator on logp_old vs the ref)
    beta  <- beta (1 + clip(kl_t / target - 1, -0.2, 0.2) n / horizon)

with ``n`` the batch's answers (verl's ``batch_size``), ``target = kl_target`` and ``horizon = kl_horizon``
(verl's ``algorithm.kl_ctrl.target_kl`` / ``horizon``, defaults 0.1 and 10000). verl adapts only the KL in
the reward (``algorithm.use_kl_in_reward``); so does tabsim (the config refuses another placement).
``beta`` starts at ``Hyper.beta`` (verl's ``kl_ctrl.kl_coef``).

**Reference syncs** (``algo.ref_reset_every = N``): after updates ``N, 2N, ...`` the reference becomes

    ref <- log_softmax((1 - alpha) ref + alpha z)            (alpha = ref_mixup_alpha)

TRL's ``SyncRefModelCallback`` (``sync_ref_model=True``: at ``global_step % ref_model_sync_steps == 0`` the
reference's parameters are mixed, ``(1 - alpha) ref + alpha theta``, with ``ref_model_mixup_alpha``; read from
its source, the TR-DPO reference update of arXiv 2404.09656), here on the logit tables. ``alpha = 1`` with
``algo.ref_reset_optimizer`` (the default) is ProRL's hard reset (arXiv 2505.24864: the reference is reset
to the online policy and the optimizer's state re-initialised); ProRL resets between its training stages, the
fixed period is tabsim's knob for it. TRL's sync leaves the optimizer as it is (``ref_reset_optimizer =
false``).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from tabsim.sim.pytree import pytree_dataclass

# verl's AdaptiveKLController: the proportional error is clipped to +-0.2
ADAPTIVE_KL_CLIP = 0.2


@pytree_dataclass
class KLState:
    """``ref``: the reference's normalised log table (None: the task's prior); ``beta``: the adaptive KL
    coefficient (None: ``Hyper.beta``)."""

    ref: Any = None
    beta: Any = None


def active(algo) -> bool:
    """Whether ``algo`` carries a KL or reference schedule in the state."""
    return getattr(algo, "kl_schedule", "fixed") != "fixed" or getattr(algo, "ref_reset_every", 0) > 0


def init(algo, task, hp):
    """``TrainState.kl_state`` at the start (None when no schedule is on)."""
    if not active(algo):
        return None
    if algo.kl_schedule == "adaptive" and algo.kl_placement != "reward":
        raise ValueError(f"algo.kl_schedule: 'adaptive' adapts the KL in the reward, and algo.kl_placement is "
                         f"{algo.kl_placement!r}; set algo.kl_placement = 'reward'")
    ref = task.prior_logits if algo.ref_reset_every > 0 else None
    beta = jnp.asarray(hp.beta, jnp.float32) if algo.kl_schedule == "adaptive" else None
    return KLState(ref=ref, beta=beta)


def with_reference(kl_state, task):
    """``task`` with its reference (``prior_logits``, which the rollout reads as the KL's reference) taken from
    the schedule."""
    if kl_state is None or kl_state.ref is None:
        return task
    return dataclasses.replace(task, prior_logits=kl_state.ref)


def hyper(kl_state, hp):
    """``hp`` with the adaptive ``beta`` in place of the traced one."""
    if kl_state is None or kl_state.beta is None:
        return hp
    return dataclasses.replace(hp, beta=kl_state.beta)


def batch_kl(kl_tok, mask):
    """verl's ``current_kl``: the mean over answers of each answer's token-mean KL."""
    per_answer = (kl_tok * mask).sum(-1) / jnp.maximum(mask.sum(-1), 1.0)
    return per_answer.mean()


def adapt(beta, current_kl, n, target, horizon):
    """One step of verl's ``AdaptiveKLController.update``."""
    err = jnp.clip(current_kl / target - 1.0, -ADAPTIVE_KL_CLIP, ADAPTIVE_KL_CLIP)
    return beta * (1.0 + err * n / horizon)


def reset_due(algo, step):
    """Whether the reference resets after update ``step`` (0-based): after updates ``N, 2N, ...``."""
    return (step + 1) % algo.ref_reset_every == 0


def advance(algo, kl_state, kl_tok, mask, logits, step, hp):
    """The schedule after the update of step ``step`` (``logits``: the policy after it): ``(kl_state, reset)``
    with ``reset`` True where the reference was synced and the optimizer's state is to restart (None when
    ``algo.ref_reset_optimizer`` is off or no reference is kept)."""
    if kl_state is None:
        return None, None
    beta, ref, reset = kl_state.beta, kl_state.ref, None
    if beta is not None:
        beta = adapt(beta, batch_kl(kl_tok, mask), kl_tok.shape[0] * kl_tok.shape[1], hp.kl_target, hp.kl_horizon)
    if ref is not None:
        reset = reset_due(algo, step)
        ref = jnp.where(reset, synced(ref, logits, hp.ref_mixup_alpha), ref)
    return KLState(ref=ref, beta=beta), (reset if algo.ref_reset_optimizer else None)


def synced(ref, logits, alpha):
    """TRL's ``SyncRefModelCallback``: the reference's parameters ``(1 - alpha) ref + alpha z``, here the logit
    tables (renormalised: a row's log-softmax is the same for any of its logit vectors' shifts)."""
    return jax.nn.log_softmax((1.0 - alpha) * ref + alpha * logits, axis=-1)
