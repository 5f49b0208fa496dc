"""The token-weight stage: a constant weight ``[B, G, T]`` on each token's surrogate loss, before aggregation.

``algo.token_weight`` names one; ``none`` (the default) compiles nothing, so every program without one is
unchanged. :func:`tabsim.sim.algos.policy_loss` multiplies the surrogate's per-token losses by the weights
(never the KL or entropy terms) and aggregates with the token mask as before, so a weight of 0 drops a
token's policy gradient but the token still counts in the aggregation's denominators, as in TRL.

A weight is a function ``fn(logq, tokens, mask, adv, hp) -> [B, G, T]`` of the visited nodes' log
distributions ``logq`` (``[B, G, T, A]``, or ``[B, 1, 1, A]`` for one node per prompt), the sampled tokens, the
token mask, the advantages (``[B, G]`` or ``[B, G, T]``) and the traced hyperparameters; its value is held
constant (no gradient flows through it). Weights that read the policy's entropy need ``logq``, so
:func:`tabsim.sim.algos.reads_logp_only` is false for them. Every weight here reads more than one group
(a batch-wide quantile) or the sampled paths themselves, so ``train.dynamics = "expected"`` refuses them.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from tabsim.base import choices
from tabsim.base.registry import Registry

TOKEN_WEIGHTS = Registry("token_weight", builtin=choices.TOKEN_WEIGHTS)


def register_token_weight(name: str, **meta):
    """Register ``fn(logq, tokens, mask, adv, hp) -> [B, G, T]`` under ``name`` (``meta``: its capabilities)."""
    return TOKEN_WEIGHTS.register(name, **meta)


def token_weights(name: str, logq, tokens, mask, adv, hp):
    """The weights of component ``name`` as constants, ``[B, G, T]``."""
    return jax.lax.stop_gradient(jnp.broadcast_to(TOKEN_WEIGHTS[name](logq, tokens, mask, adv, hp), mask.shape))


def token_entropy(logq, shape):
    """The policy's entropy at each visited node, broadcast to ``shape`` ``[B, G, T]``."""
    return jnp.broadcast_to(-(jnp.exp(logq) * logq).sum(-1), shape)


def masked_quantile(x, mask, q):
    """``torch.quantile`` (linear interpolation) of the entries of ``x`` where ``mask > 0``, at ``q``; ``nan``
    when there are none. The masked-out entries sort last (``+inf``), so the ``n`` kept ones come first."""
    flat = jnp.where(mask > 0, x, jnp.inf).reshape(-1)
    v = jnp.sort(flat)
    n = (mask > 0).sum()
    pos = q * jnp.maximum(n - 1, 0).astype(x.dtype)
    lo = jnp.floor(pos).astype(jnp.int32)
    hi = jnp.minimum(lo + 1, jnp.maximum(n - 1, 0))
    frac = pos - lo
    out = v[lo] + frac * jnp.where(hi > lo, v[hi] - v[lo], 0.0)
    return jnp.where(n > 0, out, jnp.nan)


@register_token_weight("top_entropy", reads_entropy=True)
def top_entropy(logq, tokens, mask, adv, hp):
    """Train on the batch's high-entropy tokens only ("forking tokens").

    Wang et al., "Beyond the 80/20 Rule: High-Entropy Minority Tokens Drive Effective Reinforcement
    Learning for LLM Reasoning", arXiv 2506.01939: the policy gradient is kept on the top ``rho`` share of
    the batch's tokens by entropy (rho = 0.2 in the paper) and dropped on the rest. Written from TRL's
    ``GRPOTrainer.get_high_entropy_mask`` and its use in ``_compute_loss`` (``top_entropy_quantile``), read
    for this: the threshold is ``torch.quantile`` (linear interpolation) at ``1 - top_entropy_quantile`` of
    the entropies of the batch's unmasked tokens, the weight is ``1[H_t >= threshold]`` on unmasked tokens,
    it multiplies the per-token surrogate loss only (TRL adds the KL after the mask), and the loss's
    denominators still count every unmasked token. ``H_t`` is the current policy's entropy at the node the
    token was drawn at (TRL: the entropy of the logits of the forward pass that gives the loss). A batch with
    no unmasked token gets no weight (TRL: an all-false mask).

    ``hp.top_entropy_quantile``: TRL's ``top_entropy_quantile``, the share of tokens kept (1.0: all).
    """
    h = token_entropy(logq, mask.shape)
    threshold = masked_quantile(h, mask, 1.0 - hp.top_entropy_quantile)
    return ((h >= threshold) & (mask > 0)).astype(mask.dtype)


def _runs(hit, axis=-1):
    """``hit`` kept only on its initial run along ``axis`` (``torch.cumprod`` of 0/1 flags)."""
    return jnp.cumprod(hit.astype(jnp.int32), axis=axis) > 0


def _conflicts(tokens, valid, pos, neg):
    """``[B, G, T]``: token ``t`` of answer ``i`` is drawn at position ``t`` by a positive and by a negative
    answer of its group (both among the valid tokens; the answer itself counts)."""
    same = (tokens[:, :, None, :] == tokens[:, None, :, :]) & valid[:, None, :, :]  # [B, i, j, T]
    in_pos = (same & pos[:, None, :, None]).any(2)
    in_neg = (same & neg[:, None, :, None]).any(2)
    return in_pos & in_neg & valid


