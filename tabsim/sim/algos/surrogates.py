"""Per-token policy losses (minimised): ``surrogate(log_ratio, logp, adv, hp) -> [B, G, T]``.

``log_ratio`` comes from :mod:`tabsim.sim.algos.ratios`, ``adv`` is ``[B, G, 1]`` (broadcast over
tokens) and ``logp`` the differentiable token log-probabilities, needed by the ratio-free losses.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from tabsim.base import choices
from tabsim.base.registry import Registry

SURROGATES = Registry("surrogate", builtin=choices.SURROGATES)


def register_surrogate(name: str, *, clipped=True, batch: bool = False, **meta):
    """Register ``fn(log_ratio, logp, adv, hp)``, or ``fn(batch)`` with ``batch=True`` (a
    :class:`tabsim.sim.algos.batch.Batch`, which also holds the mask); ``clipped=False`` for losses with no
    hard clip (they never zero a token's gradient, so their clip fraction is 0), or ``clipped=active`` with
    ``active(log_ratio, adv, hp) -> bool [B, G, T]`` the tokens whose gradient the loss's own clip zeroes;
    ``no_expected="why"`` for a loss that ``train.dynamics = "expected"`` cannot run exactly (it reads more
    than one group)."""
    return SURROGATES.register(name, clipped=clipped, batch=batch, **meta)


@register_surrogate("clip")
def ppo_clip(log_ratio, logp, adv, hp):
    """PPO clip: ``max(-A w, -A clip(w, 1 - eps_low, 1 + eps_high))`` (Schulman et al. 2017).

    DAPO's clip-higher is ``eps_high > eps_low`` (arXiv 2503.14476). This is TRL's GRPO loss;
    verl's ``vanilla`` loss always adds the dual clip (``dual_clip``).
    """
    w = jnp.exp(log_ratio)
    return jnp.maximum(-adv * w, -adv * jnp.clip(w, 1.0 - hp.eps_low, 1.0 + hp.eps_high))


@register_surrogate("dual_clip")
def dual_clip(log_ratio, logp, adv, hp):
    """PPO clip plus the dual clip: for ``A < 0`` the loss is capped at ``-A c`` (verl, c = 3).

    Ye et al., arXiv 1912.09729.
    """
    clipped = ppo_clip(log_ratio, logp, adv, hp)
    return jnp.where(adv < 0, jnp.minimum(clipped, -adv * hp.dual_clip_c), clipped)


@register_surrogate("cispo", clipped=False)
def cispo(log_ratio, logp, adv, hp):
    """CISPO: ``-sg(clip(w, 1 - eps_low, 1 + eps_high)) A logp`` (MiniMax-M1, arXiv 2506.13585).

    The weight is clipped and detached, so every token keeps a gradient (verl ``cispo``). The paper
    and TRL (``torch.clamp(w, max=epsilon_high)``) have no lower bound: ``eps_low = 1`` (TRL's
    ``epsilon_high`` is this ``1 + eps_high``).
    """
    w = jax.lax.stop_gradient(jnp.clip(jnp.exp(log_ratio), 1.0 - hp.eps_low, 1.0 + hp.eps_high))
    return -w * adv * logp


@register_surrogate("sapo", clipped=False)
def sapo(log_ratio, logp, adv, hp):
    """SAPO soft gate: ``-A (4 / tau) sigmoid(tau (w - 1))``, tau_pos for A > 0, tau_neg else.

    Soft Adaptive Policy Optimization (arXiv 2511.20347; TRL/verl ``sapo``). The gate has slope 1
    at ``w = 1``, so on-policy its gradient equals the plain policy gradient.
    """
    w = jnp.exp(log_ratio)
    tau = jnp.where(adv > 0, hp.sapo_tau_pos, hp.sapo_tau_neg)
    return -adv * (4.0 / tau) * jax.nn.sigmoid(tau * (w - 1.0))


@register_surrogate("importance", clipped=False)
def importance(log_ratio, logp, adv, hp):
    """Unclipped importance-weighted policy gradient ``-A w``."""
    return -adv * jnp.exp(log_ratio)


@register_surrogate("reinforce", clipped=False)
def reinforce(log_ratio, logp, adv, hp):
    """Plain REINFORCE / GPG: ``-A logp`` with no ratio (the reference simulator's update)."""
    return -adv * logp


@register_surrogate("spo", clipped=False)
def spo(log_ratio, logp, adv, hp):
    """Simple Policy Optimization: ``-(A w - |A| (w - 1)^2 / (2 eps))``, a quadratic pull back into the trust region.

    Xie et al., arXiv 2401.16025 (their released trainer's ``spo`` loss). Instead of PPO's hard clip, which zeroes
    a token's gradient once its ratio leaves the range, the penalty bends the objective so its optimum in ``w`` is
    the range's edge ``1 + sgn(A) eps`` and every token keeps a gradient. The paper has one ``eps``; here
    ``eps = eps_high`` for ``A > 0`` and ``eps_low`` for ``A < 0`` (the paper's with ``eps_low = eps_high``). At
    ``w = 1`` its gradient is the policy gradient, as PPO's.
    """
    w = jnp.exp(log_ratio)
    eps = jnp.where(adv > 0, hp.eps_high, hp.eps_low)
    return -(adv * w - jnp.abs(adv) * (w - 1.0) ** 2 / (2.0 * eps))


def _gmpo_clipped(log_ratio, adv, hp):
    """The tokens GMPO's log-space clip holds: ``l > eps_high`` with ``A > 0``, ``l < -eps_low`` with ``A < 0``."""
    return ((adv > 0) & (log_ratio > hp.eps_high)) | ((adv < 0) & (log_ratio < -hp.eps_low))


@register_surrogate("gmpo", clipped=_gmpo_clipped, batch=True)
def gmpo(batch):
    """GMPO: the geometric mean of an answer's clipped token ratios, ``-A exp(mean_t c_t)``.

    Geometric-Mean Policy Optimization (Zhao et al., arXiv 2507.20673). Each token's log-ratio
    ``l_t`` is clipped in log space on the side its advantage's sign makes pessimistic,
    ``c_t = sgn(A) min(sgn(A) l_t, sgn(A) clip(l_t, -eps_low, eps_high))``, and the answer's objective is
    ``sgn(A) prod_t |min(rho_t A, clip(rho_t, e^-eps_low, e^eps_high) A)|^(1/|o|) = A exp((1/|o|) sum_t c_t)``,
    the geometric mean of the token terms (verl ``geo_mean``, TRL ``GMPOTrainer``; the paper's range is ``eps = 0.4``, ratios
    in ``(e^-0.4, e^0.4)``). The answer's loss is broadcast to its tokens, so ``seq-mean-token-mean``
    gives the paper's mean over answers. With one token per answer it is PPO's clip with bounds
    ``1 - eps_low' = e^-eps_low`` and ``1 + eps_high' = e^eps_high``.

    Args:
      batch: a :class:`tabsim.sim.algos.batch.Batch`; reads ``log_ratio`` (token level), ``adv``
        (``[B, G, 1]``, or per token: its mean over the answer's tokens), ``mask`` and ``hp``.
    Returns:
      ``[B, G, T]`` the answer's loss on each of its tokens.
    """
    l, adv, mask, hp = batch.log_ratio, batch.adv, batch.mask, batch.hp
    sign = jnp.sign(adv)
    held = sign * jnp.minimum(sign * l, sign * jnp.clip(l, -hp.eps_low, hp.eps_high))
    n = jnp.maximum(mask.sum(-1, keepdims=True), 1.0)
    a = adv if adv.shape[-1] == 1 else (adv * mask).sum(-1, keepdims=True) / n
    return jnp.broadcast_to(-a * jnp.exp((held * mask).sum(-1, keepdims=True) / n), l.shape)


@register_surrogate("gvpo", clipped=False, batch=True)
def gvpo(batch):
    """GVPO: half the squared gap between an answer's centred implicit reward and its advantage.

    Group Variance Policy Optimization (Zhang et al., arXiv 2504.19599), as its authors' released
    ``compute_policy_loss_gvpo`` (github.com/jszkc/GVPO, ``GVPO/gvpo_core_algos.py``): with
    ``s_i = beta sum_t (logp_{i,t} - logp_old_{i,t})`` the answer's implicit reward (the paper's ``beta log
    pi_theta / pi_theta'``, the rollout policy as ``pi_theta'``) and ``A_i`` its advantage (the released recipe runs
    verl's GRPO advantage without the std, ``r_i - mean_j r_j``: the ``dr_grpo`` estimator),

        ``L_i = (1/2) ((s_i - mean_j s_j) - A_i)^2``

    broadcast to the answer's tokens, so ``seq-mean-token-mean`` gives the mean of ``L_i`` over the batch's answers
    (the released code sums ``L_i`` over its micro-batch and divides by ``G - 1``: a constant factor of the step).
    The weights ``A_i - (s_i -
    mean s)`` of ``grad logp(o_i)`` sum to zero over the group, which cancels the partition function of the
    optimum ``pi_old exp(r / beta)``. On-policy (``s = 0``) the gradient is ``-beta sum_i A_i grad logp(o_i)``:
    REINFORCE with centred rewards and each answer's token sum, times ``beta``. No ratio component is read (the
    implicit reward is the answer's summed log-ratio, whatever ``algo.ratio`` is).

    Args:
      batch: a :class:`tabsim.sim.algos.batch.Batch`; reads ``logp``, ``logp_old``, ``mask``, ``adv``
        (``[B, G, 1]``, or per token: its mean over the answer's tokens) and ``hp.gvpo_beta``.
    Returns:
      ``[B, G, T]`` the answer's loss on each of its tokens.
    """
    logp, mask, hp = batch.logp, batch.mask, batch.hp
    n = jnp.maximum(mask.sum(-1), 1.0)
    a = batch.adv[..., 0] if batch.adv.shape[-1] == 1 else (batch.adv * mask).sum(-1) / n
    s = hp.gvpo_beta * ((logp - batch.logp_old) * mask).sum(-1)  # [B, G]
    gap = (s - s.mean(-1, keepdims=True)) - a
    return jnp.broadcast_to((0.5 * gap * gap)[..., None], logp.shape)


def kl_cov_selected(adv, logp, mask, hp):
    """``[B, G, T]`` bool: the ``max(1, floor(n k))`` valid tokens of the batch (``n`` of them) with the largest
    ``(A_t - mean A) (logp_t - mean logp)`` (means over the valid tokens, ``logp`` detached), ``k =
    hp.kl_cov_ratio``; ties go to the earlier token in ``[B, G, T]`` order (verl's ``torch.topk`` leaves them
    unspecified)."""
    a = jnp.broadcast_to(adv, logp.shape)
    lp = jax.lax.stop_gradient(logp)
    n = mask.sum()
    centred = lambda x: x - (x * mask).sum() / jnp.maximum(n, 1.0)  # noqa: E731
    cov = jnp.where(mask > 0, centred(a) * centred(lp), -jnp.inf).reshape(-1)
    order = jnp.argsort(-cov, stable=True)
    rank = jnp.zeros_like(order).at[order].set(jnp.arange(order.size, dtype=order.dtype))
    k = jnp.maximum(jnp.floor(n * hp.kl_cov_ratio), 1.0)
    return (rank.reshape(logp.shape) < k) & (mask > 0)


@register_surrogate("kl_cov", clipped=False, batch=True,
                    no_expected="it penalises the tokens of the whole batch with the largest covariance, a batch-wide "
                                "ranking that the expected flow's per-prompt groups do not see")
def kl_cov(batch):
    """KL-Cov: the unclipped importance loss ``-A w``, plus ``coef |log w|`` on the tokens of largest covariance.

    Cui et al., "The Entropy Mechanism of Reinforcement Learning for Reasoning Language Models", arXiv
    2505.22617, as verl's ``compute_policy_loss_kl_cov`` (``verl/trainer/ppo/core_algos.py``, read at b178a3c):
    ``cov_t = (A_t - mean A)(logp_t - mean logp)`` over the batch's valid tokens (``logp`` the current policy's,
    detached); the ``max(1, floor(n kl_cov_ratio))`` tokens with the largest ``cov_t`` get
    ``-A_t w_t + kl_cov_coef |l_t|``, every other token ``-A_t w_t`` (no clip, as verl). The ratio is the ratio
    component's (verl: per token). Ties in the ranking go to the earlier token (see :func:`kl_cov_selected`).
    With ``kl_cov_coef = 0`` it is the ``importance`` surrogate.

    Args:
      batch: a :class:`tabsim.sim.algos.batch.Batch`; reads ``log_ratio``, ``logp``, ``adv``, ``mask`` and ``hp``
        (``kl_cov_ratio``, ``kl_cov_coef``).
    Returns:
      ``[B, G, T]`` per-token losses.
    """
    l, hp = batch.log_ratio, batch.hp
    chosen = kl_cov_selected(batch.adv, batch.logp, batch.mask, hp)
    # |l| with torch's gradient sign(l), 0 at l = 0 (jnp.abs has 1 there): on-policy the penalty adds nothing
    abs_l = l * jax.lax.stop_gradient(jnp.sign(l))
    return -batch.adv * jnp.exp(l) + jnp.where(chosen, hp.kl_cov_coef * abs_l, 0.0)



@register_surrogate("disco", clipped=False, batch=True,
                    no_expected="its KL constraint reads the mean KL over the whole batch's tokens, and its objective "
                                "is divided by the batch's number of groups")
def disco(batch):
    """DisCO: the discriminative objective ``mean_pos s - tau log mean_neg exp(s / tau)`` per group, with its KL
    constraint as a squared-hinge penalty; every token holds the batch's loss.

    Discriminative Constrained Optimization (Li et al., arXiv 2505.12366), as its authors' released
    ``compute_policy_loss_disco_logL`` (github.com/Optimization-AI/DisCO, ``verl/verl/trainer/ppo/core_algos.py``)
    with their 1.5B recipe's ``ppo_kl_type=kl``: the score of an answer is its mean token log-probability
    ``s_i = mean_t logp_{i,t}`` (no ratio, no clip); in each group with positives and negatives,

        ``J_b = mean_{i in pos} s_i - tau log mean_{j in neg} exp(s_j / tau)``,   ``J = sum_b J_b / B``

    (``B`` the batch's groups, those without both classes included, as the released code); the constraint
    ``KL = mean_t (logp_old - logp)`` over the batch's valid tokens enters as ``c KL`` with ``c = sg(max(beta (KL -
    delta), 0))``, whose gradient is that of the squared hinge ``(beta / 2) max(KL - delta, 0)^2``. The loss is
    ``-J + c KL`` on every valid token, so ``token-mean`` and ``seq-mean-token-mean`` aggregate it to itself. The
    released code's forward value holds ``tau`` where the log-mean-exp is (a detached-ratio trick with the same
    gradient); this value is the objective itself. The positives and negatives are the answers with ``A > 0`` and
    ``A < 0``: with 0/1 rewards and a centred estimator (the recipe runs verl's ``grpo``), the released code's
    ``r = 1`` and ``r = 0`` of the groups that have both. With one token per answer ``s_i = logp(o_i)``.

    Args:
      batch: a :class:`tabsim.sim.algos.batch.Batch`; reads ``logp``, ``logp_old``, ``adv``, ``mask`` and ``hp``
        (``disco_tau``, ``disco_delta``, ``disco_beta``).
    Returns:
      ``[B, G, T]`` the batch's loss on each token.
    """
    n, s, pos, n_pos, both, lme = disco_scores(batch)
    per_group = (jnp.where(pos, s, 0.0).sum(-1) / jnp.maximum(n_pos, 1) - lme) * both
    return disco_constrained(batch, per_group)


def disco_scores(batch):
    """What DisCO-style objectives share: each answer's token count ``n`` and mean token log-probability ``s``
    (``[B, G]``), the positives (``A > 0``) and their count, the groups holding positives and negatives, and the
    negatives' ``tau log mean exp(s / tau)`` (0 in the other groups)."""
    logp, mask, hp = batch.logp, batch.mask, batch.hp
    n = mask.sum(-1)
    a = batch.adv[..., 0] if batch.adv.shape[-1] == 1 else (batch.adv * mask).sum(-1) / jnp.maximum(n, 1.0)
    s = (logp * mask).sum(-1) / jnp.maximum(n, 1.0)  # [B, G]
    pos, neg = (a > 0) & (n > 0), (a < 0) & (n > 0)
    n_pos, n_neg = pos.sum(-1), neg.sum(-1)
    both = (n_pos > 0) & (n_neg > 0)
    lme = hp.disco_tau * (jax.nn.logsumexp(jnp.where(neg, s / hp.disco_tau, -jnp.inf), axis=-1, where=neg)
                          - jnp.log(jnp.maximum(n_neg, 1)))
    return n, s, pos, n_pos, both, jnp.where(both, lme, 0.0)


def disco_constrained(batch, per_group):
    """DisCO's loss on every token from the groups' objectives ``[B]``: ``-J + c KL``, ``J`` their mean over the
    batch's groups, ``c = sg(max(beta (KL - delta), 0))``."""
    logp, mask, hp = batch.logp, batch.mask, batch.hp
    objective = per_group.sum() / per_group.shape[0]
    kl = ((batch.logp_old - logp) * mask).sum() / jnp.maximum(mask.sum(), 1.0)
    c = jax.lax.stop_gradient(jnp.maximum(hp.disco_beta * (kl - hp.disco_delta), 0.0))
    return jnp.broadcast_to(-objective + c * kl, logp.shape)




@register_surrogate("real", clipped=False, batch=True,
                    no_expected="its loss is divided by the batch's number of groups")
def real(batch):
    """REAL: each answer's score a logit, positives labelled 1 and negatives 0 against an anchor logit 0; every token
    holds the batch's loss.

    Rewards as Labels (arXiv 2602.05630), as its authors' released ``compute_policy_loss_real``
    (github.com/Red-RL/REAL, ``verl/verl/trainer/ppo/core_algos.py``): the score of an answer is its mean token
    log-ratio ``s_i = mean_t (logp_{i,t} - logp_old_{i,t})``; in each group with positives and negatives,

        ``L_b = log(1 + sum_{j in neg} exp(s_j / tau)) + log(1 + sum_{i in pos} exp(-s_i / tau))``

    and the loss is ``sum_b L_b / B`` (``B`` the batch's groups, those without both classes included, as the
    released code), with no clip and no KL term. Each answer's gradient weight is a softmax share against the
    anchor: bounded by ``1 / tau`` and monotone in its score. On-policy (``s = 0``) a group of ``n+`` positives and
    ``n-`` negatives weighs each positive ``1 / (tau (1 + n+))`` and each negative ``1 / (tau (1 + n-))``. The
    positives and negatives are the answers with ``A > 0`` and ``A < 0`` (with 0/1 rewards and a centred
    estimator, the released code's ``r = 1`` and ``r = 0``). ``token-mean`` and ``seq-mean-token-mean`` aggregate
    the broadcast loss to itself.

    Args:
      batch: a :class:`tabsim.sim.algos.batch.Batch`; reads ``logp``, ``logp_old``, ``adv``, ``mask`` and
        ``hp.real_tau``.
    Returns:
      ``[B, G, T]`` the batch's loss on each token.
    """
    logp, mask, hp = batch.logp, batch.mask, batch.hp
    n = mask.sum(-1)
    a = batch.adv[..., 0] if batch.adv.shape[-1] == 1 else (batch.adv * mask).sum(-1) / jnp.maximum(n, 1.0)
    s = ((logp - batch.logp_old) * mask).sum(-1) / jnp.maximum(n, 1.0) / hp.real_tau  # [B, G]
    pos, neg = (a > 0) & (n > 0), (a < 0) & (n > 0)
    both = (pos.sum(-1) > 0) & (neg.sum(-1) > 0)
    anchor = jnp.zeros(s.shape[:-1] + (1,), s.dtype)

    def softplus_sum(x, side):  # log(1 + sum_side exp(x)): the anchor logit 0 among the side's logits
        return jax.nn.logsumexp(jnp.concatenate([jnp.where(side, x, -jnp.inf), anchor], -1), axis=-1)

    per_group = (softplus_sum(s, neg) + softplus_sum(-s, pos)) * both
    return jnp.broadcast_to(per_group.sum() / s.shape[0], logp.shape)

def dcpo_bounds(logp_old, hp):
    """DCPO's ratio bounds ``[B, G, T]`` from the rollout policy's token probability ``q = exp(logp_old)``:
    ``low = (1 + sqrt(max(1 - 4 eps_low / q, 0))) / 2``, ``high = min((1 + sqrt(1 + 4 eps_high / q)) / 2,
    max(c, 10))`` (the released ``get_clip_low_high``; ``c = dual_clip_c``)."""
    q = jnp.exp(logp_old)
    low = (1.0 + jnp.sqrt(jnp.maximum(1.0 - 4.0 * hp.eps_low / q, 0.0))) / 2.0
    high = jnp.minimum((1.0 + jnp.sqrt(1.0 + 4.0 * hp.eps_high / q)) / 2.0, jnp.maximum(hp.dual_clip_c, 10.0))
    return low, high


def _dcpo_clipped(log_ratio, adv, hp, logp_old):
    """The tokens DCPO's own bounds hold: ``w > high`` with ``A > 0``, ``w < low`` with ``A < 0``."""
    low, high = dcpo_bounds(logp_old, hp)
    w = jnp.exp(log_ratio)
    return ((adv > 0) & (w > high)) | ((adv < 0) & (w < low))


@register_surrogate("dcpo", clipped=_dcpo_clipped, batch=True, clip_reads_old=True)
def dcpo(batch):
    """DCPO: PPO's clip with bounds set by each token's rollout probability, plus the dual clip.

    Dynamic Clipping Policy Optimization (Yang et al., arXiv 2509.02333), as its authors' released
    ``compute_policy_loss_dcpo`` with ``clip_type="dynamic"`` (github.com/lime-RL/DCPO,
    ``verl/trainer/ppo/core_algos.py``): with ``q = pi_old(o_t)`` the ratio is clipped to ``[low(q), high(q)]``
    (:func:`dcpo_bounds`: ``low = (1 + sqrt(max(1 - 4 eps_low / q, 0))) / 2``, ``high = (1 + sqrt(1 + 4 eps_high /
    q)) / 2`` capped at ``max(c, 10)``), so a rare token (small ``q``) may move further; for ``A < 0`` the loss is
    capped at ``-A c`` (``c = dual_clip_c``, 10 in their recipe):

        ``max(-A w, -A clip(w, low(q), high(q)))``, and ``min(that, -A c)`` where ``A < 0``.

    The paper's other part, the advantage standardised over the steps so far, is an estimator's and not here.

    Args:
      batch: a :class:`tabsim.sim.algos.batch.Batch`; reads ``log_ratio``, ``logp_old``, ``adv`` and ``hp``.
    Returns:
      ``[B, G, T]`` per-token losses.
    """
    adv, hp = batch.adv, batch.hp
    low, high = dcpo_bounds(batch.logp_old, hp)
    w = jnp.exp(batch.log_ratio)
    clipped = jnp.maximum(-adv * w, -adv * jnp.clip(w, low, high))
    return jnp.where(adv < 0, jnp.minimum(clipped, -adv * hp.dual_clip_c), clipped)



def ctpo_bounds(mask, hp):
    """CTPO's log-space bounds ``[B, G, T]`` at token position ``t`` (1-based): ``ctpo_clip_low t^p``,
    ``ctpo_clip_high t^p`` and the dual clip's ``ctpo_clip_c t^p``, ``p = ctpo_power``."""
    scale = jnp.maximum(jnp.cumsum(mask, axis=-1), 1.0) ** hp.ctpo_power
    return hp.ctpo_clip_low * scale, hp.ctpo_clip_high * scale, hp.ctpo_clip_c * scale


def _ctpo_clipped(log_ratio, adv, hp, mask):
    """The tokens CTPO's position-scaled bounds hold: ``log r > high_t`` with ``A > 0``, ``< -low_t`` with ``A < 0``."""
    low, high, _ = ctpo_bounds(mask, hp)
    return ((adv > 0) & (log_ratio > high)) | ((adv < 0) & (log_ratio < -low))


@register_surrogate("ctpo", clipped=_ctpo_clipped, batch=True, clip_reads_mask=True)
def ctpo(batch):
    """CTPO-LA: PPO's clip in log space with bounds growing as ``t^p`` along the answer, plus a position-scaled dual clip.

    Cumulative Token Policy Optimization (Zhang et al., arXiv 2605.07331), as its authors' released
    ``_compute_policy_loss_cum_token_la_impl`` (``cum-token-cumprod-la``, github.com/horizon-llm/CTPO): with ``log r``
    the ratio component's output (``cumulative`` in their method, whose log-ratio's variance grows as ``t``) and
    :func:`ctpo_bounds` ``low_t, high_t, c_t``,

        ``max(-A r, -A exp(clip(log r, -low_t, high_t)))``, and ``min(that, -A exp(c_t))`` where ``A < 0``.

    Their defaults: 0.025 / 0.05 / 0.05 with ``p = 0.5`` (at ``t = 1`` a window of about ``[0.975, 1.05]``).

    Args:
      batch: a :class:`tabsim.sim.algos.batch.Batch`; reads ``log_ratio``, ``adv``, ``mask`` and ``hp``.
    Returns:
      ``[B, G, T]`` per-token losses.
    """
    l, adv = batch.log_ratio, batch.adv
    low, high, c = ctpo_bounds(batch.mask, batch.hp)
    clipped = jnp.maximum(-adv * jnp.exp(l), -adv * jnp.exp(jnp.clip(l, -low, high)))
    return jnp.where(adv < 0, jnp.minimum(clipped, -adv * jnp.exp(c)), clipped)

def clip_fraction(log_ratio, adv, mask, hp, surrogate: str = "clip", logp_old=None):
    """Fraction of valid tokens whose PPO clip is active (the gradient is zeroed); 0 for a surrogate
    registered with ``clipped=False`` (REINFORCE, the unclipped ratio, CISPO's detached weight, SAPO's
    soft gate: every token keeps its gradient); a surrogate registered with ``clipped=active`` counts the
    tokens ``active`` marks (``active(log_ratio, adv, hp, logp_old)`` when also registered with
    ``clip_reads_old=True``: bounds set by the rollout policy, as DCPO's; ``active(log_ratio, adv, hp, mask)`` with
    ``clip_reads_mask=True``: bounds set by the token's position, as CTPO's)."""
    meta = SURROGATES.meta(surrogate)
    clipped = meta.get("clipped", True)
    if not clipped:
        return jnp.zeros((), jnp.float32)
    if callable(clipped):
        if meta.get("clip_reads_old"):
            active = clipped(log_ratio, adv, hp, logp_old)
        elif meta.get("clip_reads_mask"):
            active = clipped(log_ratio, adv, hp, mask)
        else:
            active = clipped(log_ratio, adv, hp)
    else:
        w = jnp.exp(log_ratio)
        active = ((adv > 0) & (w > 1.0 + hp.eps_high)) | ((adv < 0) & (w < 1.0 - hp.eps_low))
    return (active * mask).sum() / jnp.maximum(mask.sum(), 1.0)
