"""The linear path of the expected flow: one on-policy update per batch, rewards that do not read the policy.

The update is linear in each answer's advantage-weighted count, so a step needs only ``P(composition) @
table`` with tables computed once per run. Every arm is a two-class reward model (each answer is
rewarded with probability ``rho_0`` or ``rho_1``; the noise is averaged within a class by
exchangeability), and the online majority arm reads the plurality (and its tie rule) from the
composition.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from tabsim.sim import arms as arms_mod
from tabsim.base.precision import real
from tabsim.sim.algos import AlgoSpec, advantages, closed_form
from tabsim.sim.expected import batch
from tabsim.sim.expected.batch import batch_level, batch_scale
from tabsim.sim.params import Hyper
from tabsim.sim.update import Schedule


def _advantage_table(algo: AlgoSpec, G: int, hp: Hyper):
    """``A1[m], A0[m]`` (``[G + 1]``): a rewarded / unrewarded answer's advantage in a group with m rewards,
    and the keep indicator ``kappa[m]`` (0 for the homogeneous groups the filter drops). A batch-level
    estimator's advantage depends on the rest of the batch (:mod:`tabsim.sim.expected.batch`): 0 here."""
    m = jnp.arange(G + 1)
    kappa = 1.0 - hp.filter * ((m == 0) | (m == G)).astype(real())
    if batch_level(algo.estimator):
        return jnp.zeros(G + 1), jnp.zeros(G + 1), kappa
    rewards = (jnp.arange(G)[None, :] < m[:, None]).astype(real())  # row m: m ones first
    adv = advantages(algo, rewards, lengths=jnp.ones_like(rewards), valid=jnp.ones(G + 1), hp=hp)
    return adv[:, 0], adv[:, -1], kappa


def _binom_pmf(n_max: int, rho):
    """``pmf[..., n, k] = C(n, k) rho^k (1 - rho)^(n - k)`` for ``n, k in 0..n_max`` (0 where k > n)."""
    n = np.arange(n_max + 1)
    comb = np.asarray([[math.comb(a, b) if b <= a else 0 for b in n] for a in n], np.float32)
    k = jnp.asarray(n, real())
    r = rho[..., None, None]
    return comb * jnp.power(r, k) * jnp.power(1.0 - r, jnp.maximum(n[:, None] - k, 0.0))


def two_class(name: str, env, task, hp: Hyper):
    """The arm as a two-class reward model: ``(cls [N, K] 0/1, rho0 [N], rho1 [N])``, each answer of
    class c rewarded with probability ``rho_c`` independently (None for the online majority arm)."""
    n, K = task.correct.shape
    ones = jnp.ones((n,), real())
    label = jax.nn.one_hot(task.offline_label, K, dtype=real())  # the label -1 (never drawn): all zeros
    if name in ("frozen", "true"):
        return task.correct, 0 * ones, ones
    if name == "random":
        return task.correct, hp.gamma * ones, hp.gamma * ones
    if name == "noisy":
        return task.correct, hp.fpr * ones, (1.0 - hp.fnr) * ones
    if name == "format":
        return jax.nn.one_hot(task.format_answer, K, dtype=real()), 0 * ones, ones
    if name == "majority_offline":
        return label, 0 * ones, ones
    if name == "incorrect":
        return label, 0 * ones, 1.0 - (label * task.correct).sum(-1)
    if name == "majority":
        return None
    raise ValueError(f"unknown arm {name!r}; allowed: {', '.join(arms_mod.ARMS)}")


