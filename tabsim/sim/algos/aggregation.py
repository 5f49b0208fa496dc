"""Loss aggregation: the only step that reduces ``[B, G, T]`` token losses to a scalar.

Signature: ``aggregate(loss, mask) -> scalar``. ``mask`` is 1 on real tokens of answers in the
batch and 0 on padding and on groups removed by the dynamic-sampling filter. With variable lengths
the modes differ, which is the source of GRPO's length bias.
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
