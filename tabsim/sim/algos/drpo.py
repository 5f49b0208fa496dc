"""DRPO: DisCO's discriminative objective with the positives weighted by a length reward normalised among them.

Li, Chen, Lin and Yang, "DRPO: Efficient Reasoning via Decoupled Reward Policy Optimization", arXiv 2510.04474.
With a length penalty folded into the reward, GRPO's group-relative advantage can be negative for a correct but long
answer (its reward falls below the group's mean, which the wrong answers pull down). DRPO keeps the 0/1 reward for
telling positives from negatives and puts the length reward only into a distribution over the positives: the
maximiser of the length reward under a KL penalty to the policy, ``q(o) ~ pi(o) exp(r_len(o) / lambda)``, which on
the policy's own samples is the importance weight ``exp(r_len(o_i) / lambda)`` normalised over the group's positives.
Every positive keeps a positive weight, whatever its length.

Built as the authors' released ``compute_policy_loss_drpo`` (github.com/Optimization-AI/DRPO at 405f702,
``verl/verl/trainer/ppo/core_algos.py``; their 1.5B recipe ``scripts/train/run_drpo_1.5b_8k.sh``: ``loss_type=drpo``,
``Lambda=0.1``, ``tau=10``, ``delta=1e-4``, ``beta=1e3``, ``ppo_kl_type=kl``, 8 answers), read line by line:

* ``s_i = mean_t logp_{i,t}`` the answer's mean token log-probability (no ratio, no clip);
* ``u_i = len_i / L_max``, the answer's tokens over the padded response width (verl pads every response to
  ``max_response_length``; here the tree's depth ``T``), and ``w_i = exp((1 - u_i) / lambda)``;
* in each group with positives (reward 1) and negatives (reward 0),

      ``J_b = sum_{i in pos} w_i s_i / sum_{i in pos} w_i - tau log mean_{j in neg} exp(s_j / tau)``,
      ``J = sum_b J_b / B``

  (``B`` the batch's groups, those without both classes included);
* the KL constraint ``KL = mean_t (logp_old - logp)`` over the batch's valid tokens enters as ``c KL`` with
  ``c = sg(max(beta (KL - delta), 0))``, the squared hinge's gradient, as in :func:`tabsim.sim.algos.surrogates.disco`.

The released code writes the positives' term as ``sum_pos w (s - tau lme) / sum_pos w``, which is the form above
since ``lme`` is one number per group; its forward value holds ``tau`` where the log-mean-exp is (a detached-ratio
trick with the same gradient), this value is the objective itself. The normalised weights are computed as a softmax
of ``(1 - u_i) / lambda`` over the positives (the same numbers, without overflow at small ``lambda``). As in
``disco``, positives and negatives are the answers with ``A > 0`` and ``A < 0``: with 0/1 rewards and a centred
estimator (the recipe runs verl's ``grpo``) the released code's ``r = 1`` and ``r = 0`` of the groups with both. With
answers of equal length (the bandit's one-token answers) every weight is equal and DRPO is DisCO.
"""
from __future__ import annotations

import jax.numpy as jnp

from tabsim.sim.algos.surrogates import disco_constrained, disco_scores, register_surrogate


def positive_weights(pos, lengths, width, lam):
    """``[B, G]`` DRPO's weights of the positives, ``exp((1 - len / width) / lam)`` normalised to sum 1 over each
    group's positives (0 elsewhere; a group without positives gets zeros)."""
    logits = jnp.where(pos, (1.0 - lengths / width) / lam, -jnp.inf)
    top = jnp.max(jnp.where(pos, logits, 0.0), axis=-1, keepdims=True)
    e = jnp.where(pos, jnp.exp(jnp.where(pos, logits - top, 0.0)), 0.0)
    return e / jnp.maximum(e.sum(-1, keepdims=True), 1e-30)


@register_surrogate("drpo", clipped=False, batch=True,
                    no_expected="its KL constraint reads the mean KL over the whole batch's tokens, and its objective "
                                "is divided by the batch's number of groups")
def drpo(batch):
    """DRPO: per group ``sum_pos w_i s_i / sum_pos w_i - tau log mean_neg exp(s_j / tau)``, ``w_i = exp((1 - len_i /
    T) / lambda)``, less DisCO's KL constraint; every token holds the batch's loss (see the module's docstring).

    Args:
      batch: a :class:`tabsim.sim.algos.batch.Batch`; reads ``logp``, ``logp_old``, ``adv``, ``mask`` and ``hp``
        (``drpo_lambda``, ``disco_tau``, ``disco_delta``, ``disco_beta``).
    Returns:
      ``[B, G, T]`` the batch's loss on each token.
    """
    n, s, pos, _, both, lme = disco_scores(batch)
    w = positive_weights(pos, n, batch.logp.shape[-1], batch.hp.drpo_lambda)
    per_group = ((w * jnp.where(pos, s, 0.0)).sum(-1) - lme) * both
    return disco_constrained(batch, per_group)
