"""GRPO-family components against deliberately plain NumPy references, equivalences, conformance.

Golden comparisons run in float64 (``with jax.enable_x64(True)``) on both sides and must agree to
a float64 error bound (``TOL`` below); a float32 run would need ``rtol ~ 1e-5``. The references below are loops
written from the formulas in docs/science.md, GRPO-family semantics and the reference trainers' code, not from tabsim's code.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tabsim.sim.algos import (AGGREGATIONS, ESTIMATORS, KL_ESTIMATORS, RATIOS, SURROGATES, AlgoSpec, advantages,
                          clip_fraction, policy_loss, take_logp)
from tabsim.sim.algos import batch
from tabsim.sim.params import Hyper, stack_hypers

from f32_tolerance import f32_bound, f64_bound  # tests/core: the float error bounds
from test_tree_credit import np_gigpo as np_gigpo_loops  # tests/core: GiGPO's NumPy reference
from test_tree_credit import np_tempo as np_tempo_loops  # tests/core: TEMPO's NumPy reference

# n_ops: the longest sum, a batch's B G T = 5 * 6 * 4 = 120 tokens, times 8 for each term's own chain
# (ratio exp, clip, product, mask, normalisers); scale: the terms, |adv| <= sqrt(G) times ratios <= dual clip 3
# (rtol: the same count on a unit value); 1e-4 relative misses it by orders of magnitude
TOL = dict(rtol=f64_bound(8 * 120, 1.0), atol=f64_bound(8 * 120, 3 * math.sqrt(6)))


# ----------------------------------------------------------------------------------------------
# random inputs: B groups x G answers x T tokens, variable lengths, some padding-only rows
# ----------------------------------------------------------------------------------------------
def make_batch(seed=0, B=5, G=6, T=4, A=5, binary=True):
    rng = np.random.default_rng(seed)
    if binary:
        rewards = (rng.random((B, G)) < 0.5).astype(float)
        rewards[0] = 1.0  # a homogeneous group
        rewards[1] = 0.0  # another
    else:
        rewards = rng.normal(size=(B, G))
    lengths = rng.integers(1, T + 1, size=(B, G)).astype(float)
    mask = (np.arange(T)[None, None, :] < lengths[..., None]).astype(float)
    valid = np.ones(B)
    valid[2] = 0.0  # a group removed by the filter
    logq = np.log(rng.dirichlet(np.ones(A), size=(B, G, T)))
    logq_ref = np.log(rng.dirichlet(np.ones(A), size=(B, G, T)))
    tokens = rng.integers(0, A, size=(B, G, T))
    logp = np.take_along_axis(logq, tokens[..., None], -1)[..., 0]
    logp_ref = np.take_along_axis(logq_ref, tokens[..., None], -1)[..., 0]
    logp_old = logp + rng.normal(scale=0.3, size=logp.shape)
    adv = rng.normal(size=(B, G))
    return dict(rewards=rewards, lengths=lengths, mask=mask, valid=valid, logq=logq, logq_ref=logq_ref,
                tokens=tokens, logp=logp, logp_ref=logp_ref, logp_old=logp_old, adv=adv)


HP = dict(std_eps=1e-6, std_ddof=1.0, eps_low=0.2, eps_high=0.28, dual_clip_c=3.0, sapo_tau_pos=1.0,
          sapo_tau_neg=1.05, beta=0.04, ent_coef=0.01, baseline_shift=-0.1, sgrpo_noise=0.1)


def estimator_context(name, b):
    """The context fields estimator ``name`` declared (``reads=``), from a :func:`make_batch` batch."""
    full = all_context(b)
    return {k: full[k] for k in batch.context_reads(name)}


def all_context(b):
    """Every context field of a :func:`make_batch` batch: each prompt's reference success rate ``p0`` drawn at
    random, the others as the step computes them from the rollout."""
    rng = np.random.default_rng(int(b["tokens"].sum()))
    full = {"p0": rng.random(len(b["rewards"])), "answers": b["tokens"][..., 0],
            "prompts": np.arange(len(b["rewards"])), "seq_logp": (b["logp_old"] * b["mask"]).sum(-1),
            "seq_logp_ref": (b["logp_ref"] * b["mask"]).sum(-1),
            "entropy": (-(np.exp(b["logq"]) * b["logq"]).sum(-1) * b["mask"]).sum(-1) / b["mask"].sum(-1),
            "tokens": b["tokens"]}
    return full


def hyper(**kw):
    return Hyper(**{**HP, **kw})


# ----------------------------------------------------------------------------------------------
# plain NumPy references (loops on purpose)
# ----------------------------------------------------------------------------------------------
def np_grpo(r, lengths, valid, hp):
    B, G = r.shape
    out = np.zeros((B, G))
    for b in range(B):
        mean = sum(r[b]) / G
        var = sum((x - mean) ** 2 for x in r[b]) / (G - hp["std_ddof"])
        std = math.sqrt(var)
        for g in range(G):
            out[b, g] = 0.0 if std == 0 else (r[b, g] - mean) / (std + hp["std_eps"])
    return out


def np_dr_grpo(r, lengths, valid, hp):
    B, G = r.shape
    return np.array([[r[b, g] - sum(r[b]) / G for g in range(G)] for b in range(B)])


def np_rloo(r, lengths, valid, hp):
    B, G = r.shape
    out = np.zeros((B, G))
    for b in range(B):
        for g in range(G):
            others = [r[b, j] for j in range(G) if j != g]
            out[b, g] = r[b, g] - sum(others) / len(others)
    return out


def _np_token_whiten(x, lengths, valid):
    """verl masked_whiten over the tokens of the kept answers (each answer repeated |o| times)."""
    B, G = x.shape
    toks = [x[b, g] for b in range(B) for g in range(G) if valid[b] for _ in range(int(lengths[b, g]))]
    n = len(toks)
    mean = sum(toks) / n
    var = sum((t - mean) ** 2 for t in toks) / (n - 1)
    out = np.zeros((B, G))
    for b in range(B):
        for g in range(G):
            out[b, g] = (x[b, g] - mean) / math.sqrt(var + 1e-8) if valid[b] else 0.0
    return out


def np_reinforce_pp(r, lengths, valid, hp):
    return _np_token_whiten(r, lengths, valid)


def np_reinforce_pp_baseline(r, lengths, valid, hp):
    return _np_token_whiten(np_dr_grpo(r, lengths, valid, hp), lengths, valid)


def np_opo(r, lengths, valid, hp):
    B, G = r.shape
    out = np.zeros((B, G))
    for b in range(B):
        base = sum(lengths[b, g] * r[b, g] for g in range(G)) / sum(lengths[b])
        for g in range(G):
            out[b, g] = r[b, g] - base
    return out


def np_gpg(r, lengths, valid, hp):
    B, G = r.shape
    kept = [(b, g) for b in range(B) for g in range(G) if valid[b]]
    n = len(kept)
    m = sum(1 for b, g in kept if r[b, g] != 0)
    alpha = n / max(m, 1)
    return alpha * np_dr_grpo(r, lengths, valid, hp)


def np_passk(r, lengths, valid, hp):
    B, G = r.shape
    out = np.zeros((B, G))
    for b in range(B):
        best = 0
        for g in range(G):
            if r[b, g] > r[b, best]:
                best = g
        second = max(r[b, g] for g in range(G) if g != best)
        out[b, best] = r[b, best] - second
    return out


def np_sign(r, lengths, valid, hp):
    return 2.0 * r - 1.0


def np_batch_std(r, lengths, valid, hp):
    """Group mean, std of the kept answers' raw rewards over the whole batch (Lite PPO, arXiv 2508.08221)."""
    B, G = r.shape
    kept = [r[b, g] for b in range(B) for g in range(G) if valid[b]]
    mean = sum(kept) / len(kept)
    std = math.sqrt(sum((x - mean) ** 2 for x in kept) / (len(kept) - hp["std_ddof"]))
    centred = np_dr_grpo(r, lengths, valid, hp)
    return np.zeros((B, G)) if std == 0 else centred / (std + hp["std_eps"])


def np_mapo(r, lengths, valid, hp):
    """Certainty-weighted mix of the z-score and the percent deviation (MAPO, arXiv 2509.18849)."""
    B, G = r.shape
    z = np_grpo(r, lengths, valid, hp)
    out = np.zeros((B, G))
    for b in range(B):
        mean = sum(r[b]) / G
        if all(x == r[b, 0] for x in r[b]):
            continue
        p = sum(1 for x in r[b] if x == 1.0) / G
        w = 4 * p * (1 - p)
        for g in range(G):
            out[b, g] = w * z[b, g] + (1 - w) * (r[b, g] - mean) / (mean + hp["std_eps"])
    return out


def np_ngrpo(r, lengths, valid, hp):
    """GRPO's z-score over the G rewards and one virtual reward of 1; the real answers' advantages (NGRPO,
    arXiv 2509.18851, as its authors' compute_ngrpo_outcome_advantage)."""
    B, G = r.shape
    out = np.zeros((B, G))
    for b in range(B):
        aug = list(r[b]) + [1.0]
        mean = sum(aug) / (G + 1)
        std = math.sqrt(sum((x - mean) ** 2 for x in aug) / (G + 1 - hp["std_ddof"]))
        if std == 0:
            continue
        for g in range(G):
            out[b, g] = (r[b, g] - mean) / (std + hp["std_eps"])
    return out


def np_raft(r, lengths, valid, hp):
    return np.where(r > 0, r, 0.0)


def np_asymre(r, lengths, valid, hp):
    return np_dr_grpo(r, lengths, valid, hp) - hp["baseline_shift"]


def np_pvpo(r, lengths, valid, hp, *, p0):
    return r - p0[:, None]


def np_grpo_lead(r, lengths, valid, hp):
    """The z-score times 0.4 + 1.1 / (1 + exp(10 (x - 0.75))), x the group's correct ratio for A > 0, one minus
    it otherwise (GRPO-LEAD, arXiv 2504.09696, as its authors' logistic_reweight)."""
    z = np_grpo(r, lengths, valid, hp)
    out = np.zeros_like(z)
    for b in range(r.shape[0]):
        p = sum(1 for x in r[b] if x > 0) / r.shape[1]
        for g in range(r.shape[1]):
            x = p if z[b, g] > 0 else 1 - p
            out[b, g] = z[b, g] * (0.4 + 1.1 / (1 + math.exp(10 * (x - 0.75))))
    return out