def linear_tables(name: str, env, task, algo: AlgoSpec, G: int, hp: Hyper, counts, maj):
    """Per-run tables of the linear path for arm ``name`` (they do not depend on the policy).

    Online majority: ``("counts", W [O, 2K + 2], by_m)``, per composition o the columns ``counts * adv / G``
    (each answer's advantage-weighted draws), ``counts * kappa / G``, ``kappa`` and the mean reward, so
    that one product ``P(o) @ W`` gives every expectation a step needs. Two-class arms: ``("class", cls,
    T [N, 4, G + 1], V)`` over the class-1 draws ``n1``: ``E[kappa (k_c / n_c A1 + (1 - k_c / n_c) A0)]``
    for c = 0, 1, ``E[kappa]`` and the mean reward, the reward draws ``k_c ~ Bin(n_c, rho_c)`` summed out.

    A batch-level estimator's advantage is known only at the step (it reads the rest of the batch), so
    its tables keep the group's rewarded count m: ``by_m = (onehot(m) [O, G + 1], onehot(m) kappa,
    [rewarded, unrewarded] kept draws [2, O, K])`` and ``V [N, 4, G + 1 (n1), G + 1 (m)]``, the kept
    rewarded / unrewarded shares of class 0 and class 1 (``None`` for the other estimators).
    """
    A1, A0, kappa = _advantage_table(algo, G, hp)
    level = batch_level(algo.estimator)
    model = two_class(name, env, task, hp)
    if model is None:  # online majority: the composition's plurality (credit splits random ties)
        credit, mx = maj
        adv = credit * A1[mx][:, None] + (1.0 - credit) * A0[mx][:, None]  # [O, K]
        kap = kappa[mx]
        W = jnp.concatenate([counts * adv * kap[:, None], counts * kap[:, None], kap[:, None] * G,
                             mx[:, None] * 1.0], axis=1) / G
        if not level:
            return "counts", W, None
        by_m = jax.nn.one_hot(mx, G + 1, dtype=real())
        split = jnp.stack([counts * credit, counts * (1.0 - credit)]) * kap[:, None] / G
        return "counts", W, (by_m, by_m * kap[:, None], split)
    cls, rho0, rho1 = model
    k = jnp.arange(G + 1, dtype=real())
    p0, p1 = _binom_pmf(G, rho0), _binom_pmf(G, rho1)  # [N, n, k]
    n1 = jnp.arange(G + 1)
    joint = p0[:, G - n1, :][:, :, :, None] * p1[:, n1, :][:, :, None, :]  # [N, n1, k0, k1]
    m = (k[:, None] + k[None, :]).astype(jnp.int32)  # [k0, k1]
    n1f = n1.astype(real())[:, None, None]
    shape = (G + 1,) * 3
    frac1 = jnp.broadcast_to(k[None, None, :] / jnp.maximum(n1f, 1.0), shape)  # rewarded share of class-1 draws
    frac0 = jnp.broadcast_to(k[None, :, None] / jnp.maximum(G - n1f, 1.0), shape)
    shares = jnp.stack([frac0, 1 - frac0, frac1, 1 - frac1])  # [4, n1, k0, k1]
    to_m = np.add.outer(np.arange(G + 1), np.arange(G + 1))[..., None] == np.arange(G + 1)  # [k0, k1, m]
    V = jnp.einsum("nakl,wakl,klm->nwam", joint, shares, jnp.asarray(to_m, real())) * kappa  # [N, 4, n1, m]
    Tadv = jnp.einsum("nwam,wm->nwa", V, jnp.stack([A1, A0, A1, A0]))
    T = jnp.stack([Tadv[:, 0] + Tadv[:, 1], Tadv[:, 2] + Tadv[:, 3], (V[:, 0] + V[:, 1]).sum(-1),
                   (joint * m / G).sum((-2, -1))], axis=1)  # [N, 4, n1]
    return "class", cls, T, (V if level else None)


def node_gradient(algo: AlgoSpec, pi, logq, ref, nu, hp: Hyper):
    """The KL and entropy part of the expected gradient, given ``nu [N, K]``, the expected keep weight of
    each answer's draws (``sum_a nu = q``, the chance the group is kept)."""
    g = jnp.zeros_like(pi)
    q = nu.sum(-1, keepdims=True)
    if algo.kl_placement == "loss":
        if algo.kl in closed_form.KL_TOKEN_DERIVATIVES:
            c = nu * closed_form.KL_TOKEN_DERIVATIVES[algo.kl](logq - ref)
            g = g + hp.beta * (c - pi * c.sum(-1, keepdims=True))
        else:
            g = g + hp.beta * q * closed_form.KL_NODE_GRADIENTS[algo.kl](pi, logq, ref)
    if algo.entropy_bonus:
        g = g + hp.ent_coef * q * pi * (logq - (pi * logq).sum(-1, keepdims=True))
    return g


