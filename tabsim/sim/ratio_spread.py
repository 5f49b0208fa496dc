"""The optional metric ``log_ratio_range``: the spread of the token importance ratios an update step sees.

GMPO (Zhao et al., arXiv 2507.20673) claims that its geometric mean "maintains a more stable range of importance
sampling ratio" than GRPO's arithmetic mean (abstract; Figure 1 plots the range of the token ratio
``rho_t = pi_theta(o_t | s_t) / pi_old(o_t | s_t)`` per training step). Their released trainer (callsys/GMPO at
205b2bf, ``train_zero_math_gmpo.py``, read for this) logs, for GRPO and GMPO alike, at every minibatch's forward
pass the largest and the smallest token log-ratio ``new_logps - old_logps`` over the response tokens (the mask
multiplied in, so a padded position counts as 0), and per training step the largest of the maxima and the
smallest of the minima (``logprobs_diff_max`` / ``logprobs_diff_min``). Here, per step,

    log_ratio_range = max(0, max_{u, i, t} l_{u,i,t}) - min(0, min_{u, i, t} l_{u,i,t}),
    l_{u,i,t} = log pi_{theta_u}(o_{i,t} | s_{i,t}) - logp_old_{i,t},

over the sampled tokens (the rollout's mask: a filtered group's tokens too, as the authors' response mask) of
the step's ``epochs x minibatches`` updates ``u``, each at the parameters
``theta_u`` it differentiates at (before its optimizer step), ``logp_old`` the rollout log-probabilities the loss
reads (the behaviour sampler's under ``algo.behaviour_old = behaviour``). The 0 in both bounds is the authors'
masked extremes (and their first minibatch is on-policy: every ratio 1). It is the token ratio whatever
``algo.ratio`` the surrogate reads (the authors log the token ratio for GRPO and GMPO alike), so the runs of two
ratios are compared on one scale. The engine averages it over the steps of each evaluation interval, as it does
``clip_frac``.

Recorded only when ``train.metrics`` names it (no existing program changes); the exact expected flow does not
record it (its update is no sampled step).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from tabsim.sim.algos import take_logp
from tabsim.sim.envs.base import wanted
from tabsim.sim.ops import log_softmax_last

NAME = "log_ratio_range"
KEYS = ("log_ratio_max", "log_ratio_min")  # per update, in the update's diagnostics


def recorded(env) -> bool:
    """Whether the run records :data:`NAME` (``train.metrics`` names it)."""
    return wanted(getattr(env, "metrics", None), NAME)


def diag_keys(env) -> tuple[str, ...]:
    """The per-step diagnostics this metric adds to the engine's (none unless recorded)."""
    return (NAME,) if recorded(env) else ()


def extremes(logp, logp_old, mask) -> dict:
    """``{"log_ratio_max", "log_ratio_min"}``: the largest and smallest token log-ratio ``logp - logp_old`` over
    the valid tokens (``mask > 0``), with 0 counted in both (see the module)."""
    if logp_old is None:  # the loss reads no ratio: one on-policy update, every ratio 1
        zero = jnp.zeros((), logp.dtype)
        return {"log_ratio_max": zero, "log_ratio_min": zero}
    lr = jnp.where(mask > 0, logp - logp_old, 0.0)
    return {"log_ratio_max": jnp.maximum(lr.max(), 0.0), "log_ratio_min": jnp.minimum(lr.min(), 0.0)}


def step_range(aux) -> jax.Array:
    """The step's range from its updates' stacked extremes ``aux`` (``[updates]`` each)."""
    return aux["log_ratio_max"].max() - aux["log_ratio_min"].min()


def step_diag(aux) -> dict:
    """``{NAME: range}`` for the step's diagnostics when its updates' ``aux`` carry the extremes, else ``{}``."""
    return {NAME: step_range(aux)} if KEYS[0] in aux else {}


def wrap(env, plan, grad):
    """The update's gradient ``grad`` (:func:`tabsim.sim.update.make_gradient` on ``plan``), with the extremes in its
    diagnostics when the run records :data:`NAME`; else ``grad`` itself (the program is unchanged)."""
    if not recorded(env):
        return grad

    def logp_now(logits, idx, batch):
        """The sampled tokens' log-probabilities at ``logits``, read as the gradient reads them."""
        tokens = batch["rollout"].tokens
        if plan.sparse:  # the visited rows of the flattened table (one update per batch: the rollout's own)
            logq = batch["logq_old"] if plan.single else log_softmax_last(
                logits.reshape(-1, logits.shape[-1])[batch["rows"]])
            return take_logp(logq, tokens)
        return take_logp(env.token_logq(logits if plan.full else logits[idx], batch["rollout"]), tokens)

    return with_extremes(grad, plan.sparse, logp_now)


def with_extremes(grad, sparse: bool, logp_now):
    """``grad`` whose diagnostics also carry :func:`extremes` of the batch slice it is called on, the token
    log-probabilities read by ``logp_now(logits, idx, batch)`` (``idx`` None on the sparse path) at the logits the
    gradient is taken at. The gradient itself is unchanged."""
    if sparse:
        def grad_rows(logits, batch, hp):
            g, aux = grad(logits, batch, hp)
            lp = jax.lax.stop_gradient(logp_now(logits, None, batch))
            return g, {**aux, **extremes(lp, batch.get("logp_old"), batch["rollout"].mask)}

        return grad_rows

    def grad_table(logits, idx, batch, hp):
        g, aux = grad(logits, idx, batch, hp)
        lp = jax.lax.stop_gradient(logp_now(logits, idx, batch))
        return g, {**aux, **extremes(lp, batch.get("logp_old"), batch["rollout"].mask)}

    return grad_table