def np_disco_b(r, lengths, valid, hp):
    """G / n+ on the rewards equal to 1, -G / n- on those equal to 0, in groups with both (DisCO-b, arXiv
    2505.12366, as its authors' compute_policy_loss_discob_logL)."""
    B, G = r.shape
    out = np.zeros((B, G))
    for b in range(B):
        n_pos, n_neg = sum(1 for x in r[b] if x == 1), sum(1 for x in r[b] if x == 0)
        if n_pos and n_neg:
            for g in range(G):
                out[b, g] = G / n_pos if r[b, g] == 1 else (-G / n_neg if r[b, g] == 0 else 0.0)
    return out


def np_edge(r, lengths, valid, hp, *, entropy):
    """The z-score times the kept answers' mean entropy over the answer's own (EDGE-GRPO, arXiv 2507.21848, as
    its authors' trainer with EDA)."""
    z = np_grpo(r, lengths, valid, hp)
    kept = [max(entropy[b, g], 1e-6) for b in range(r.shape[0]) for g in range(r.shape[1]) if valid[b]]
    mean = sum(kept) / len(kept)
    return z * mean / np.maximum(entropy, 1e-6)


def np_s_grpo(r, lengths, valid, hp):
    """The z-score times w*(n, k, p) (S-GRPO, arXiv 2508.05928, as its authors' group_weight)."""
    z = np_grpo(r, lengths, valid, hp)
    n, p = r.shape[1], hp["sgrpo_noise"]
    out = np.zeros_like(z)
    for b in range(r.shape[0]):
        q = sum(1 for x in r[b] if x > 0) / n
        t = min(1.0, max(0.0, (q - p) / (1 - 2 * p)))
        w = (1 - 2 * p) * t * (1 - t) / (math.sqrt(q * (1 - q) + 1e-8) * math.sqrt(t * (1 - t) + 1e-8))
        out[b] = z[b] * w
    return out


def np_gigpo(r, lengths, valid, hp, tokens):
    """GiGPO (arXiv 2505.10978), per token: the authors' loops in tests/core/test_tree_credit.py."""
    return np_gigpo_loops(r, lengths, tokens)


def np_gigpo_std(r, lengths, valid, hp, tokens):
    return np_gigpo_loops(r, lengths, tokens, std=True)


def np_tempo(r, lengths, valid, hp, tokens):
    """TEMPO (arXiv 2509.18314), per token: the authors' loops in tests/core/test_tree_credit.py."""
    return np_tempo_loops(r, lengths, tokens, ddof=int(hp["std_ddof"]), eps=hp["std_eps"])


NP_ESTIMATORS = {"grpo": np_grpo, "dr_grpo": np_dr_grpo, "rloo": np_rloo, "reinforce_pp": np_reinforce_pp,
                 "reinforce_pp_baseline": np_reinforce_pp_baseline, "opo": np_opo, "gpg": np_gpg,
                 "passk": np_passk, "sign": np_sign, "batch_std": np_batch_std,
                 "mapo": np_mapo, "ngrpo": np_ngrpo, "raft": np_raft, "asymre": np_asymre, "pvpo": np_pvpo,
                 "grpo_lead": np_grpo_lead, "disco_b": np_disco_b, "edge": np_edge, "s_grpo": np_s_grpo,
                 "gigpo": np_gigpo, "gigpo_std": np_gigpo_std, "tempo": np_tempo}


def np_bnpo(r, lengths, valid, hp):
    """BNPO (arXiv 2506.02864) as its authors' compute_bnpo_outcome_advantage: p = group mean; a, b from the mean and
    unbiased variance of the kept groups' p; Beta(max(1 + a/3, 1), max(1 + b/3, 1)); A = min(1/pdf(p), 1e6) (r - p)."""
    from scipy.stats import beta as beta_dist
    p = r.mean(-1)
    kept = p[valid > 0]
    m, v = (kept.mean(), kept.var(ddof=1)) if len(kept) > 1 else (0.0, 1.0)
    k = m * (1 - m) / v - 1 if v > 0 else 0.0  # tabsim's guard: v = 0 (NaN there) gives alpha = beta = 1
    al, be = max(1 + k * m / 3, 1.0), max(1 + k * (1 - m) / 3, 1.0)
    out = np.zeros_like(r)
    for i in range(r.shape[0]):
        dens = beta_dist.pdf(p[i], al, be)
        out[i] = min(1 / dens if dens > 0 else np.inf, 1e6) * (r[i] - p[i])
    return out


NP_ESTIMATORS["bnpo"] = np_bnpo


def np_ratio_token(logp, logp_old, mask):
    return (logp - logp_old) * mask


def np_ratio_sequence(logp, logp_old, mask):
    B, G, T = logp.shape
    out = np.zeros_like(logp)
    for b in range(B):
        for g in range(G):
            n = sum(mask[b, g])
            s = sum((logp[b, g, t] - logp_old[b, g, t]) for t in range(T) if mask[b, g, t]) / max(n, 1)
            for t in range(T):
                out[b, g, t] = s if mask[b, g, t] else 0.0
    return out


def np_ratio_sequence_sum(logp, logp_old, mask):
    B, G, T = logp.shape
    out = np.zeros_like(logp)
    for b in range(B):
        for g in range(G):
            s = sum((logp[b, g, t] - logp_old[b, g, t]) for t in range(T) if mask[b, g, t])
            for t in range(T):
                out[b, g, t] = s if mask[b, g, t] else 0.0
    return out


def np_ratio_cumulative(logp, logp_old, mask):
    """CTPO's cumulative log-ratio: the running sum of each answer's clamped token log-ratios, at most 10."""
    out = np.zeros_like(logp)
    for b, g in np.ndindex(logp.shape[:2]):
        total = 0.0
        for t in range(logp.shape[2]):
            total += min(max(logp[b, g, t] - logp_old[b, g, t], -20.0), 20.0) * mask[b, g, t]
            out[b, g, t] = min(total, 10.0) * mask[b, g, t]
    return out


def np_ratio_holder(logp, logp_old, mask, p=1.0):
    """HölderPO's ratio as the authors' trainer computes it: ``log ((1/|o|) sum_t w_t^p)^(1/p)`` per answer, the
    mean log-ratio (geometric mean) for ``|p| < 1e-6``; ``p = 1`` is Hyper's default."""
    out = np.zeros_like(logp)
    for b, g in np.ndindex(logp.shape[:2]):
        ls = [logp[b, g, t] - logp_old[b, g, t] for t in range(logp.shape[2]) if mask[b, g, t]]
        if not ls:
            continue
        if abs(p) < 1e-6:
            s = sum(ls) / len(ls)
        else:
            s = math.log(sum(math.exp(p * x) for x in ls) / len(ls)) / p
        for t in range(logp.shape[2]):
            out[b, g, t] = s if mask[b, g, t] else 0.0
    return out


NP_RATIOS = {"token": np_ratio_token, "sequence": np_ratio_sequence, "sequence-sum": np_ratio_sequence_sum,
             "cumulative": np_ratio_cumulative, "holder": np_ratio_holder}


def _sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x))


def _clip(x, lo, hi):
    return min(max(x, lo), hi)


# Each surrogate reference returns (loss, d loss / d log_ratio, d loss / d logp) for one token.
def np_clip_tok(l, lp, a, hp):
    w = math.exp(l)
    unclipped, clipped = -a * w, -a * _clip(w, 1 - hp["eps_low"], 1 + hp["eps_high"])
    return (unclipped, -a * w, 0.0) if unclipped >= clipped else (clipped, 0.0, 0.0)


def np_dual_clip_tok(l, lp, a, hp):
    loss, dl, dp = np_clip_tok(l, lp, a, hp)
    if a < 0 and -a * hp["dual_clip_c"] < loss:
        return -a * hp["dual_clip_c"], 0.0, 0.0
    return loss, dl, dp


def np_cispo_tok(l, lp, a, hp):
    wc = _clip(math.exp(l), 1 - hp["eps_low"], 1 + hp["eps_high"])
    return -wc * a * lp, 0.0, -wc * a  # the weight is a constant (stop-gradient)


def np_sapo_tok(l, lp, a, hp):
    tau = hp["sapo_tau_pos"] if a > 0 else hp["sapo_tau_neg"]
    w = math.exp(l)
    s = _sigmoid(tau * (w - 1.0))
    return -a * 4.0 / tau * s, -a * 4.0 * s * (1.0 - s) * w, 0.0


def np_importance_tok(l, lp, a, hp):
    w = math.exp(l)
    return -a * w, -a * w, 0.0


def np_reinforce_tok(l, lp, a, hp):
    return -a * lp, 0.0, -a


def np_spo_tok(l, lp, a, hp):
    eps = hp["eps_high"] if a > 0 else hp["eps_low"]
    w = math.exp(l)
    return -(a * w - abs(a) * (w - 1) ** 2 / (2 * eps)), -(a * w - abs(a) * (w - 1) * w / eps), 0.0


# REC (arXiv 2509.24203) as Trinity-RFT's RECPolicyLossFn computes it: the ratio w is detached, so the gradient
# flows through logp alone; is_in_range sums two 0/1 terms for one-side (both hold only where A = 0)
def _rec_in_range(w, a, hp, mode):
    if mode == "one-side":
        return float(w <= 1 + hp["eps_high"]) * (a >= 0) + (a <= 0) * float(w >= 1 - hp["eps_low"])
    return float((w >= 1 - hp["eps_low"]) and (w <= 1 + hp["eps_high"]))


def np_rec_oneside_nois_tok(l, lp, a, hp):
    m = _rec_in_range(math.exp(l), a, hp, "one-side")
    return -a * lp * m, 0.0, -a * m


def np_rec_twoside_nois_tok(l, lp, a, hp):
    m = _rec_in_range(math.exp(l), a, hp, "two-side")
    return -a * lp * m, 0.0, -a * m


def np_rec_twoside_is_tok(l, lp, a, hp):
    w = math.exp(l)
    m = _rec_in_range(w, a, hp, "two-side")
    return -a * w * lp * m, 0.0, -a * w * m


def np_opmd_tok(l, lp, a, hp):  # Trinity-RFT's rec with regularizer k2: -A logp + c (logp - logp_old)^2
    c = hp.get("opmd_coef", 0.1)
    return -a * lp + c * l * l, 2 * c * l, -a


NP_SURROGATES = {"clip": np_clip_tok, "dual_clip": np_dual_clip_tok, "cispo": np_cispo_tok, "sapo": np_sapo_tok,
                 "importance": np_importance_tok, "reinforce": np_reinforce_tok, "spo": np_spo_tok,
                 "rec_oneside_nois": np_rec_oneside_nois_tok, "rec_twoside_nois": np_rec_twoside_nois_tok,
                 "rec_twoside_is": np_rec_twoside_is_tok, "opmd": np_opmd_tok}