def linear_step(algo, schedule, counts, lmc, logits, ref, tables, hp, n_prompts, level=None):
    """One expected step of the linear path for one arm: ``(new logits [N, K], diagnostics)``.

    The step needs each answer's expected advantage-weighted draws ``g_adv``, expected kept draws ``nu``,
    the keep probability ``q`` and the mean reward. Online majority: one product of the compositions'
    probabilities with the run's table. Two-class arms need no enumeration: the class-1 draws are
    ``n1 ~ Bin(G, pi_1)`` and, given ``n1``, an answer of class 1 has ``E[n_a | n1] = n1 pi_a / pi_1``, so
    ``E[n_a f(n1)] = pi_a / pi_1 E[n1 f(n1)]`` (class 0 likewise with ``G - n1``).

    ``level``: a batch-level estimator's tables (:func:`tabsim.sim.expected.batch.advantage_tables` and the
    statistic), whose expected advantages, aggregation weight included, come from the rest of the batch.
    """
    G = schedule.group_size
    logq = jax.nn.log_softmax(logits, axis=-1)
    pi = jnp.exp(logq)
    K = pi.shape[-1]
    if tables[0] == "counts":
        P = jnp.exp(lmc[None, :] + logq @ counts.T)  # [N, O]
        out = P @ tables[1]
        g_adv, nu, q, r = out[:, :K], out[:, K:2 * K], out[:, 2 * K], out[:, 2 * K + 1]
        if level is not None:
            by_m, kept_m, split = tables[2]
            H1, H0 = batch.expected_advantages(level, P @ kept_m, schedule.replacement)
            g_adv = (P * (H1 @ by_m.T)) @ split[0] + (P * (H0 @ by_m.T)) @ split[1]
    else:
        _, cls, T, V = tables
        pi1 = (pi * cls).sum(-1, keepdims=True)
        pi0 = 1.0 - pi1
        n1 = jnp.arange(G + 1, dtype=real())
        logc = jnp.asarray([math.lgamma(G + 1) - math.lgamma(j + 1) - math.lgamma(G - j + 1) for j in range(G + 1)])
        xlog = lambda n, p: jnp.where(n > 0, n * jnp.log(jnp.maximum(p, 1e-38)), 0.0)
        B = jnp.exp(logc + xlog(n1, pi1) + xlog(G - n1, pi0))  # [N, n1]: P(n1 class-1 draws)
        B = jnp.where(pi1 <= 0.0, (n1 == 0), jnp.where(pi0 <= 0.0, (n1 == G), B))
        if level is not None:  # the advantage rows from the rest of the batch
            H1, H0 = batch.expected_advantages(level, jnp.einsum("na,nam->nm", B, V[:, 0] + V[:, 1]),
                                               schedule.replacement)
            Tadv = jnp.einsum("nwam,nwm->nwa", V, jnp.stack([H1, H0, H1, H0], axis=1))
            T = jnp.concatenate([jnp.stack([Tadv[:, 0] + Tadv[:, 1], Tadv[:, 2] + Tadv[:, 3]], 1), T[:, 2:]], 1)
        e1 = (B[:, None, :] * n1 * T).sum(-1)  # [N, 4]: E[n1 f(n1)]
        e0 = (B[:, None, :] * (G - n1) * T).sum(-1)  # E[n0 f(n1)]
        w1, w0 = cls * pi / jnp.maximum(pi1, 1e-38), (1 - cls) * pi / jnp.maximum(pi0, 1e-38)
        g_adv = (w1 * e1[:, 1:2] + w0 * e0[:, 0:1]) / G
        nu = (w1 * e1[:, 2:3] + w0 * e0[:, 2:3]) / G
        q, r = (B * T[:, 2]).sum(-1), (B * T[:, 3]).sum(-1)
    incl, pm = batch_scale(algo, schedule, q, n_prompts)
    scale = incl if pm is None else incl * (pm / (1.0 + jnp.arange(pm.shape[-1]))).sum(-1, keepdims=True)
    adv_scale = incl if level is not None else scale  # a batch-level advantage carries its weight already
    grad = -adv_scale * (g_adv - pi * g_adv.sum(-1, keepdims=True)) + scale * node_gradient(algo, pi, logq, ref, nu, hp)
    new = logits - hp.lr * grad
    return new, {"reward_mean": r.mean(), "kept_frac": q.mean(), "clip_frac": jnp.zeros((), real())}



def level_tables(algo: AlgoSpec, schedule: Schedule):
    """A batch-level estimator's tables for :func:`linear_step` (``None`` for the other estimators)."""
    if not batch_level(algo.estimator):
        return None
    A1, A0 = batch.advantage_tables(algo, schedule)  # float64: cast to the program's type where used
    return A1, A0, batch.statistic(algo.estimator, schedule.group_size)
