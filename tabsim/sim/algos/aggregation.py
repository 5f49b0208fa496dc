"""Loss aggregation: the only step that reduces ``[B, G, T]`` token losses to a scalar.

Signature: ``aggregate(loss, mask) -> scalar``. ``mask`` is 1 on real tokens of answers in the
batch and 0 on padding and on groups removed by the dynamic-sampling filter. With variable lengths
the modes differ, which is the source of GRPO's length bias. An aggregation registered with
``batch=True`` is ``aggregate(batch) -> scalar`` of one :class:`tabsim.sim.algos.batch.Batch` holding
``loss``, ``mask``, ``adv`` and ``hp`` (:func:`tabsim.sim.algos.batch.aggregate` calls either form); the
KL and entropy terms of the loss are reduced the same way as the surrogate's tokens.
"""
from __future__ import annotations

import jax.numpy as jnp

from tabsim.base import choices
from tabsim.base.registry import Registry

AGGREGATIONS = Registry("aggregation", builtin=choices.AGGREGATIONS)
register_aggregation = AGGREGATIONS.register  # ``@register_aggregation(name)`` adds a function under a new name


def _seq_stats(loss, mask):
    tok_sum = (loss * mask).sum(-1)
    n_tok = mask.sum(-1)
    seq_valid = (n_tok > 0).astype(loss.dtype)
    return tok_sum, n_tok, seq_valid


@register_aggregation("token-mean")
def token_mean(loss, mask):
    """``sum(loss * mask) / sum(mask)`` (DAPO, TRL ``dapo``/``bnpo``, verl default)."""
    return (loss * mask).sum() / jnp.maximum(mask.sum(), 1.0)


@register_aggregation("seq-mean-token-mean")
def seq_mean_token_mean(loss, mask):
    """Mean over answers of each answer's token mean (original GRPO, TRL ``grpo``)."""
    tok_sum, n_tok, seq_valid = _seq_stats(loss, mask)
    per_seq = tok_sum / jnp.maximum(n_tok, 1.0)
    return (per_seq * seq_valid).sum() / jnp.maximum(seq_valid.sum(), 1.0)


@register_aggregation("seq-mean-token-sum")
def seq_mean_token_sum(loss, mask):
    """Mean over answers of each answer's token sum."""
    tok_sum, _, seq_valid = _seq_stats(loss, mask)
    return (tok_sum * seq_valid).sum() / jnp.maximum(seq_valid.sum(), 1.0)


@register_aggregation("seq-mean-token-sum-norm")
def seq_mean_token_sum_norm(loss, mask):
    """Token sum / (number of answers * max length T) (Dr. GRPO, TRL ``dr_grpo``)."""
    tok_sum, _, seq_valid = _seq_stats(loss, mask)
    return tok_sum.sum() / jnp.maximum(seq_valid.sum() * loss.shape[-1], 1.0)


@register_aggregation("group-sum")
def group_sum(loss, mask):
    """Sum over groups of the mean over the group's G answers of their token mean.

    The reference simulator's accumulation: each kept prompt contributes ``(1/G) sum_g``, and the
    contributions are summed (not averaged) over the batch.
    """
    tok_sum, n_tok, _ = _seq_stats(loss, mask)
    per_seq = tok_sum / jnp.maximum(n_tok, 1.0)
    return per_seq.mean(-1).sum()


@register_aggregation("balanced", batch=True)
def balanced(batch):
    """Balanced Aggregation: per group ``(n+ / G) mean_tok(pos) + (n- / G) mean_tok(neg)``, mean over kept groups.

    Zeng et al., "Balanced Aggregation: Understanding and Fixing Aggregation Bias in GRPO", arXiv 2605.04077. The
    answers of a group are split by the sign of their advantage; each subset's token losses are averaged over
    its tokens (token-mean inside a sign, so no sign's length steers the other), and the two means are weighted by
    their answer counts ``n+``, ``n-``. Verified against the abstract and a reading of the method section (no
    released code was found): "computes token-level means separately within the positive and negative subsets
    and then combines them with sequence-count-based weights", a weighted average of the two. Where every answer
    has a nonzero advantage (0/1 rewards with spread and a centred estimator: the paper's GRPO) that average is
    the ``n+/G``, ``n-/G`` form here; an answer with ``A = 0`` is in neither subset and weighs 0. The groups are
    averaged over those with a token in the batch (as ``seq-mean-token-mean`` averages answers): the batch
    combination is not spelt out in what was read. With one token per answer it is ``seq-mean-token-mean``
    for any loss that is 0 where ``A = 0``.

    Args:
      batch: a :class:`tabsim.sim.algos.batch.Batch`; reads ``loss``, ``mask`` (``[B, G, T]``) and ``adv``
        (``[B, G, 1]``, or per token: the sign of its mean over the answer's tokens).
    Returns:
      the scalar loss.
    """
    loss, mask = batch.loss, batch.mask
    tok_sum, n_tok, seq_valid = _seq_stats(loss, mask)
    a = batch.adv[..., 0] if batch.adv.shape[-1] == 1 else (batch.adv * mask).sum(-1)
    answers = jnp.maximum(seq_valid.sum(-1), 1.0)  # G, or the answers a group stage kept
    group = 0.0
    for side in (a > 0, a < 0):
        side = side & (seq_valid > 0)
        tokens = (n_tok * side).sum(-1)
        group = group + side.sum(-1) / answers * (tok_sum * side).sum(-1) / jnp.maximum(tokens, 1.0)
    kept = (seq_valid.sum(-1) > 0).astype(loss.dtype)
    return (group * kept).sum() / jnp.maximum(kept.sum(), 1.0)