# Each answer-level surrogate reference returns (the answer's loss, d loss / d log_ratio of each token) for one
# answer: its token log-ratios l, mask m and advantage a.
def np_gmpo_answer(l, m, a, hp):
    n, total, grad = max(sum(m), 1.0), 0.0, []
    for lt, mt in zip(l, m):
        held, d = lt, 1.0
        if a > 0 and lt > hp["eps_high"]:
            held, d = hp["eps_high"], 0.0
        elif a < 0 and lt < -hp["eps_low"]:
            held, d = -hp["eps_low"], 0.0
        elif a == 0:
            held, d = 0.0, 0.0
        total += held * mt
        grad.append(d * mt)
    loss = -a * math.exp(total / n)
    return loss, [loss * g / n for g in grad]


NP_ANSWER_SURROGATES = {"gmpo": np_gmpo_answer}


# Each batch surrogate reference returns (per-token losses [B, G, T], d sum(loss) / d logp [B, G, T]) for the whole
# batch (log-ratios logp - logp_old), as the loss reads more than one answer.
def np_gvpo_batch(logp, logp_old, mask, adv, hp):
    B, G, T = logp.shape
    beta = hp["gvpo_beta"]
    loss, grad = np.zeros((B, G, T)), np.zeros((B, G, T))
    for b in range(B):
        s = [beta * sum((logp[b, i, t] - logp_old[b, i, t]) * mask[b, i, t] for t in range(T)) for i in range(G)]
        gap = [s[i] - sum(s) / G - adv[b, i] for i in range(G)]
        n = [sum(mask[b, i]) for i in range(G)]  # the copies of each answer's loss in the masked sum
        for i in range(G):
            d = n[i] * gap[i] - sum(n[j] * gap[j] for j in range(G)) / G
            for t in range(T):
                loss[b, i, t] = 0.5 * gap[i] ** 2
                grad[b, i, t] = d * beta * mask[b, i, t]
    return loss, grad


def np_kl_cov_batch(logp, logp_old, mask, adv, hp):
    """verl's compute_policy_loss_kl_cov as a loop: the valid tokens in order, their covariance, the top
    max(1, int(n ratio)) (ties to the earlier token), -A w, plus coef |l| on those."""
    idx = [i for i in np.ndindex(logp.shape) if mask[i] > 0]
    a = [adv[i[:2]] for i in idx]
    lp = [logp[i] for i in idx]
    ma, ml = sum(a) / len(idx), sum(lp) / len(idx)
    cov = [(x - ma) * (y - ml) for x, y in zip(a, lp)]
    k = max(1, int(len(idx) * hp["kl_cov_ratio"]))
    top = {idx[j] for j in sorted(range(len(idx)), key=lambda j: (-cov[j], j))[:k]}
    loss, grad = np.zeros(logp.shape), np.zeros(logp.shape)
    for i in np.ndindex(logp.shape):
        l, A = logp[i] - logp_old[i], adv[i[:2]]
        loss[i] = -A * math.exp(l)
        grad[i] = -A * math.exp(l)
        if i in top:
            loss[i] += hp["kl_cov_coef"] * abs(l)
            grad[i] += hp["kl_cov_coef"] * np.sign(l)
    return loss, grad


def np_disco_batch(logp, logp_old, mask, adv, hp):
    """The released compute_policy_loss_disco_logL (kl type 'kl') as loops: its gradient, and its value with the
    log-mean-exp where the released forward pass holds tau."""
    B, G, T = logp.shape
    tau, N = hp["disco_tau"], mask.sum()
    n = mask.sum(-1)
    s = [[sum(logp[b, i] * mask[b, i]) / max(n[b, i], 1.0) for i in range(G)] for b in range(B)]
    kl = sum((logp_old[i] - logp[i]) * mask[i] for i in np.ndindex(logp.shape)) / N
    c = max(hp["disco_beta"] * (kl - hp["disco_delta"]), 0.0)
    objective, d_s = 0.0, np.zeros((B, G))  # d objective / d s
    for b in range(B):
        pos = [i for i in range(G) if adv[b, i] > 0 and n[b, i] > 0]
        neg = [i for i in range(G) if adv[b, i] < 0 and n[b, i] > 0]
        if not pos or not neg:
            continue
        e = [math.exp(s[b][j] / tau) for j in neg]
        objective += (sum(s[b][i] for i in pos) / len(pos) - tau * math.log(sum(e) / len(e))) / B
        for i in pos:
            d_s[b, i] += 1.0 / (len(pos) * B)
        for j, ej in zip(neg, e):
            d_s[b, j] -= ej / sum(e) / B
    loss = np.full(logp.shape, -objective + c * kl)
    grad = np.zeros(logp.shape)  # of the token-mean of loss: d(-objective + c kl) / d logp
    for b, i, t in np.ndindex(logp.shape):
        grad[b, i, t] = (-d_s[b, i] / max(n[b, i], 1.0) - c / N) * mask[b, i, t] * N  # summed over N copies
    return loss, grad


def np_dcpo_batch(logp, logp_old, mask, adv, hp):
    """The released compute_policy_loss_dcpo with clip_type "dynamic", token by token: bounds from q = p_old."""
    loss, grad = np.zeros(logp.shape), np.zeros(logp.shape)
    for i in np.ndindex(logp.shape):
        q, A, w = math.exp(logp_old[i]), adv[i[:2]], math.exp(logp[i] - logp_old[i])
        low = (1 + math.sqrt(max(1 - 4 * hp["eps_low"] / q, 0.0))) / 2
        high = min((1 + math.sqrt(1 + 4 * hp["eps_high"] / q)) / 2, max(hp["dual_clip_c"], 10.0))
        free, held = -A * w, -A * min(max(w, low), high)
        value, d = (free, -A * w) if free >= held else (held, 0.0)
        if A < 0 and -A * hp["dual_clip_c"] < value:
            value, d = -A * hp["dual_clip_c"], 0.0
        loss[i], grad[i] = value, d * mask[i]
    return loss, grad


def np_real_batch(logp, logp_old, mask, adv, hp):
    """The released compute_policy_loss_real as loops: log(1 + sum_neg e^(s/tau)) + log(1 + sum_pos e^(-s/tau)) per
    group with both classes, s the answer's mean token log-ratio, summed / B; its gradient through each score."""
    B, G, T = logp.shape
    tau, n = hp["real_tau"], mask.sum(-1)
    total, d_s = 0.0, np.zeros((B, G))
    for b in range(B):
        s = [sum((logp[b, i] - logp_old[b, i]) * mask[b, i]) / max(n[b, i], 1.0) for i in range(G)]
        pos = [i for i in range(G) if adv[b, i] > 0 and n[b, i] > 0]
        neg = [i for i in range(G) if adv[b, i] < 0 and n[b, i] > 0]
        if not pos or not neg:
            continue
        zn = 1 + sum(math.exp(s[j] / tau) for j in neg)
        zp = 1 + sum(math.exp(-s[i] / tau) for i in pos)
        total += (math.log(zn) + math.log(zp)) / B
        for j in neg:
            d_s[b, j] += math.exp(s[j] / tau) / zn / tau / B
        for i in pos:
            d_s[b, i] -= math.exp(-s[i] / tau) / zp / tau / B
    grad = np.zeros(logp.shape)  # of the masked sum of the broadcast loss: each answer's score over its tokens
    N = mask.sum()
    for b, i, t in np.ndindex(logp.shape):
        grad[b, i, t] = N * d_s[b, i] / max(n[b, i], 1.0) * mask[b, i, t]
    return np.full(logp.shape, total), grad


def np_ctpo_batch(logp, logp_old, mask, adv, hp):
    """The released CTPO-LA loss token by token (log-ratio given): bounds times t^p, t the token's 1-based position."""
    loss, grad = np.zeros(logp.shape), np.zeros(logp.shape)
    for b, g in np.ndindex(logp.shape[:2]):
        pos = 0.0
        for t in range(logp.shape[2]):
            pos += mask[b, g, t]
            scale = max(pos, 1.0) ** hp["ctpo_power"]
            low, high, c = hp["ctpo_clip_low"] * scale, hp["ctpo_clip_high"] * scale, hp["ctpo_clip_c"] * scale
            A, l = adv[b, g], (logp[b, g, t] - logp_old[b, g, t]) * mask[b, g, t]
            free, held = -A * math.exp(l), -A * math.exp(min(max(l, -low), high))
            value, d = (free, -A * math.exp(l)) if free >= held else (held, 0.0)
            if A < 0 and -A * math.exp(c) < value:
                value, d = -A * math.exp(c), 0.0
            loss[b, g, t], grad[b, g, t] = value, d * mask[b, g, t]
    return loss, grad


def np_clip_cov_batch(logp, logp_old, mask, adv, hp, uniforms=None):
    """verl's compute_policy_loss_clip_cov step by step: PPO's two losses, the tokens the clip holds, the masked
    covariance with -inf on padding and held tokens, clip_num = max(int(ratio n), 1), the candidates in the band in
    torch.nonzero's (row-major) order, randperm as the order of the candidates' uniforms (none: their own order),
    the first min(clip_num, count) cut (corr = 0); the gradient of max(pg1, pg2) corr with respect to logp."""
    a = np.broadcast_to(adv[..., None], logp.shape)
    ratio = np.exp(logp - logp_old)
    pg1, pg2 = -a * ratio, -a * np.clip(ratio, 1.0 - hp["eps_low"], 1.0 + hp["eps_high"])
    held = (pg2 > pg1) & (mask > 0)
    n = mask.sum()
    cov = (a - (a * mask).sum() / n) * (logp - (logp * mask).sum() / n)
    cov[mask == 0] = -np.inf
    cov[held] = -np.inf
    clip_num = max(int(hp["clip_cov_ratio"] * n), 1)
    idx = [i for i in np.ndindex(logp.shape) if hp["clip_cov_lb"] < cov[i] < hp["clip_cov_ub"] and mask[i] > 0]
    perm = list(range(len(idx))) if uniforms is None else sorted(range(len(idx)), key=lambda j: uniforms[idx[j]])
    cut = {idx[j] for j in perm[:min(clip_num, len(idx))]}
    loss, grad = np.zeros(logp.shape), np.zeros(logp.shape)
    for i in np.ndindex(logp.shape):
        corr = 0.0 if i in cut else 1.0
        loss[i] = max(pg1[i], pg2[i]) * corr
        inside = 1.0 - hp["eps_low"] <= ratio[i] <= 1.0 + hp["eps_high"]
        grad[i] = (-a[i] * ratio[i] if pg1[i] >= pg2[i] or inside else 0.0) * corr
    return loss, grad