def _from_end(x, lengths):
    """``x [B, G, T]`` re-indexed so position ``s`` holds the answer's ``s``-th token from its end (the
    positions past its length wrap round to its padding)."""
    T = x.shape[-1]
    s = jnp.arange(T)
    idx = (lengths[..., None] - 1 - s) % T
    return jnp.take_along_axis(x, idx, axis=-1)


@register_token_weight("gtpo_conflict")
def gtpo_conflict(logq, tokens, mask, adv, hp):
    """GTPO's conflict-token weights: on the tokens an answer shares with both a rewarded and a penalised
    answer of its group, skip the negative update and amplify the positive one.

    Simoni et al., "GTPO: Trajectory-Based Policy Optimization in Large Language Models", arXiv 2508.03772,
    as the authors' released trainer (github.com/winstonsmith1897/GTPO, ``gtpo/gtpo_training.py``,
    ``build_conflict_mask`` and ``gtpo_compute_loss``, read at 5d33811). Among the answers with ``A != 0``, a
    token at position ``t`` is in conflict when some answer with ``A > 0`` and some with ``A < 0`` draw the
    same token at ``t``; only the initial run of conflicts counts, once from the start and once from the end
    (the answers aligned on their last token). On each run a token of a positive answer weighs ``w``
    (``hp.gtpo_conflict_weight``, the code's ``W_RAW = 2``), of a negative one 0, every other token 1, and the
    two runs' weights multiply (a token in both runs of a positive answer weighs ``w^2``). Each answer's
    weights are then divided by its number of conflict tokens (at least 1), as the code divides each
    completion's loss. Answers with ``A = 0`` weigh 1. In a tree a run from the start is a shared prefix.

    Not built here: the trainer's entropy filter and shaping (completions with mean token entropy above 0.7
    get ``A = 0``, the rest ``A - 0.1 H``), which change the advantage rather than weigh tokens.
    """
    a = adv if adv.ndim == 2 else adv[..., 0]
    valid = mask > 0
    pos, neg = a > 0, a < 0
    active = (pos | neg)[..., None]
    pos_b = pos[..., None]
    w = hp.gtpo_conflict_weight

    def weights(conflict):
        return jnp.where(conflict, jnp.where(pos_b, w, 0.0), 1.0)

    fwd = _runs(_conflicts(tokens, valid & active, pos, neg)) & valid & active
    lengths = valid.sum(-1).astype(jnp.int32)
    tok_r, valid_r = _from_end(tokens, lengths), _from_end(valid, lengths) & (jnp.arange(tokens.shape[-1]) <
                                                                               lengths[..., None])
    bwd_r = _runs(_conflicts(tok_r, valid_r & active, pos, neg)) & valid_r & active
    bwd = _from_end(bwd_r, lengths) & valid  # the same re-indexing maps it back
    n_conflict = jnp.maximum((fwd | bwd).sum(-1, keepdims=True), 1).astype(mask.dtype)
    return jnp.where(active, weights(fwd) * weights(bwd) / n_conflict, 1.0) * mask


def prefix_counts(tokens, mask):
    """``[B, G, T]``: how many answers of its group (itself included) draw the same first ``t + 1`` tokens as
    answer ``i`` (the size of the process set holding token ``t``; 0 on masked tokens)."""
    valid = mask > 0
    same = (tokens[:, :, None, :] == tokens[:, None, :, :]) & valid[:, :, None, :] & valid[:, None, :, :]
    shared = jnp.cumprod(same.astype(jnp.int32), axis=-1)  # [B, i, j, T]: i and j agree on tokens 0..t
    return shared.sum(2)


@register_token_weight("lambda_grpo")
def lambda_grpo(logq, tokens, mask, adv, hp):
    """lambda-GRPO's process-step weights: each token's surrogate loss divided by the number of the group's
    answers that share the answer's prefix up to and including that token.

    Sullivan & Koller, "GRPO is Secretly a Process Reward Model", arXiv 2509.21154: a group's answers form a
    prefix tree whose nodes (process sets ``lambda``, the answers sharing a prefix) are the implicit PRM's
    steps; GRPO's token-level loss counts a step once per answer through it, so steps many answers share
    dominate. lambda-GRPO scales each token of node ``lambda`` by ``1 / |lambda|``. Checked against the
    authors' released trainer (github.com/coli-saar/grpo-prm, ``lambda_grpo/utils.py`` ``InfPRMTree`` /
    ``InfPRMNode._loss_scale`` and ``lambda_grpo/trainer.py``, read at 6bc58b1): the tree is built from each
    group's token ids (identical answers share one leaf), every token of a node gets ``1 / len(node.idx)``, the
    number of the group's answers under it, and the per-token loss is multiplied by that scale while the
    denominators still count tokens (``loss_type = "grpo"``: per-answer token mean, then the mean over
    answers; ``"dapo"``: the token mean). Written here as
    ``w_{i,t} = 1 / #{j : y_j[:t+1] = y_i[:t+1]}`` on unmasked tokens, which is that tree's scale token by
    token. One difference: the authors' scale also multiplies their k3 KL term (their scripts run ``beta = 0``);
    this stage weighs the surrogate only. On a bandit (one token per answer) it divides each answer by its
    number of copies in the group. The advantage is unchanged (the authors: GRPO's z-score, Bessel std, eps
    1e-4).
    """
    n = prefix_counts(tokens, mask)
    return jnp.where(mask > 0, 1.0 / jnp.maximum(n, 1).astype(mask.dtype), 0.0)
