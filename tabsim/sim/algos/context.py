"""What an estimator that declared ``reads=`` finds in its :class:`~tabsim.sim.algos.batch.Batch` besides the rewards.

:func:`estimator_context` computes, for one rollout batch, only the fields the estimator declared
(:data:`~tabsim.sim.algos.batch.CONTEXT_FIELDS`); an estimator that declares none gets nothing and its
program is the one it had before context existed.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from tabsim.sim.algos.loss import take_logp
from tabsim.sim.ops import log_softmax_last


def _masked_sum(x, mask):
    return (jnp.broadcast_to(x, mask.shape) * mask).sum(-1)


def reference_success(env, task) -> jax.Array:
    """``[N]`` the reference (prior) policy's probability of a correct answer: ``sum_a pi_ref(a) correct(a)``,
    exact from the task's tables (bandit and tree alike, through ``env.answer_distribution``)."""
    return (env.answer_distribution(task.prior_logits) * task.correct).sum(-1)


def estimator_context(env, reads, *, task, idx, every: bool, logits, rollout, logq_old=None, logp_old=None,
                      rows=None) -> dict:
    """The context fields ``reads`` for one batch.

    Args:
      env: the environment (``token_logq``, ``answer_distribution``).
      reads: the fields to compute (a subset of ``CONTEXT_FIELDS``).
      task: the whole task (``prior_logits [N, ...]``, ``correct [N, K]``); idx: ``[B]`` the batch's prompts;
        every: the batch is the whole table in order (then ``idx`` is ``arange(N)``).
      logits: the policy table the rollout drew from.
      rollout: the batch's rollout (``answers [B, G]``, ``tokens``/``mask`` ``[B, G, T]``).
      logq_old: ``[B, G, T, A]`` (or ``[B, 1, 1, A]``) the rollout policy's log-distributions at the visited nodes,
        when the step has them; logp_old: ``[B, G, T]`` their sampled tokens' log-probabilities.
      rows: ``[B, G, T]`` the visited rows of the flattened table (the tree's sparse path), else None.
    Returns:
      ``{field: array}`` for every field in ``reads``.
    """
    out = {}
    mask = rollout.mask
    if logq_old is None and any(f in reads for f in ("seq_logp", "entropy")):
        logq_old = _policy_logq(env, logits, idx, every, rollout, rows)
    if "answers" in reads:
        out["answers"] = rollout.answers
    if "prompts" in reads:
        out["prompts"] = idx.astype(jnp.int32)
    if "seq_logp" in reads:
        lp = logp_old if logp_old is not None else take_logp(logq_old, rollout.tokens)
        out["seq_logp"] = jax.lax.stop_gradient(_masked_sum(lp, mask))
    if "seq_logp_ref" in reads:
        ref = _policy_logq(env, task.prior_logits, idx, every, rollout, rows)
        out["seq_logp_ref"] = _masked_sum(take_logp(ref, rollout.tokens), mask)
    if "entropy" in reads:
        h = -(jnp.exp(logq_old) * logq_old).sum(-1)
        out["entropy"] = jax.lax.stop_gradient(_masked_sum(h, mask) / jnp.maximum(mask.sum(-1), 1.0))
    if "tokens" in reads:
        out["tokens"] = rollout.tokens
    if "p0" in reads:
        p0 = reference_success(env, task)
        out["p0"] = p0 if every else p0[idx]
    return out


def _policy_logq(env, table, idx, every, rollout, rows):
    """Log-distributions of ``table`` (the policy's or the prior's) at the rollout's visited nodes."""
    if rows is not None:  # the tree's sparse path: read the visited rows of the flattened table
        return log_softmax_last(table.reshape(-1, table.shape[-1])[rows])
    return env.token_logq(table if every else table[idx], rollout)