def np_drpo_batch(logp, logp_old, mask, adv, hp):
    """The released compute_policy_loss_drpo (kl type 'kl') as loops: length ratio = tokens / padded width, weight
    exp((1 - ratio) / Lambda), per group sum_pos weight (s - tau lme) / sum_pos weight; its gradient, and its value
    with the log-mean-exp where the released forward pass holds tau."""
    B, G, T = logp.shape
    tau, lam, N = hp["disco_tau"], hp["drpo_lambda"], mask.sum()
    n = mask.sum(-1)
    s = [[sum(logp[b, i] * mask[b, i]) / max(n[b, i], 1.0) for i in range(G)] for b in range(B)]
    kl = sum((logp_old[i] - logp[i]) * mask[i] for i in np.ndindex(logp.shape)) / N
    c = max(hp["disco_beta"] * (kl - hp["disco_delta"]), 0.0)
    objective, d_s = 0.0, np.zeros((B, G))
    for b in range(B):
        pos = [i for i in range(G) if adv[b, i] > 0 and n[b, i] > 0]
        neg = [i for i in range(G) if adv[b, i] < 0 and n[b, i] > 0]
        if not pos or not neg:
            continue
        e = [math.exp(s[b][j] / tau) for j in neg]
        lme = tau * math.log(sum(e) / len(e))
        w = {i: math.exp((1.0 - n[b, i] / T) / lam) for i in pos}
        objective += sum(w[i] * (s[b][i] - lme) for i in pos) / sum(w.values()) / B
        for i in pos:
            d_s[b, i] += w[i] / sum(w.values()) / B
        for j, ej in zip(neg, e):
            d_s[b, j] -= ej / sum(e) / B
    loss = np.full(logp.shape, -objective + c * kl)
    grad = np.zeros(logp.shape)
    for b, i, t in np.ndindex(logp.shape):
        grad[b, i, t] = (-d_s[b, i] / max(n[b, i], 1.0) - c / N) * mask[b, i, t] * N
    return loss, grad


NP_BATCH_SURROGATES = {"gvpo": np_gvpo_batch, "kl_cov": np_kl_cov_batch, "disco": np_disco_batch,
                       "dcpo": np_dcpo_batch, "real": np_real_batch, "ctpo": np_ctpo_batch,
                       "clip_cov": np_clip_cov_batch, "drpo": np_drpo_batch}


def np_token_mean(loss, mask):
    num = den = 0.0
    for idx in np.ndindex(loss.shape):
        num += loss[idx] * mask[idx]
        den += mask[idx]
    return num / max(den, 1.0)


def _per_seq(loss, mask):
    B, G, T = loss.shape
    rows = []
    for b in range(B):
        for g in range(G):
            n = sum(mask[b, g])
            s = sum(loss[b, g, t] * mask[b, g, t] for t in range(T))
            rows.append((b, g, s, n))
    return rows


def np_seq_mean_token_mean(loss, mask):
    rows = [s / n for _, _, s, n in _per_seq(loss, mask) if n > 0]
    return sum(rows) / max(len(rows), 1)


def np_seq_mean_token_sum(loss, mask):
    rows = [s for _, _, s, n in _per_seq(loss, mask) if n > 0]
    return sum(rows) / max(len(rows), 1)


def np_seq_mean_token_sum_norm(loss, mask):
    rows = [s for _, _, s, n in _per_seq(loss, mask) if n > 0]
    return sum(rows) / max(len(rows) * loss.shape[-1], 1)


def np_group_sum(loss, mask):
    B, G, _ = loss.shape
    total = 0.0
    for b, g, s, n in _per_seq(loss, mask):
        total += (s / max(n, 1)) / G
    return total


def np_balanced(loss, mask, adv):
    """Per group: each sign's token losses averaged over that sign's tokens, weighted by its answers / the group's
    answers; the mean over the groups with a token."""
    B, G, T = loss.shape
    groups = []
    for b in range(B):
        answers = [g for g in range(G) if sum(mask[b, g]) > 0]
        if not answers:
            continue
        total = 0.0
        for side in ([g for g in answers if adv[b, g] > 0], [g for g in answers if adv[b, g] < 0]):
            num = sum(loss[b, g, t] * mask[b, g, t] for g in side for t in range(T))
            den = sum(mask[b, g, t] for g in side for t in range(T))
            total += len(side) / len(answers) * num / max(den, 1.0)
        groups.append(total)
    return sum(groups) / max(len(groups), 1)


NP_AGGREGATIONS = {"token-mean": np_token_mean, "seq-mean-token-mean": np_seq_mean_token_mean,
                   "seq-mean-token-sum": np_seq_mean_token_sum, "seq-mean-token-sum-norm": np_seq_mean_token_sum_norm,
                   "group-sum": np_group_sum, "balanced": np_balanced}
SIGN_AGGREGATIONS = {"balanced"}  # their references also read the advantages


def np_kl(name, lp, lr, q, q_ref):
    """One token: sampled log-probs ``lp``/``lr`` and full log distributions ``q``/``q_ref`` [A]."""
    d = lp - lr
    if name == "k1":
        return d
    if name == "k2":
        return 0.5 * d * d
    if name == "k3":
        return math.exp(-d) + d - 1.0
    if name == "low_var_kl":  # verl kl_penalty: log-ratio clamped to [-20, 20], value to [-10, 10]
        d = min(max(d, -20.0), 20.0)
        return min(max(math.exp(-d) + d - 1.0, -10.0), 10.0)
    if name == "exact":
        return sum(math.exp(q[a]) * (q[a] - q_ref[a]) for a in range(len(q)))
    if name == "ref_ce":
        return -sum(math.exp(q_ref[a]) * q[a] for a in range(len(q)))
    raise KeyError(name)


NP_KL = {n: n for n in ("k1", "k2", "k3", "low_var_kl", "exact", "ref_ce")}


# ----------------------------------------------------------------------------------------------
# golden comparisons (float64)
# ----------------------------------------------------------------------------------------------
def test_every_registered_component_has_a_numpy_reference():
    assert set(ESTIMATORS) == set(NP_ESTIMATORS)
    assert set(RATIOS) == set(NP_RATIOS)
    assert set(SURROGATES) == set(NP_SURROGATES) | set(NP_ANSWER_SURROGATES) | set(NP_BATCH_SURROGATES)
    assert set(AGGREGATIONS) == set(NP_AGGREGATIONS)
    assert set(KL_ESTIMATORS) == set(NP_KL)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
@pytest.mark.parametrize("binary", [True, False])
@pytest.mark.parametrize("ddof,eps", [(0, 1e-8), (1, 1e-4), (1, 0.0)])
def test_estimator_matches_numpy(name, binary, ddof, eps):
    b = make_batch(seed=ddof * 7 + int(binary), binary=binary)
    hp = dict(HP, std_ddof=float(ddof), std_eps=eps)
    context = estimator_context(name, b)
    want = NP_ESTIMATORS[name](b["rewards"], b["lengths"], b["valid"], hp, **context)
    with jax.enable_x64(True):
        got = batch.estimate(name, jnp.asarray(b["rewards"]), lengths=jnp.asarray(b["lengths"]),
                             valid=jnp.asarray(b["valid"]), hp=hyper(**{"std_ddof": float(ddof), "std_eps": eps}),
                             context={k: jnp.asarray(v) for k, v in context.items()})
        assert got.dtype == jnp.float64
    np.testing.assert_allclose(np.asarray(got), want, **TOL)


@pytest.mark.parametrize("name", ["grpo", "dr_grpo", "rloo", "opo", "gpg"])
def test_zero_variance_groups_get_zero_advantage(name):
    b = make_batch(seed=3)
    with jax.enable_x64(True):
        got = ESTIMATORS[name](jnp.asarray(b["rewards"]), lengths=jnp.asarray(b["lengths"]),
                               valid=jnp.asarray(b["valid"]), hp=hyper(std_eps=0.0))
    assert np.all(np.asarray(got)[:2] == 0.0)  # rows 0 and 1 are homogeneous
    assert np.isfinite(np.asarray(got)).all()


@pytest.mark.parametrize("name", sorted(RATIOS))
def test_ratio_matches_numpy(name):
    b = make_batch(seed=11)
    want = NP_RATIOS[name](b["logp"], b["logp_old"], b["mask"])
    with jax.enable_x64(True):
        got = batch.ratio(name, jnp.asarray(b["logp"]), jnp.asarray(b["logp_old"]), jnp.asarray(b["mask"]),
                          hp=hyper())
    np.testing.assert_allclose(np.asarray(got), want, **TOL)


@pytest.mark.parametrize("name", sorted(NP_SURROGATES))
def test_surrogate_value_and_gradient_match_numpy(name):
    b = make_batch(seed=12)
    l = b["logp"] - b["logp_old"]
    lp, a = b["logp"], b["adv"][..., None] * np.ones_like(l)
    ref = np.array([NP_SURROGATES[name](l[i], lp[i], a[i], HP) for i in np.ndindex(l.shape)]).reshape(l.shape + (3,))
    with jax.enable_x64(True):
        fn = SURROGATES[name]
        hp = hyper()
        args = (jnp.asarray(l), jnp.asarray(lp), jnp.asarray(b["adv"][..., None]))
        loss = fn(*args, hp)
        g_l, g_p = jax.grad(lambda x, y: fn(x, y, args[2], hp).sum(), argnums=(0, 1))(args[0], args[1])
    np.testing.assert_allclose(np.asarray(loss), ref[..., 0], **TOL)
    np.testing.assert_allclose(np.asarray(g_l), ref[..., 1], **TOL)
    np.testing.assert_allclose(np.asarray(g_p), ref[..., 2], **TOL)


