"""The float32 tolerance of one engine update computed by two paths (sparse rows and dense autodiff, closed
form and autodiff): :func:`f32_tolerance.update_bound` with the sizes of a GRPO-family update's terms."""
from __future__ import annotations

import numpy as np

from f32_tolerance import f32_bound, update_bound  # tests/core: the float32 error bounds

RATIO_SURROGATES = ("clip", "dual_clip", "importance", "sapo")  # the token's weight is a traced ratio


def log_softmax(x):
    x = np.asarray(x, np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def loss_derivative_bound(logits, prior, G: int, hp) -> float:
    """A bound on the mean over a group's G answers of ``|dL/dlogp|`` before aggregation: the mean ``|A|``
    is <= 1 for a group-normalised advantage (Cauchy-Schwarz: ``sum A^2 <= G``), and for Dr. GRPO's
    ``r - mean`` and RLOO's ``G/(G-1) (r - mean)`` of 0/1 rewards <= ``G/(G-1)``; times the surrogate's
    weight ``<= 1 + eps_high``; plus ``beta`` times the KL estimators' derivatives, all ``<= exp|log pi -
    log pi_ref|`` (k1: 1, k2: |d|, k3: |1 - e^d|, exact: |d| + 1), and ``ent_coef`` times the entropy's
    ``1 + |log pi|``."""
    lp, ref = log_softmax(logits), log_softmax(prior)
    kl = np.exp(np.abs(lp - ref).max())
    return (G / (G - 1) * (1 + float(hp.eps_high)) + float(hp.beta) * kl
            + float(hp.ent_coef) * (1 + np.abs(lp).max()))


def engine_update_tolerance(spec, sched, hp, logits, prior, repeats: int, moved: float) -> dict:
    """``{"table", "opt"}``: the tolerances of the new table and of the optimizer's moments.

    One table row (a prompt's node) holds the terms ``c_t (onehot - pi)`` of the ``repeats * G`` tokens
    of its prompt in a minibatch (one per answer); the aggregation weighs each token by at most ``1/G``
    (group-sum) or ``1/(mb G)``, so a row's terms sum to at most ``D = c_mean repeats G weight``; the step is ``lr`` times
    that (SGD), or ``lr / adam_eps`` times its error (Adam's ``g / (|g| + eps)``). Each term takes ``3G``
    roundings (advantage: mean, std, quotient), ``3b`` (log-softmax of a row of ``b``) and about 10 (loss
    chain, aggregation), the global-norm clip one per table entry. A later step moves with the table by
    ``lr D (1/2 + 2)`` per unit: ``pi``'s Jacobian (``<= 1/2``) and, for a ratio surrogate, the ratio's
    (``|d logp / dz| <= 2``)."""
    G, mb, b = sched.group_size, sched.batch_size // spec.minibatches, np.shape(logits)[-1]
    weight = 1.0 / G if spec.aggregation == "group-sum" else 1.0 / (mb * G)
    D = loss_derivative_bound(logits, prior, G, hp) * repeats * G * weight
    n_ops = repeats * G + 3 * G + 3 * b + 10 + (np.size(logits) if spec.grad_clip else 0)
    gain = float(hp.lr) / (float(hp.adam_eps) if spec.optimizer == "adam" else 1.0)
    lip = gain * D * (0.5 + 2.0 * (spec.surrogate in RATIO_SURROGATES))
    steps = spec.epochs * spec.minibatches
    table = update_bound(steps, np.abs(logits).max() + moved, n_ops, gain * D, lip)
    # Adam's moments: (1 - b1) g and (1 - b2) g^2 of gradients of size <= D, off by the step error and by
    # the table's (D's Lipschitz factor); g^2 doubles the error of g relative to itself
    g_err = steps * 2.0 * f32_bound(n_ops, D) + D * 2.5 * table
    return {"table": table, "opt": g_err * max(1.0, 2.0 * D)}
