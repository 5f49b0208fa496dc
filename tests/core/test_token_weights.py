"""The token-weight stage (tabsim.sim.algos.token_weights): hand-computed weights, reference reimplementations of
TRL's high-entropy mask and of the GTPO authors' conflict mask, and the hook in policy_loss."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tabsim.config import ConfigError, resolve
from tabsim.config.static import algo_spec, make_env, schedule
from tabsim.sim.algos import AlgoSpec, policy_loss, reads_logp_only
from tabsim.sim.algos.token_weights import TOKEN_WEIGHTS, masked_quantile, token_weights
from tabsim.sim.params import Hyper

# one compiled program per call: run eagerly, each of their operations is compiled on its own
jit_weights = jax.jit(token_weights, static_argnums=0)
jit_loss = jax.jit(policy_loss, static_argnums=0)


def logq_with_entropies(h):
    """``[B, G, T, 2]`` log distributions over two actions whose entropies are ``h`` (each in ``(0, log 2]``)."""
    h = np.asarray(h, np.float64)
    p = np.empty_like(h)
    for idx, target in np.ndenumerate(h):  # bisection on p in (0, 1/2]: H(p) is increasing there
        lo, hi = 1e-12, 0.5
        for _ in range(80):
            mid = (lo + hi) / 2
            ent = -(mid * np.log(mid) + (1 - mid) * np.log(1 - mid))
            lo, hi = (mid, hi) if ent < target else (lo, mid)
        p[idx] = (lo + hi) / 2
    return jnp.asarray(np.log(np.stack([p, 1 - p], -1)), jnp.float32)


# -- top_entropy: TRL's get_high_entropy_mask -----------------------------------------------------------
def trl_high_entropy_mask(entropies, mask, top_entropy_quantile):
    """TRL's rule, written from ``GRPOTrainer.get_high_entropy_mask`` and its call in ``_compute_loss``: the
    threshold is ``torch.quantile`` (linear) at ``1 - top_entropy_quantile`` of the unmasked entropies; keep
    ``entropies * mask >= threshold`` on unmasked tokens; no unmasked token: all false."""
    local = entropies[mask.astype(bool)].astype(np.float32)
    if local.size == 0:
        return np.zeros(entropies.shape, bool)
    threshold = np.quantile(local, 1.0 - top_entropy_quantile)  # numpy's default "linear" = torch.quantile's
    return ((entropies * mask) >= threshold) & mask.astype(bool)


def test_top_entropy_keeps_the_tokens_at_or_above_the_quantile_by_hand():
    # five unmasked tokens, entropies 0.1 .. 0.5, one masked (0.6): the 0.8 quantile is at position 0.8 * 4 = 3.2,
    # 0.4 + 0.2 (0.5 - 0.4) = 0.42, so keeping 20% keeps only the 0.5 token; keeping 40% (0.6 quantile, position
    # 2.4: 0.34) keeps 0.4 and 0.5
    h = np.array([[[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]]])
    mask = np.array([[[1, 1, 1], [1, 1, 0]]], np.float32)
    assert float(masked_quantile(jnp.asarray(h, jnp.float32), jnp.asarray(mask), 0.8)) == pytest.approx(0.42)
    logq = logq_with_entropies(h)
    for keep, want in ((0.2, [[0, 0, 0], [0, 1, 0]]), (0.4, [[0, 0, 0], [1, 1, 0]]), (1.0, [[1, 1, 1], [1, 1, 0]])):
        w = jit_weights("top_entropy", logq, jnp.zeros(mask.shape, jnp.int32), jnp.asarray(mask), None,
                        Hyper(top_entropy_quantile=keep))
        np.testing.assert_array_equal(np.asarray(w)[0], want)


@pytest.mark.parametrize("keep", [0.2, 0.5, 0.8])
def test_top_entropy_is_trls_mask(keep):
    rng = np.random.default_rng(7)
    h = rng.uniform(0.01, 0.69, (3, 4, 5))
    h[0, 0, :2] = h[1, 2, 0]  # ties across the batch
    mask = (rng.uniform(size=h.shape) < 0.7).astype(np.float32)
    logq = logq_with_entropies(h)
    got = np.asarray(token_weights("top_entropy", logq, jnp.zeros(h.shape, jnp.int32), jnp.asarray(mask), None,
                                   Hyper(top_entropy_quantile=keep)))
    # the entropies as the component sees them (float32, from logq) are TRL's input
    h32 = np.asarray(-(jnp.exp(logq) * logq).sum(-1))
    np.testing.assert_array_equal(got, trl_high_entropy_mask(h32, mask, keep).astype(np.float32))
    empty = token_weights("top_entropy", logq, jnp.zeros(h.shape, jnp.int32), jnp.zeros(h.shape), None,
                          Hyper(top_entropy_quantile=keep))
    assert not np.asarray(empty).any()


# -- gtpo_conflict: the GTPO authors' build_conflict_mask -------------------------------------------------
def authors_conflict_weights(tokens, mask, adv, w):
    """One group's weights as the GTPO authors' trainer builds them (``build_conflict_mask``, then the loss's
    division by the completion's conflict count), written as loops over positions: the initial run of
    positions where a positive and a negative completion share the token, from the start and (aligned on
    the last token) from the end; conflict tokens weigh ``w`` in positive, 0 in negative completions; the
    two runs multiply; completions with A = 0 keep weight 1."""
    G, T = tokens.shape
    n = mask.sum(-1).astype(int)
    pos, neg = adv > 0, adv < 0
    out = mask.astype(float).copy()

    def shared(i, at):  # at(j) -> the position of completion j to compare with, or None
        x = tokens[i, at(i)]
        hit = lambda group: any(group[j] and at(j) is not None and tokens[j, at(j)] == x for j in range(G))  # noqa
        return hit(pos) and hit(neg)

    for i in range(G):
        if not (pos[i] or neg[i]):
            continue
        fwd, bwd = np.zeros(T, bool), np.zeros(T, bool)
        for t in range(n[i]):
            if not shared(i, lambda j, t=t: t if t < n[j] else None):
                break
            fwd[t] = True
        for s in range(n[i]):
            if not shared(i, lambda j, s=s: n[j] - 1 - s if s < n[j] else None):
                break
            bwd[n[i] - 1 - s] = True
        c = w if pos[i] else 0.0
        n_conflict = max(1, int((fwd | bwd).sum()))
        for t in range(n[i]):
            out[i, t] = (c if fwd[t] else 1.0) * (c if bwd[t] else 1.0) / n_conflict
    return out


# depth-3 answers over tokens {0 = STOP, 1, 2}: a0 = 1 2 STOP (+), a1 = 1 1 STOP (-), a2 = 2 STOP (+), a3 = 1 2 1 (-)
GROUP_TOKENS = np.array([[1, 2, 0], [1, 1, 0], [2, 0, 0], [1, 2, 1]])
GROUP_MASK = np.array([[1, 1, 1], [1, 1, 1], [1, 1, 0], [1, 1, 1]], np.float32)
GROUP_ADV = np.array([1.0, -1.0, 1.0, -1.0], np.float32)


def test_gtpo_conflict_weights_by_hand():
    """From the start: a0 conflicts at every position (1 with a1/a3, 2 with a3, STOP with a1), a1 at its first
    token, a3 at its first two, a2 nowhere. From the end: the last tokens STOP (a0, a2 and a1) conflict, then 2
    (a0, a2 with a3), then 1 (a0 with a1/a3); a3's last token 1 meets no positive. So a0: w^2 / 3 on each of its
    3 tokens; a1: [0, 1, 0] / 2; a2: [w, w] / 2; a3: [0, 0, 1] / 2."""
    w = np.asarray(jit_weights("gtpo_conflict", None, jnp.asarray(GROUP_TOKENS)[None], jnp.asarray(GROUP_MASK)[None],
                               jnp.asarray(GROUP_ADV)[None], Hyper(gtpo_conflict_weight=2.0)))[0]
    want = np.array([[4 / 3, 4 / 3, 4 / 3], [0, 0.5, 0], [1, 1, 0], [0, 0, 0.5]])
    np.testing.assert_allclose(w, want, rtol=1e-6)
    np.testing.assert_allclose(w, authors_conflict_weights(GROUP_TOKENS, GROUP_MASK, GROUP_ADV, 2.0), rtol=1e-6)


def test_gtpo_conflict_is_the_authors_mask_on_random_groups():
    rng = np.random.default_rng(3)
    B, G, T = 6, 5, 4
    tokens = rng.integers(0, 3, (B, G, T))
    n = rng.integers(1, T + 1, (B, G))
    mask = (np.arange(T) < n[..., None]).astype(np.float32)
    tokens = np.where(mask > 0, tokens, 0)
    adv = rng.choice([-1.0, 0.0, 0.5, 1.0], (B, G)).astype(np.float32)
    got = np.asarray(jit_weights("gtpo_conflict", None, jnp.asarray(tokens), jnp.asarray(mask), jnp.asarray(adv),
                                 Hyper(gtpo_conflict_weight=3.0)))
    want = np.stack([authors_conflict_weights(tokens[b], mask[b], adv[b], 3.0) for b in range(B)])
    np.testing.assert_allclose(got, want, rtol=1e-6)


# -- the hook in policy_loss ------------------------------------------------------------------------------
def _loss_inputs():
    rng = np.random.default_rng(0)
    logits = jnp.asarray(rng.normal(size=(2, 3, 2, 3)), jnp.float32)
    logq = jax.nn.log_softmax(logits, -1)
    tokens = jnp.asarray(rng.integers(0, 3, (2, 3, 2)))
    mask = jnp.asarray([[[1, 1], [1, 0], [1, 1]], [[1, 1], [1, 1], [0, 0]]], jnp.float32)
    adv = jnp.asarray([[1.0, -0.5, -0.5], [0.7, -0.7, 0.0]])
    logp_old = jnp.take_along_axis(logq, tokens[..., None], -1)[..., 0] - 0.1
    return logq, tokens, mask, adv, logp_old


def test_policy_loss_weighs_the_surrogate_tokens_only():
    """token-mean of w_t (-A_t clip(...)) plus beta token-mean of the KL, unweighted; denominators count every
    unmasked token (TRL multiplies the per-token surrogate by the mask before adding the KL)."""
    logq, tokens, mask, adv, logp_old = _loss_inputs()
    hp = Hyper(top_entropy_quantile=0.5, beta=0.3, eps_low=0.2, eps_high=0.2)
    spec = AlgoSpec(token_weight="top_entropy", kl_placement="loss", kl="k3", aggregation="token-mean")
    got = float(jit_loss(spec, logq, tokens, mask, adv, logp_old, jnp.zeros_like(logq) - np.log(3.0), hp)[0])
    lq, tk, m = np.asarray(logq, np.float64), np.asarray(tokens), np.asarray(mask)
    logp = np.take_along_axis(lq, tk[..., None], -1)[..., 0]
    h = -(np.exp(lq) * lq).sum(-1)
    keep = trl_high_entropy_mask(h.astype(np.float32), m, 0.5)
    w = np.exp(logp - np.asarray(logp_old))
    a = np.asarray(adv)[..., None]
    surr = np.maximum(-a * w, -a * np.clip(w, 0.8, 1.2)) * keep
    d = -np.log(3.0) - logp
    kl = np.exp(d) - d - 1.0
    want = (surr * m).sum() / m.sum() + 0.3 * (kl * m).sum() / m.sum()
    assert got == pytest.approx(want, rel=1e-5)


def test_keeping_every_token_is_no_weight_and_dropped_tokens_get_no_gradient():
    logq, tokens, mask, adv, logp_old = _loss_inputs()
    plain = AlgoSpec(aggregation="token-mean")
    weighted = AlgoSpec(aggregation="token-mean", token_weight="top_entropy")
    args = (tokens, mask, adv, logp_old, None)
    assert float(jit_loss(weighted, logq, *args, Hyper(top_entropy_quantile=1.0))[0]) == \
        float(jit_loss(plain, logq, *args, Hyper())[0])
    # gtpo_conflict reads the sampled tokens only: the loss may be given logp alone; top_entropy needs logq
    assert reads_logp_only(AlgoSpec(token_weight="gtpo_conflict")) and not reads_logp_only(weighted)
    hp = Hyper(top_entropy_quantile=0.3)
    keep = np.asarray(jit_weights("top_entropy", logq, tokens, mask, adv, hp))
    logp = jnp.take_along_axis(logq, tokens[..., None], -1)[..., 0]
    g = np.asarray(jax.jit(jax.grad(lambda lp: policy_loss(weighted, logq, *args, hp, logp=lp)[0]))(logp))
    assert (g[keep == 0] == 0).all() and (g[keep > 0] != 0).all()


def test_token_weights_are_registered_and_configured():
    assert {"top_entropy", "gtpo_conflict"} <= set(TOKEN_WEIGHTS)
    cfg = resolve({"algo": {"token_weight": "top_entropy", "top_entropy_quantile": 0.2}})
    assert cfg.hyper_values()["top_entropy_quantile"] == pytest.approx(0.2)
    assert algo_spec(cfg).token_weight == "top_entropy" and algo_spec(resolve({})).token_weight == "none"
    with pytest.raises(ConfigError, match="algo.token_weight"):
        resolve({"algo": {"token_weight": "entropy80"}})
    with pytest.raises(ConfigError, match="top_entropy_quantile"):
        resolve({"algo": {"token_weight": "top_entropy", "top_entropy_quantile": 0.0}})


def test_the_exact_flow_refuses_a_token_weight():
    from tabsim.sim.expected import flow
    cfg = resolve({"algo": {"token_weight": "top_entropy"}, "task": {"n_prompts": 2, "n_answers": 3, "n_correct": 1},
                   "train": {"group_size": 2, "batch_size": 2}})
    with pytest.raises(ValueError, match="token_weight"):
        flow.check(make_env(cfg), algo_spec(cfg), schedule(cfg), tuple(cfg.arms.arms))