@pytest.mark.parametrize("name", sorted(NP_ANSWER_SURROGATES))
def test_answer_level_surrogate_value_and_gradient_match_numpy(name):
    """A surrogate of the whole answer (it reads the mask): every token holds the answer's loss."""
    b = make_batch(seed=12)
    l, mask, adv = (b["logp"] - b["logp_old"]) * b["mask"], b["mask"], b["adv"]
    hp = dict(HP, eps_low=0.15, eps_high=0.2)  # log-space bounds the batch's log-ratios cross on both sides
    ref = [NP_ANSWER_SURROGATES[name](l[i], mask[i], adv[i], hp) for i in np.ndindex(adv.shape)]
    with jax.enable_x64(True):
        def loss(x):
            return batch.surrogate(name, x, jnp.asarray(b["logp"]), jnp.asarray(adv[..., None]), hyper(**hp),
                                   mask=jnp.asarray(mask))

        got = loss(jnp.asarray(l))
        grad = jax.grad(lambda x: loss(x)[..., 0].sum())(jnp.asarray(l))
    np.testing.assert_allclose(np.asarray(got), np.array([r[0] for r in ref]).reshape(adv.shape)[..., None]
                               * np.ones_like(l), **TOL)
    np.testing.assert_allclose(np.asarray(grad), np.array([r[1] for r in ref]).reshape(l.shape), **TOL)
    held = np.array([g == 0 and m > 0 for r, mm in zip(ref, mask.reshape(-1, l.shape[-1])) for g, m in zip(r[1], mm)])
    assert 0.05 < held.mean() < 0.95  # clipped and free tokens both compared



@pytest.mark.parametrize("name", sorted(NP_BATCH_SURROGATES))
def test_batch_surrogate_value_and_gradient_match_numpy(name):
    """A surrogate of the whole batch (GVPO's group centring, KL-Cov's batch-wide ranking): per-token losses and
    the gradient of their sum with respect to logp (the token log-ratio logp - logp_old moves with it)."""
    b = make_batch(seed=12)
    mask = b["mask"] * b["valid"][:, None, None]
    # 10% of ~60 tokens: 5 penalised; DisCO's KL budget below the batch's mean log-ratio KL (-0.027): its constraint acts
    hp = dict(HP, gvpo_beta=0.3, kl_cov_ratio=0.1, kl_cov_coef=0.7, disco_tau=2.0, disco_delta=-0.1, disco_beta=3.0,
              real_tau=0.5, ctpo_clip_low=0.1, ctpo_clip_high=0.15, ctpo_clip_c=0.3, ctpo_power=0.5,
              clip_cov_ratio=0.05, clip_cov_lb=0.05, clip_cov_ub=1.0,  # Clip-Cov: 3 of the band's 13 tokens cut
              drpo_lambda=0.3)
    want, want_grad = NP_BATCH_SURROGATES[name](b["logp"], b["logp_old"], mask, b["adv"], hp)
    with jax.enable_x64(True):
        old, adv, m = (jnp.asarray(b[k]) for k in ("logp_old", "adv", "mask"))
        m = jnp.asarray(mask)

        def loss(lp):
            return batch.surrogate(name, (lp - old) * m, lp, adv[..., None], hyper(**hp), mask=m, logp_old=old)

        got = jax.jit(loss)(jnp.asarray(b["logp"]))  # compiled: eagerly, each operation is compiled on its own
        grad = jax.jit(jax.grad(lambda lp: (loss(lp) * m).sum()))(jnp.asarray(b["logp"]))
    np.testing.assert_allclose(np.asarray(got) * mask, want * mask, **TOL)
    np.testing.assert_allclose(np.asarray(grad), want_grad * mask, **TOL)


def test_gmpo_by_hand():
    """Two tokens with log-ratios (0.1, 0.6) and A = 1: the second is held at 0.4, so -exp(0.25); with
    (-0.6, 0.1) and A = -1 the first is held at -0.4, so +exp(-0.15); eps 0.4 in log space."""
    l = jnp.asarray([[[0.1, 0.6], [-0.6, 0.1]]])
    adv = jnp.asarray([[[1.0], [-1.0]]])
    mask = jnp.ones_like(l)
    got = batch.surrogate("gmpo", l, l, adv, hyper(eps_low=0.4, eps_high=0.4), mask=mask)
    np.testing.assert_allclose(np.asarray(got)[0, :, 0], [-1.2840254166877414, 0.8607079764250578], rtol=1e-6)
    frac = clip_fraction(l, adv, mask, hyper(eps_low=0.4, eps_high=0.4), "gmpo")
    assert float(frac) == 0.5  # the two held tokens of four


def test_surrogate_inputs_exercise_every_clip_branch():
    """The random inputs above reach both clip bounds and the dual clip, so the branches are tested."""
    b = make_batch(seed=12)
    w = np.exp(b["logp"] - b["logp_old"])
    a = b["adv"][..., None] * np.ones_like(w)
    assert ((a > 0) & (w > 1 + HP["eps_high"])).any() and ((a < 0) & (w < 1 - HP["eps_low"])).any()
    assert ((a > 0) & (w < 1)).any() and ((a < 0) & (w > 1)).any()
    b2 = make_batch(seed=12)
    b2["logp_old"] = b2["logp"] - 1.5  # ratios e^1.5 > 3: the dual clip binds for A < 0
    l = b2["logp"] - b2["logp_old"]
    losses = np.array([np_dual_clip_tok(l[i], 0.0, a[i], HP)[0] for i in np.ndindex(l.shape)]).reshape(l.shape)
    with jax.enable_x64(True):
        got = SURROGATES["dual_clip"](jnp.asarray(l), jnp.asarray(b2["logp"]), jnp.asarray(b2["adv"][..., None]),
                                      hyper())
    np.testing.assert_allclose(np.asarray(got), losses, **TOL)
    assert np.any(np.isclose(losses, -a * HP["dual_clip_c"]) & (a < 0))


@pytest.mark.parametrize("name", sorted(AGGREGATIONS))
def test_aggregation_matches_numpy(name):
    b = make_batch(seed=13)
    rng = np.random.default_rng(0)
    loss = rng.normal(size=b["mask"].shape)
    mask = b["mask"] * b["valid"][:, None, None]  # a fully masked (filtered) group
    adv = b["adv"].copy()
    adv[3, :2] = 0.0  # answers in neither sign
    want = NP_AGGREGATIONS[name](loss, mask, *([adv] if name in SIGN_AGGREGATIONS else []))
    with jax.enable_x64(True):
        got = batch.aggregate(name, jnp.asarray(loss), jnp.asarray(mask), adv=jnp.asarray(adv), hp=hyper())
    np.testing.assert_allclose(float(got), want, **TOL)


@pytest.mark.parametrize("name", sorted(KL_ESTIMATORS))
def test_kl_matches_numpy(name):
    b = make_batch(seed=14)
    want = np.array([np_kl(name, b["logp"][i], b["logp_ref"][i], b["logq"][i], b["logq_ref"][i])
                     for i in np.ndindex(b["logp"].shape)]).reshape(b["logp"].shape)
    with jax.enable_x64(True):
        got = KL_ESTIMATORS[name](jnp.asarray(b["logp"]), jnp.asarray(b["logp_ref"]), jnp.asarray(b["logq"]),
                                  jnp.asarray(b["logq_ref"]))
    np.testing.assert_allclose(np.asarray(got), want, **TOL)


def test_full_policy_loss_matches_numpy():
    """The whole composition: clip surrogate + k3 KL in the loss - entropy, seq-mean-token-mean."""
    b = make_batch(seed=15)
    mask = b["mask"] * b["valid"][:, None, None]
    l = b["logp"] - b["logp_old"]
    tok = np.zeros_like(l)
    kl = np.zeros_like(l)
    ent = np.zeros_like(l)
    for i in np.ndindex(l.shape):
        tok[i] = np_clip_tok(l[i], b["logp"][i], b["adv"][i[:2]], HP)[0]
        kl[i] = np_kl("k3", b["logp"][i], b["logp_ref"][i], b["logq"][i], b["logq_ref"][i])
        ent[i] = -sum(math.exp(x) * x for x in b["logq"][i])
    agg = np_seq_mean_token_mean
    want = agg(tok, mask) + HP["beta"] * agg(kl, mask) - HP["ent_coef"] * agg(ent, mask)
    spec = AlgoSpec(estimator="grpo", surrogate="clip", aggregation="seq-mean-token-mean", kl="k3",
                    kl_placement="loss", entropy_bonus=True)
    with jax.enable_x64(True):
        got, aux = policy_loss(spec, jnp.asarray(b["logq"]), jnp.asarray(b["tokens"]), jnp.asarray(mask),
                               jnp.asarray(b["adv"]), jnp.asarray(b["logp_old"]), jnp.asarray(b["logq_ref"]), hyper())
    np.testing.assert_allclose(float(got), want, **TOL)
    w = np.exp(l)
    a = b["adv"][..., None]
    active = ((a > 0) & (w > 1 + HP["eps_high"])) | ((a < 0) & (w < 1 - HP["eps_low"]))
    np.testing.assert_allclose(float(aux["clip_frac"]), (active * mask).sum() / mask.sum(), **TOL)


# ----------------------------------------------------------------------------------------------
# equivalences
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("G", [2, 16])
def test_rloo_is_scaled_centred_advantage(G):
    rng = np.random.default_rng(G)
    r = jnp.asarray(rng.normal(size=(7, G)))
    kw = dict(lengths=jnp.ones((7, G)), valid=jnp.ones(7), hp=hyper())
    with jax.enable_x64(True):
        r = jnp.asarray(np.asarray(r))
        # r was made float32, so both sides are float32: each group mean is a G-term sum (G eps of max|r|),
        # plus a few roundings of the difference and the G / (G - 1) <= 2 factor
        np.testing.assert_allclose(np.asarray(ESTIMATORS["rloo"](r, **kw)),
                                   G / (G - 1) * np.asarray(ESTIMATORS["dr_grpo"](r, **kw)),
                                   rtol=0, atol=f32_bound(G + 4, 2 * np.asarray(r)))


@pytest.mark.parametrize("ddof,eps", [(0, 1e-8), (1, 1e-4), (1, 0.0)])
def test_dr_grpo_is_grpo_without_the_std(ddof, eps):
    b = make_batch(seed=21, binary=False)
    r = b["rewards"]
    std = np.sqrt(((r - r.mean(1, keepdims=True)) ** 2).sum(1, keepdims=True) / (r.shape[1] - ddof))
    with jax.enable_x64(True):
        kw = dict(lengths=jnp.asarray(b["lengths"]), valid=jnp.asarray(b["valid"]),
                  hp=hyper(std_ddof=float(ddof), std_eps=eps))
        grpo = np.asarray(ESTIMATORS["grpo"](jnp.asarray(r), **kw))
        dr = np.asarray(ESTIMATORS["dr_grpo"](jnp.asarray(r), **kw))
    np.testing.assert_allclose(grpo * (std + eps), dr, **TOL)


def _bandit_loss(spec, logits, tokens, mask, adv, logp_old, hp):
    """policy_loss with the bandit's token_logq: one logit row per group, broadcast over [G, T]."""
    logq = jax.nn.log_softmax(logits, -1)[:, None, None, :]
    logq = jnp.broadcast_to(logq, tokens.shape + (logits.shape[-1],))
    return policy_loss(spec, logq, tokens, mask, adv, logp_old, jax.lax.stop_gradient(logq), hp)[0]


def _one_token_batch(rng, T, *, drift, B=4, G=6, A=5):
    """Bandit answers as one token padded to length ``T``: logits [B, A], tokens and mask [B, G, T], adv [B, G],
    the old policy's log-probabilities [B, A] (the logits moved by ``drift``) and its logp_old [B, G, T]."""
    logits = rng.normal(size=(B, A))
    old = logits + rng.normal(scale=drift, size=(B, A))
    tokens = np.zeros((B, G, T), int)
    tokens[..., 0] = rng.integers(0, A, size=(B, G))
    mask = np.zeros((B, G, T))
    mask[..., 0] = 1.0
    adv = rng.normal(size=(B, G))
    old_logq = old - np.log(np.exp(old).sum(-1, keepdims=True))
    logp_old = np.take_along_axis(old_logq, tokens[..., 0], -1)[..., None] * mask
    return logits, tokens, mask, adv, old_logq, logp_old


@pytest.mark.parametrize("T,surrogate,aggregation", [
    (1, "clip", "token-mean"), (3, "clip", "seq-mean-token-mean"), (3, "dual_clip", "token-mean"),
    (1, "sapo", "seq-mean-token-sum-norm"), (3, "cispo", "seq-mean-token-mean")])
def test_gspo_equals_grpo_when_every_answer_is_one_token(T, surrogate, aggregation):
    """Sequence ratios = token ratios for one-token answers (padding after the token when T > 1):
    same loss and same gradient, with GSPO's tiny clip range so that clipping is active."""
    # ratios within ~1e-3 of 1: the 3e-4 clip binds
    logits, tokens, mask, adv, old_logq, logp_old = _one_token_batch(np.random.default_rng(T), T, drift=1e-3)
    hp = hyper(eps_low=3e-4, eps_high=4e-4)
    with jax.enable_x64(True):
        args = [jnp.asarray(x) for x in (logits, tokens, mask, adv, logp_old)]

        @jax.jit
        def both(lg, *rest):
            out = {}
            for ratio in ("sequence", "token"):
                spec = AlgoSpec(ratio=ratio, surrogate=surrogate, aggregation=aggregation)
                out[ratio] = jax.value_and_grad(lambda x: _bandit_loss(spec, x, *rest, hp))(lg)  # noqa: B023
            return out

        out = jax.device_get(both(*args))
    w = np.exp(np.asarray(jax.nn.log_softmax(logits, -1)) - old_logq)
    w_tok = np.take_along_axis(w, tokens[..., 0], -1)
    clipped = ((adv > 0) & (w_tok > 1 + 4e-4)) | ((adv < 0) & (w_tok < 1 - 3e-4))
    np.testing.assert_allclose(out["sequence"][0], out["token"][0], **TOL)
    np.testing.assert_allclose(out["sequence"][1], out["token"][1], **TOL)
    assert np.abs(out["token"][1]).max() > 1e-3  # a real gradient, not 0 = 0
    assert 0.05 < clipped.mean() < 0.95  # the comparison covers clipped and unclipped tokens


@pytest.mark.parametrize("T", [1, 3])
def test_gmpo_equals_grpo_when_every_answer_is_one_token(T):
    """GMPO's geometric mean of one ratio is the ratio: with log-space bounds eps it is PPO's clip with
    1 - eps_low' = e^-eps and 1 + eps_high' = e^eps, the same loss and gradient (padding after the token
    when T > 1), with the clip holding some tokens."""
    logits, tokens, mask, adv, old_logq, logp_old = _one_token_batch(np.random.default_rng(7 + T), T, drift=0.3)
    eps = 0.2
    hps = {"gmpo": hyper(eps_low=eps, eps_high=eps),
           "clip": hyper(eps_low=1 - math.exp(-eps), eps_high=math.exp(eps) - 1)}
    with jax.enable_x64(True):
        args = [jnp.asarray(x) for x in (logits, tokens, mask, adv, logp_old)]
        out = {}
        for name, hp in hps.items():
            spec = AlgoSpec(surrogate=name, aggregation="seq-mean-token-mean")
            out[name] = jax.jit(jax.value_and_grad(lambda x: _bandit_loss(spec, x, *args[1:], hp)))(args[0])  # noqa: B023
    l_tok = np.take_along_axis(np.asarray(jax.nn.log_softmax(logits, -1)) - old_logq, tokens[..., 0], -1)
    held = ((adv > 0) & (l_tok > eps)) | ((adv < 0) & (l_tok < -eps))
    np.testing.assert_allclose(out["gmpo"][0], out["clip"][0], **TOL)
    np.testing.assert_allclose(out["gmpo"][1], out["clip"][1], **TOL)
    assert np.abs(out["clip"][1]).max() > 1e-3 and 0.05 < held.mean() < 0.95


@pytest.mark.parametrize("variant, grpo", [
    (AlgoSpec(surrogate="gmpo", aggregation="seq-mean-token-mean"),  # the geometric mean of token ratios
     AlgoSpec(surrogate="clip", aggregation="seq-mean-token-mean")),
    (AlgoSpec(ratio="sequence", surrogate="clip"), AlgoSpec(ratio="token", surrogate="clip")),  # GSPO's ratio
], ids=["gmpo", "gspo"])
def test_a_sequence_level_variant_differs_from_grpo_with_multi_token_answers(variant, grpo):
    """With real multi-token answers GMPO's and GSPO's objectives are not GRPO's (the test can fail)."""
    b = make_batch(seed=5)
    with jax.enable_x64(True):
        args = [jnp.asarray(b[k]) for k in ("logq", "tokens", "mask", "adv", "logp_old", "logq_ref")]
        vals = [float(policy_loss(spec, *args, hyper())[0]) for spec in (variant, grpo)]
    assert abs(vals[0] - vals[1]) > 1e-4


# ----------------------------------------------------------------------------------------------
# conformance: every registered component under jit + vmap, finite, compiled once
# ----------------------------------------------------------------------------------------------
def _stacked_hp(n):
    rows = [{**Hyper().__dict__, **HP, "std_eps": 1e-6 * (i + 1), "eps_low": 0.1 + 0.05 * i} for i in range(n)]
    rows = [{k: float(v) for k, v in r.items()} for r in rows]
    return stack_hypers(rows)


def _vbatch(n, seed):
    bs = [make_batch(seed=seed + i) for i in range(n)]
    bs = [{**b, **all_context(b)} for b in bs]
    ints = ("tokens", "answers", "prompts")
    return {k: jnp.asarray(np.stack([b[k] for b in bs]), dtype=jnp.int32 if k in ints else jnp.float32)
            for k in bs[0]}


def _check_conformance(fn):
    """``fn(batch, hp) -> pytree``: jit(vmap(fn)) twice on fresh values -> finite, one trace."""
    traces = []

    def counted(batch, hp):
        traces.append(1)
        return fn(batch, hp)

    jf = jax.jit(jax.vmap(counted))
    for seed in (0, 100):
        out = jf(_vbatch(3, seed), _stacked_hp(3))
        for leaf in jax.tree_util.tree_leaves(out):
            assert leaf.shape[0] == 3 and np.isfinite(np.asarray(leaf)).all()
    assert len(traces) == 1
    assert jf._cache_size() == 1


REGISTERED = ([("estimator", n) for n in sorted(ESTIMATORS)] + [("ratio", n) for n in sorted(RATIOS)]
              + [("surrogate", n) for n in sorted(SURROGATES)] + [("aggregation", n) for n in sorted(AGGREGATIONS)]
              + [("kl", n) for n in sorted(KL_ESTIMATORS)])


@pytest.mark.parametrize("kind,name", REGISTERED)
def test_component_conformance(kind, name):
    """jit + vmap, finite, one trace: the component alone and (for the loss-side components) inside the
    whole differentiated update (advantages -> loss -> logit gradient)."""
    spec = AlgoSpec(**{kind: name}, kl_placement="loss" if kind == "kl" else "none", entropy_bonus=True)

    def alone(b, hp):
        if kind == "estimator":
            return batch.estimate(name, b["rewards"], lengths=b["lengths"], valid=b["valid"], hp=hp,
                                  context={k: b[k] for k in batch.context_reads(name)})
        if kind == "ratio":
            return batch.ratio(name, b["logp"], b["logp_old"], b["mask"], hp=hp)
        if kind == "surrogate":
            return batch.surrogate(name, b["logp"] - b["logp_old"], b["logp"], b["adv"][..., None], hp,
                                   mask=b["mask"], logp_old=b["logp_old"])
        if kind == "aggregation":
            return batch.aggregate(name, b["logp"], b["mask"] * b["valid"][:, None, None], adv=b["adv"], hp=hp)
        return KL_ESTIMATORS[name](b["logp"], b["logp_ref"], b["logq"], b["logq_ref"])

    def fn(b, hp):
        if kind == "estimator":  # advantages are constants of the update: no gradient flows through them
            return alone(b, hp)
        adv = advantages(spec, b["rewards"], lengths=b["lengths"], valid=b["valid"], hp=hp,
                         context={k: b[k] for k in batch.context_reads(spec.estimator)})
        mask = b["mask"] * b["valid"][:, None, None]

        def loss(logq):
            return policy_loss(spec, jax.nn.log_softmax(logq, -1), b["tokens"], mask, adv, b["logp_old"],
                               b["logq_ref"], hp)

        g, aux = jax.grad(loss, has_aux=True)(b["logq"])
        return {"alone": alone(b, hp), "grad": g, "clip_frac": aux["clip_frac"], "adv": adv}

    _check_conformance(fn)


def test_take_logp_picks_sampled_tokens():
    b = make_batch(seed=2)
    with jax.enable_x64(True):
        got = take_logp(jnp.asarray(b["logq"]), jnp.asarray(b["tokens"]))
    np.testing.assert_allclose(np.asarray(got), b["logp"], **TOL)


@pytest.mark.parametrize("A,G,T", [(5, 6, 1), (5, 7, 3), (70, 4, 1), (6, 80, 1)])
def test_take_logp_shared_node_path_equals_one_hot(A, G, T):
    """A ``[B, 1, 1, A]`` distribution (one node per group) takes the fast path: same values and the
    same gradient as the one-hot product over the broadcast ``[B, G, T, A]`` array, for the unrolled
    branches (A, G*T <= 64) and the general ones (A = 70, G*T = 80)."""
    rng = np.random.default_rng(A + G + T)
    B = 3
    with jax.enable_x64(True):
        logits = jnp.asarray(rng.normal(size=(B, A)))
        tokens = jnp.asarray(rng.integers(0, A, size=(B, G, T)))
        w = jnp.asarray(rng.normal(size=(B, G, T)))

        def shared(lg):
            return jax.nn.log_softmax(lg, -1)[:, None, None, :]

        def one_hot(lg):
            lq = jnp.broadcast_to(shared(lg), (B, G, T, A))
            return (jax.nn.one_hot(tokens, A, dtype=lq.dtype) * lq).sum(-1)

        # the same log-probabilities: a gather, and a one-hot sum of one value and exact zeros: equal bits
        lq = shared(logits)
        np.testing.assert_array_equal(np.asarray(jax.jit(take_logp)(lq, tokens)),
                                      np.asarray((jax.nn.one_hot(tokens, A, dtype=lq.dtype) * lq).sum(-1)))
        # compiled: run eagerly, each operation (of every shape here) is compiled on its own
        g_fast = jax.jit(jax.grad(lambda lg: (take_logp(shared(lg), tokens) * w).sum()))(logits)
        g_ref = jax.jit(jax.grad(lambda lg: (one_hot(lg) * w).sum()))(logits)
        # float64, each gradient in its own order: the counts sum G T weights (sum|w| per prompt), then
        # log-softmax's backward c - pi sum(c) sums A of them, its pi = exp(log pi) off by (A + 3) |log pi| u
        log_pi = np.asarray(jax.nn.log_softmax(logits, -1))
        tol = 2 * f64_bound(G * T + (A + 3) * (2 + np.abs(log_pi).max()), np.abs(np.asarray(w)).sum((1, 2)))
        np.testing.assert_allclose(np.asarray(g_fast), np.asarray(g_ref), rtol=0, atol=tol)
        # and by hand: sum_g w_g (onehot(a_g) - pi), terms |w| (1 + pi): the same count on twice the scale
        pi = np.asarray(jax.nn.softmax(logits, -1))
        oh = np.eye(A)[np.asarray(tokens)]
        by_hand = (np.asarray(w)[..., None] * (oh - pi[:, None, None, :])).sum((1, 2))
        np.testing.assert_allclose(np.asarray(g_fast), by_hand, rtol=0, atol=2 * tol)


# ----------------------------------------------------------------------------------------------
# batch_std: Lite PPO's group mean over the batch's std (arXiv 2508.08221; TRL scale_rewards="batch")
# ----------------------------------------------------------------------------------------------
def _estimate(name, rewards, valid=None, **hp):
    r = jnp.asarray(rewards, dtype=jnp.float64)
    v = jnp.ones(r.shape[0]) if valid is None else jnp.asarray(valid, dtype=jnp.float64)
    return np.asarray(ESTIMATORS[name](r, lengths=jnp.ones_like(r), valid=v, hp=hyper(**hp)))


def test_batch_std_by_hand():
    # rewards 1, 0 | 1, 1: batch mean 3/4, Bessel variance (3 (1/4)^2 + (3/4)^2) / 3 = 1/4, std 1/2;
    # the group z-score of [1, 0] divides by its own std sqrt(1/2) instead
    with jax.enable_x64(True):
        got = _estimate("batch_std", [[1.0, 0.0], [1.0, 1.0]], std_ddof=1.0, std_eps=0.0)
        z = _estimate("grpo", [[1.0, 0.0], [1.0, 1.0]], std_ddof=1.0, std_eps=0.0)
    np.testing.assert_allclose(got, [[1.0, -1.0], [0.0, 0.0]], rtol=1e-15)
    np.testing.assert_allclose(z[0], [math.sqrt(0.5), -math.sqrt(0.5)], rtol=1e-15)


def np_trl_scale_rewards_batch(rewards, G):
    """TRL GRPOTrainer's advantage with scale_rewards="batch" (sum_then_normalize, one reward function),
    rewritten from its source: rewards flat over the generation batch, the mean per group of G, the
    NaN-aware std of all rewards with the count / (count - 1) correction, then (r - mean_g) / (std + 1e-4)."""
    flat = np.asarray(rewards, dtype=float).reshape(-1)
    mean_g = np.repeat(flat.reshape(-1, G).mean(axis=1), G)
    mu = flat.mean()
    std = math.sqrt(((flat - mu) ** 2).mean() * flat.size / (flat.size - 1))
    return ((flat - mean_g) / (std + 1e-4)).reshape(-1, G)


@pytest.mark.parametrize("binary", [True, False])
def test_batch_std_matches_trl(binary):
    b = make_batch(seed=21, B=6, G=4, binary=binary)
    with jax.enable_x64(True):
        got = _estimate("batch_std", b["rewards"], std_ddof=1.0, std_eps=1e-4)
    np.testing.assert_allclose(got, np_trl_scale_rewards_batch(b["rewards"], 4), **TOL)


def test_batch_std_equivalences():
    b = make_batch(seed=5, B=5, G=6, binary=False)
    r, valid = b["rewards"], b["valid"]
    with jax.enable_x64(True):
        # one group: the batch is the group, so it is GRPO's z-score
        one = _estimate("batch_std", r[3:4], std_ddof=1.0, std_eps=1e-4)
        np.testing.assert_allclose(one, _estimate("grpo", r[3:4], std_ddof=1.0, std_eps=1e-4), **TOL)
        # several groups: Dr. GRPO's centred reward over one scale shared by the batch's kept groups
        got = _estimate("batch_std", r, valid, std_ddof=0.0, std_eps=0.0)
        kept = r[valid > 0]
        np.testing.assert_allclose(got, _estimate("dr_grpo", r) / kept.std(), **TOL)
        # a dropped group's rewards do not enter the scale
        moved = r.copy()
        moved[valid == 0] += 100.0
        np.testing.assert_allclose(_estimate("batch_std", moved, valid, std_ddof=0.0, std_eps=0.0)[valid > 0],
                                   got[valid > 0], **TOL)
        # every reward equal: no gradient, also with eps = 0
        assert (_estimate("batch_std", np.ones((3, 4)), std_eps=0.0) == 0.0).all()


def test_batch_std_has_no_expected_flow():
    from tabsim.config import ConfigError, resolve
    from tabsim.runtime.run import check_dynamics
    cfg = resolve({"preset": "lite_ppo", "task": {"n_prompts": 4, "n_answers": 3, "n_correct": 1},
                   "train": {"batch_size": 2, "group_size": 4, "dynamics": "expected"}})
    with pytest.raises(ConfigError, match=r"algo.estimator = 'batch_std' has no exact flow: .*batch.*'sampled'$"):
        check_dynamics(cfg)


# ----------------------------------------------------------------------------------------------
# mapo: MAPO's certainty-weighted mixed advantage (arXiv 2509.18849)
# ----------------------------------------------------------------------------------------------
def test_mapo_by_hand():
    # one success in four: p = 1/4, weight 4 p (1 - p) = 3/4 on the z-score (Bessel std 1/2), 1/4 on the
    # percent deviation (r - 1/4) / (1/4): the success gets 3/4 * 3/2 + 1/4 * 3 = 15/8, a failure
    # 3/4 * (-1/2) + 1/4 * (-1) = -5/8; two in four (p = 1/2) is GRPO's z-score, +-sqrt(3)/2
    with jax.enable_x64(True):
        got = _estimate("mapo", [[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0], [0.0] * 4], std_ddof=1.0, std_eps=0.0)
    np.testing.assert_allclose(got[0], [15 / 8, -5 / 8, -5 / 8, -5 / 8], rtol=1e-14)
    np.testing.assert_allclose(got[1], [math.sqrt(3) / 2] * 2 + [-math.sqrt(3) / 2] * 2, rtol=1e-14)
    assert (got[2] == 0.0).all()


def np_mapo_authors(rewards, eps=1e-6):
    """The MAPO authors' released trainer (``grpomixpro``), rewritten from its source: per group the
    Bessel-std z-score and the mean-scaled deviation, each with eps 1e-6, weighted by 4 p (1 - p) and
    1 - 4 p (1 - p), p the share of rewards equal to 1."""
    out = np.zeros_like(rewards, dtype=float)
    for b, r in enumerate(np.asarray(rewards, dtype=float)):
        mean, std = r.mean(), r.std(ddof=1)
        p = np.sum(r == 1.0) / r.size
        out[b] = 4 * p * (1 - p) * (r - mean) / (std + eps) + (1 - 4 * p * (1 - p)) * (r - mean) / (mean + eps)
    return out


def test_mapo_matches_its_authors_trainer():
    b = make_batch(seed=8, B=8, G=12)
    with jax.enable_x64(True):
        got = _estimate("mapo", b["rewards"], std_ddof=1.0, std_eps=1e-6)
    np.testing.assert_allclose(got, np_mapo_authors(b["rewards"]), **TOL)


def test_mapo_equivalences():
    r = np.array([[1.0, 0.0, 1.0, 0.0, 1.0, 0.0], [0.9, 0.2, 0.4, 0.0, 0.3, 0.6], [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    with jax.enable_x64(True):
        got = _estimate("mapo", r, std_ddof=1.0, std_eps=1e-6)
        z = _estimate("grpo", r, std_ddof=1.0, std_eps=1e-6)
        centred = _estimate("dr_grpo", r)
    np.testing.assert_allclose(got[0], z[0], **TOL)  # half solved: GRPO's z-score
    np.testing.assert_allclose(got[1], centred[1] / (r[1].mean() + 1e-6), **TOL)  # no reward of 1: percent deviation
    # a nearly failed group (p = 1/6) moves more than under GRPO: its success up and its failures down
    assert got[2, 0] > z[2, 0] > 0 and got[2, 1] < z[2, 1] < 0


def test_mapo_has_an_expected_flow():
    from tabsim.config import resolve
    from tabsim.runtime.run import check_dynamics
    check_dynamics(resolve({"preset": "mapo", "task": {"n_prompts": 4, "n_answers": 3, "n_correct": 1},
                            "train": {"batch_size": 2, "group_size": 4, "dynamics": "expected"}}))


def test_two_grpo_gives_each_group_a_pairwise_contrast():
    """2-GRPO (arXiv 2510.00977): its two answers per prompt make the group z-score a DPO-like contrast,
    +-c sign(r_i - r_j): c = (1/2) / (1/sqrt(2) + eps) for 0/1 rewards (Bessel std), 1/sqrt(2) for any gap when
    eps = 0 (RLOO keeps the gap), 1 with the population std; an equal pair gives 0."""
    from tabsim.config import resolve
    algo, G = resolve({"preset": "2_grpo"}).algo, resolve({"preset": "2_grpo"}).train.group_size
    r = np.array([[1.0, 0.0], [0.0, 1.0], [0.3, 0.9], [1.0, 1.0], [0.0, 0.0]])[:, :G]
    sign = np.sign(r - r[:, ::-1])
    binary = [0, 1, 3, 4]
    with jax.enable_x64(True):
        got = _estimate(algo.estimator, r[binary], std_ddof=float(algo.std_ddof), std_eps=algo.std_eps)
        no_eps = _estimate(algo.estimator, r, std_ddof=float(algo.std_ddof), std_eps=0.0)
        population = _estimate(algo.estimator, r, std_ddof=0.0, std_eps=0.0)
        rloo = _estimate("rloo", r)
    np.testing.assert_allclose(got, 0.5 * sign[binary] / (1 / math.sqrt(2) + algo.std_eps), rtol=1e-14)
    np.testing.assert_allclose(no_eps, sign / math.sqrt(2), rtol=1e-14)
    np.testing.assert_allclose(population, sign, rtol=1e-14)
    np.testing.assert_allclose(rloo, r - r[:, ::-1], rtol=1e-14)


# ----------------------------------------------------------------------------------------------
# spo: Simple Policy Optimization's quadratic penalty (arXiv 2401.16025)
# ----------------------------------------------------------------------------------------------
def _spo(w, a, **hp):
    with jax.enable_x64(True):
        l = jnp.log(jnp.asarray(w, dtype=jnp.float64))
        loss = SURROGATES["spo"](l, l, jnp.asarray(a, dtype=jnp.float64), hyper(**hp))
        grad = jax.grad(lambda x: SURROGATES["spo"](x, x, jnp.asarray(a, dtype=jnp.float64), hyper(**hp)).sum())(l)
    return np.asarray(loss), np.asarray(grad)


def test_spo_by_hand():
    # A = 2, eps 0.25, w = 1.5: -(2 * 1.5 - 2 * 0.25 / 0.5) = -2; A = -1, eps_low 0.2, w = 0.5: -(-0.5 - 0.25 / 0.4)
    loss, _ = _spo([1.5, 0.5], [2.0, -1.0], eps_low=0.2, eps_high=0.25)
    np.testing.assert_allclose(loss, [-2.0, 0.5 + 0.625], rtol=1e-14)


def test_spo_optimum_is_the_trust_region_edge_and_its_gradient_at_one_is_ppos():
    # d loss / d log w = 0 at w = 1 + eps_high for A > 0 and 1 - eps_low for A < 0 (PPO's clip edges), where PPO's
    # gradient is already 0; at w = 1 both are -A (the policy gradient)
    _, at_edge = _spo([1.28, 0.8], [1.7, -0.6], eps_low=0.2, eps_high=0.28)
    np.testing.assert_allclose(at_edge, 0.0, atol=1e-15)
    _, at_one = _spo([1.0, 1.0], [1.7, -0.6], eps_low=0.2, eps_high=0.28)
    with jax.enable_x64(True):
        ppo = jax.grad(lambda x: SURROGATES["clip"](x, x, jnp.asarray([1.7, -0.6]), hyper(eps_low=0.2,
                                                                                       eps_high=0.28)).sum())
        np.testing.assert_allclose(at_one, np.asarray(ppo(jnp.zeros(2))), rtol=1e-14)
    # past the edge PPO's gradient is 0 while SPO's pushes back toward the range
    _, past = _spo([1.5, 0.6], [1.7, -0.6], eps_low=0.2, eps_high=0.28)
    assert past[0] > 0 and past[1] < 0


def np_spo_authors(ratios, advantages, epsilon):
    """The SPO authors' released trainer (``compute_policy_loss``, algo 'spo'), rewritten from its source:
    the negated mean over samples of A r - |A| (r - 1)^2 / (2 epsilon)."""
    r, a = np.asarray(ratios, dtype=float), np.asarray(advantages, dtype=float)
    return -np.mean(a * r - np.abs(a) * (r - 1) ** 2 / (2 * epsilon))


def test_spo_matches_its_authors_trainer():
    b = make_batch(seed=31, T=1)
    l, a = b["logp"] - b["logp_old"], b["adv"][..., None]
    with jax.enable_x64(True):
        losses = SURROGATES["spo"](jnp.asarray(l), jnp.asarray(b["logp"]), jnp.asarray(a), hyper(eps_low=0.2,
                                                                                                  eps_high=0.2))
        got = AGGREGATIONS["token-mean"](losses, jnp.ones_like(losses))
    np.testing.assert_allclose(float(got), np_spo_authors(np.exp(l), a * np.ones_like(l), 0.2), **TOL)


# ----------------------------------------------------------------------------------------------
# luspo: GSPO with each answer's loss scaled by its length (arXiv 2602.05261; TRL loss_type="luspo")
# ----------------------------------------------------------------------------------------------
def np_trl_luspo(logp, logp_old, mask, adv, eps_low, eps_high):
    """TRL GRPOTrainer's loss with loss_type="luspo" and importance_sampling_level="sequence", rewritten from its
    source: one log-weight per answer, the masked mean of its token log-ratios (clamped count >= 1); the PPO clip
    of exp(.) times A as a [B, 1] loss; the loss is the mean over answers of that loss times the answer's length."""
    lr = (logp - logp_old).reshape(-1, logp.shape[-1])
    m = mask.reshape(lr.shape)
    a = adv.reshape(-1, 1)
    w = np.exp((lr * m).sum(-1, keepdims=True) / np.maximum(m.sum(-1, keepdims=True), 1.0))
    per = -np.minimum(w * a, np.clip(w, 1 - eps_low, 1 + eps_high) * a)
    return float((per * m.sum(1, keepdims=True)).mean())


def _preset_loss(name, b, mask, **over):
    from tabsim.config import resolve
    from tabsim.runtime.run import algo_spec
    cfg = resolve({"preset": name, "algo": over})
    hp = hyper(eps_low=cfg.algo.eps_low, eps_high=cfg.algo.eps_high, beta=0.0)
    with jax.enable_x64(True):
        got, _ = policy_loss(algo_spec(cfg), jnp.asarray(b["logq"]), jnp.asarray(b["tokens"]), jnp.asarray(mask),
                             jnp.asarray(b["adv"]), jnp.asarray(b["logp_old"]), jnp.asarray(b["logq_ref"]), hp)
    return float(got), cfg.algo


def test_luspo_matches_trl():
    b = make_batch(seed=41)
    b["logp_old"] = b["logp"] + np.random.default_rng(41).normal(scale=3e-3, size=b["logp"].shape)  # near the bounds
    mask = b["mask"]  # TRL has no filter: every group kept
    got, algo = _preset_loss("luspo", b, mask)
    want = np_trl_luspo(b["logp"], b["logp_old"], mask, b["adv"], algo.eps_low, algo.eps_high)
    np.testing.assert_allclose(got, want, **TOL)
    w = np.exp(((b["logp"] - b["logp_old"]) * mask).sum(-1) / mask.sum(-1))
    assert ((w > 1 + algo.eps_high) | (w < 1 - algo.eps_low)).any() and (abs(w - 1) < algo.eps_low).any()


def test_luspo_is_gspo_times_length():
    b = make_batch(seed=42, T=1)  # one-token answers: every length is 1
    mask = b["mask"] * b["valid"][:, None, None]
    luspo, algo = _preset_loss("luspo", b, mask)
    gspo, _ = _preset_loss("gspo", b, mask, eps_low=algo.eps_low, eps_high=algo.eps_high)
    np.testing.assert_allclose(luspo, gspo, **TOL)
    long = make_batch(seed=42)  # longer answers weigh more: not GSPO's mean over tokens
    assert not np.isclose(_preset_loss("luspo", long, long["mask"])[0],
                          _preset_loss("gspo", long, long["mask"], eps_low=algo.eps_low, eps_high=algo.eps_high)[0])


# ----------------------------------------------------------------------------------------------
# intellect_2: TRL's two-sided clipping (delta) is the dual clip with c = delta (arXiv 2505.07291)
# ----------------------------------------------------------------------------------------------
def np_trl_two_sided_tok(l, a, eps_low, eps_high, delta):
    """TRL GRPOTrainer's per-token loss with `delta` set, rewritten from its source: coef_2 = clamp(w, 1 - eps_low,
    1 + eps_high), coef_1 = clamp(w, max=delta), loss = -min(coef_1 A, coef_2 A); returns (loss, d loss / d l)."""
    w = math.exp(l)
    c1, d1 = (w, w) if w <= delta else (delta, 0.0)
    c2, d2 = (w, w) if 1 - eps_low <= w <= 1 + eps_high else (_clip(w, 1 - eps_low, 1 + eps_high), 0.0)
    return (-c1 * a, -d1 * a) if c1 * a <= c2 * a else (-c2 * a, -d2 * a)


def test_intellect_2_two_sided_clip_is_the_dual_clip():
    from tabsim.config import resolve
    algo = resolve({"preset": "intellect_2"}).algo
    b = make_batch(seed=51)
    l = b["logp"] - b["logp_old"]
    l[:2] += 1.6  # ratios beyond delta = 4 with both signs of A
    a = b["adv"][..., None] * np.ones_like(l)
    pairs = [np_trl_two_sided_tok(l[i], a[i], algo.eps_low, algo.eps_high, algo.dual_clip_c) for i in np.ndindex(l.shape)]
    want, want_grad = (np.array(v).reshape(l.shape) for v in zip(*pairs))
    hp = hyper(eps_low=algo.eps_low, eps_high=algo.eps_high, dual_clip_c=algo.dual_clip_c)
    with jax.enable_x64(True):
        fn = lambda x: SURROGATES[algo.surrogate](x, x, jnp.asarray(b["adv"][..., None]), hp)  # noqa: E731
        got = np.asarray(fn(jnp.asarray(l)))
        grad = np.asarray(jax.grad(lambda x: fn(x).sum())(jnp.asarray(l)))
    np.testing.assert_allclose(got, want, **TOL)
    np.testing.assert_allclose(grad, want_grad, **TOL)
    assert ((np.exp(l) > algo.dual_clip_c) & (a < 0)).any() and ((np.exp(l) > algo.dual_clip_c) & (a > 0)).any()
