"""GVPO (arXiv 2504.19599) and KL-Cov (arXiv 2505.22617): the optimum GVPO's loss reaches, its on-policy gradient,
KL-Cov's selection by hand and its reduction to the unclipped importance loss."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from tabsim.sim.algos import AlgoSpec, batch, policy_loss
from tabsim.sim.algos.surrogates import kl_cov_selected
from tabsim.sim.params import Hyper


@functools.partial(jax.jit, static_argnums=0)
def _surrogate(name, log_ratio, logp, adv, hp, mask, logp_old=None):
    """``batch.surrogate`` compiled once per call shape (op-by-op dispatch compiles each small op: seconds)."""
    return batch.surrogate(name, log_ratio, logp, adv, hp, mask=mask, logp_old=logp_old)


def _bandit(spec, logits, tokens, mask, adv, logp_old, hp):
    logq = jnp.broadcast_to(jax.nn.log_softmax(logits, -1)[:, None, None, :], tokens.shape + (logits.shape[-1],))
    return policy_loss(spec, logq, tokens, mask, adv, logp_old, jax.lax.stop_gradient(logq), hp)[0]


def test_gvpo_one_exact_step_reaches_pi_old_times_exp_reward_over_beta():
    """Every one of K answers sampled once: the mean over answers of (1/2)(beta (l_i - mean l) - (r_i - mean r))^2
    is quadratic in the logits with Hessian (beta^2 / K)(I - 11^T / K), so one SGD step of lr K / beta^2 from the
    rollout policy lands on its minimum, pi_old(a) exp(r_a / beta) normalised (the paper's KL-regularised optimum
    with the rollout policy as reference)."""
    K, beta = 5, 0.5
    rng = np.random.default_rng(0)
    with jax.enable_x64(True):
        z = jnp.asarray(rng.normal(size=(1, K)))
        r = jnp.asarray(rng.random((1, K)))
        tokens = jnp.arange(K)[None, :, None]
        mask = jnp.ones((1, K, 1))
        logp_old = jnp.take_along_axis(jax.nn.log_softmax(z, -1), tokens[..., 0], -1)[..., None]
        spec = AlgoSpec(estimator="dr_grpo", surrogate="gvpo", aggregation="seq-mean-token-mean")
        hp = Hyper(gvpo_beta=beta)
        adv = r - r.mean(-1, keepdims=True)
        g = jax.jit(jax.grad(lambda x: _bandit(spec, x, tokens, mask, adv, logp_old, hp)))(z)
        new = jax.nn.softmax(z - K / beta**2 * g, -1)
        want = jax.nn.softmax(z + r / beta, -1)
    np.testing.assert_allclose(np.asarray(new), np.asarray(want), rtol=1e-12, atol=1e-14)
    assert np.abs(np.asarray(want - jax.nn.softmax(z, -1))).max() > 0.05  # a real move


def test_gvpo_on_policy_gradient_is_beta_times_reinforce_on_token_sums():
    """On-policy (logp_old = logp) every implicit reward is 0 and the gradient is -beta sum_i A_i grad logp(o_i) for
    centred advantages: beta times REINFORCE with each answer's token sum (multi-token answers of varied length)."""
    rng = np.random.default_rng(1)
    B, G, T, A, beta = 3, 4, 3, 4, 0.3
    with jax.enable_x64(True):
        logq = jnp.asarray(np.log(rng.dirichlet(np.ones(A), size=(B, G, T))))
        tokens = jnp.asarray(rng.integers(0, A, size=(B, G, T)))
        lengths = rng.integers(1, T + 1, size=(B, G))
        mask = jnp.asarray((np.arange(T) < lengths[..., None]).astype(float))
        adv = rng.normal(size=(B, G))
        adv = jnp.asarray(adv - adv.mean(-1, keepdims=True))
        logp_old = jnp.take_along_axis(logq, tokens[..., None], -1)[..., 0]
        hp = Hyper(gvpo_beta=beta)

        def grad(spec):
            return jax.jit(jax.grad(lambda q: policy_loss(spec, q, tokens, mask, adv, logp_old, q, hp)[0]))(logq)

        gvpo = grad(AlgoSpec(surrogate="gvpo", aggregation="seq-mean-token-mean"))
        reinforce = grad(AlgoSpec(surrogate="reinforce", aggregation="seq-mean-token-sum"))
    np.testing.assert_allclose(np.asarray(gvpo), beta * np.asarray(reinforce), rtol=1e-10, atol=1e-13)
    assert np.abs(np.asarray(reinforce)).max() > 1e-3


def test_gvpo_by_hand():
    """One group of two one-token answers, log-ratios 0.2 and -0.2, beta 0.5, A = +-0.5: s = +-0.1, so the gaps are
    0.1 - 0.5 = -0.4 and -0.1 + 0.5 = 0.4 and each loss is 0.08."""
    l = jnp.asarray([[[0.2], [-0.2]]])
    got = _surrogate("gvpo", l, l, jnp.asarray([[[0.5], [-0.5]]]), Hyper(gvpo_beta=0.5), jnp.ones_like(l),
                     jnp.zeros_like(l))
    np.testing.assert_allclose(np.asarray(got)[0, :, 0], [0.08, 0.08], rtol=1e-6)


def test_kl_cov_selects_the_largest_covariances_by_hand():
    """Four valid tokens (the fifth is padding): A = (1, 1, -1, -1), logp = (-0.5, -2, -1, -0.1); means 0 and -0.9,
    covariances (0.4, -1.1, 0.1, -0.8). Ratio 0.5 picks floor(4 * 0.5) = 2 tokens (the first and third); a tiny
    ratio still picks one (the first); the padding never counts."""
    adv = jnp.asarray([[[1.0], [1.0], [-1.0], [-1.0]]])
    logp = jnp.asarray([[[-0.5, 0.0], [-2.0, 0.0], [-1.0, 0.0], [-0.1, 9.0]]])
    mask = jnp.asarray([[[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [1.0, 0.0]]])
    select = jax.jit(kl_cov_selected)
    two = select(adv, logp, mask, Hyper(kl_cov_ratio=0.5))
    one = select(adv, logp, mask, Hyper(kl_cov_ratio=2e-4))
    assert np.asarray(two)[0, :, 0].tolist() == [True, False, True, False] and not np.asarray(two)[..., 1].any()
    assert np.asarray(one)[0, :, 0].tolist() == [True, False, False, False]
    l = jnp.asarray([[[0.3, 0.0], [0.1, 0.0], [-0.2, 0.0], [0.05, 0.0]]])
    got = _surrogate("kl_cov", l, logp, adv, Hyper(kl_cov_ratio=0.5, kl_cov_coef=2.0), mask)
    want = [-np.exp(0.3) + 0.6, -np.exp(0.1), np.exp(-0.2) + 0.4, np.exp(0.05)]
    np.testing.assert_allclose(np.asarray(got)[0, :, 0], want, rtol=1e-6)


def test_kl_cov_without_its_penalty_is_the_importance_loss():
    rng = np.random.default_rng(3)
    with jax.enable_x64(True):
        logits = jnp.asarray(rng.normal(size=(3, 5)))
        tokens = jnp.asarray(rng.integers(0, 5, size=(3, 4, 2)))
        mask = jnp.ones((3, 4, 2)).at[:, :, 1].set(0.0)
        adv = jnp.asarray(rng.normal(size=(3, 4)))
        logp_old = jnp.asarray(rng.normal(scale=0.3, size=(3, 4, 2))) - 1.5
        out = {}
        for name, coef in (("kl_cov", 0.0), ("importance", 0.0), ("kl_cov_on", 1.0)):
            spec = AlgoSpec(surrogate=name.removesuffix("_on"))
            hp = Hyper(kl_cov_ratio=0.3, kl_cov_coef=coef)
            out[name] = jax.jit(jax.value_and_grad(lambda x: _bandit(spec, x, tokens, mask, adv, logp_old, hp)))(  # noqa: B023
                logits)
    np.testing.assert_allclose(out["kl_cov"][0], out["importance"][0], rtol=1e-12)
    np.testing.assert_allclose(out["kl_cov"][1], out["importance"][1], rtol=1e-12, atol=1e-15)
    assert abs(out["kl_cov_on"][0] - out["importance"][0]) > 1e-3  # the penalty does act when on


def test_disco_by_hand():
    """One group of three one-token answers, on-policy (the KL 0, so no constraint): the positive's log-probability
    -0.5, the negatives' -1 and -2, tau 1: J = -0.5 - log((e^-1 + e^-2) / 2) and every token holds -J."""
    logp = jnp.asarray([[[-0.5], [-1.0], [-2.0]]])
    adv = jnp.asarray([[[1.0], [-0.5], [-0.5]]])
    got = _surrogate("disco", logp, logp, adv, Hyper(disco_tau=1.0), jnp.ones_like(logp), logp)
    want = 0.5 + np.log((np.exp(-1.0) + np.exp(-2.0)) / 2)
    np.testing.assert_allclose(np.asarray(got)[0, :, 0], [want] * 3, rtol=1e-6)


def test_disco_constraint_gradient_is_the_squared_hinge():
    """Off-policy past the budget, the constraint's part of the gradient (beta > 0 less beta = 0) is the gradient of
    (beta / 2) max(KL - delta, 0)^2 with KL the mean of logp_old - logp over the valid tokens."""
    rng = np.random.default_rng(4)
    with jax.enable_x64(True):
        logp = jnp.asarray(np.log(rng.random((2, 4, 3))))
        logp_old = logp + 0.3 + jnp.asarray(rng.normal(scale=0.1, size=(2, 4, 3)))  # KL about 0.3
        mask = jnp.ones((2, 4, 3)).at[:, :2, 2].set(0.0)
        adv = jnp.asarray([[1.0, -1.0, 1.0, -1.0], [1.0, 1.0, -1.0, 0.0]])[..., None]

        def loss(lp, b):
            tok = _surrogate("disco", lp - logp_old, lp, adv, Hyper(disco_delta=0.1, disco_beta=b), mask, logp_old)
            return (tok * mask).sum() / mask.sum()

        def hinge(lp):
            kl = ((logp_old - lp) * mask).sum() / mask.sum()
            return 0.5 * 7.0 * jnp.maximum(kl - 0.1, 0.0) ** 2

        grad = jax.jit(jax.grad(loss))
        part = grad(logp, 7.0) - grad(logp, 0.0)
        want = jax.jit(jax.grad(hinge))(logp)
    np.testing.assert_allclose(np.asarray(part), np.asarray(want), rtol=1e-10, atol=1e-14)
    assert np.abs(np.asarray(want)).max() > 1e-3


def test_dcpo_bounds_by_hand():
    """eps 0.2 / 0.28: at q = 1 the bounds are (1 + sqrt(0.2)) / 2 = 0.7236 and (1 + sqrt(2.12)) / 2 = 1.2280; at
    q = 0.5, low = 1/2 (1 - 1.6 < 0) and high = (1 + sqrt(3.24)) / 2 = 1.4; at q = 1e-4 high is capped at max(c, 10)."""
    from tabsim.sim.algos.surrogates import dcpo_bounds
    low, high = jax.jit(dcpo_bounds)(jnp.log(jnp.asarray([1.0, 0.5, 1e-4])),
                                     Hyper(eps_low=0.2, eps_high=0.28, dual_clip_c=3.0))
    np.testing.assert_allclose(np.asarray(low), [(1 + np.sqrt(0.2)) / 2, 0.5, 0.5], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(high), [(1 + np.sqrt(2.12)) / 2, 1.4, 10.0], rtol=1e-6)


def test_dcpo_lets_a_rare_token_move_further_than_ppo():
    """Ratio 1.35 with A = 1: PPO's 1 + 0.28 holds it (loss -1.28, no gradient); DCPO lets a token of rollout
    probability 0.5 through (its bound 1.4), but holds one of probability 1 at 1.228; the clip fraction counts it."""
    l = jnp.log(jnp.asarray([[[1.35], [1.35]]]))
    old = jnp.log(jnp.asarray([[[0.5], [1.0]]]))
    adv = jnp.ones((1, 2, 1))
    hp = Hyper(eps_low=0.2, eps_high=0.28)
    got = _surrogate("dcpo", l, old + l, adv, hp, jnp.ones_like(l), old)
    np.testing.assert_allclose(np.asarray(got)[0, :, 0], [-1.35, -(1 + np.sqrt(2.12)) / 2], rtol=1e-6)
    from tabsim.sim.algos import clip_fraction
    frac = jax.jit(lambda *a: clip_fraction(*a, "dcpo", logp_old=old))(l, adv, jnp.ones_like(l), hp)
    assert float(frac) == 0.5


def test_real_on_policy_weights_by_hand():
    """On-policy every score is 0: a group of 2 positives and 1 negative with tau 0.5 has loss log 2 + log 3 and the
    gradient of a one-token answer's log-probability is -1/(tau 3) per positive and +1/(tau 2) for the negative
    (a softmax share against the anchor), over B = 1 group."""
    logp = jnp.log(jnp.asarray([[[0.5], [0.3], [0.2]]]))
    adv = jnp.asarray([[[1.0], [1.0], [-2.0]]])
    mask = jnp.ones_like(logp)

    def loss(lp):
        return _surrogate("real", lp - logp, lp, adv, Hyper(real_tau=0.5), mask, logp)[0, 0, 0]

    np.testing.assert_allclose(float(loss(logp)), np.log(2.0) + np.log(3.0), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(jax.jit(jax.grad(loss))(logp))[0, :, 0], [-2 / 3, -2 / 3, 1.0], rtol=1e-5)


def test_cumulative_ratio_carries_the_prefix_and_differentiates_the_token_alone():
    """Log-ratios (0.1, -0.3, 0.2): the cumulative ratio holds (0.1, -0.2, 0) and d log r_t / d logp_k is 1 for k = t
    only (the prefix's sum is detached, as the released code)."""
    from tabsim.sim.algos import RATIOS
    logp_old = jnp.zeros((1, 1, 3))
    logp = jnp.asarray([[[0.1, -0.3, 0.2]]])
    mask = jnp.ones((1, 1, 3))
    fn = jax.jit(lambda lp: RATIOS["cumulative"](lp, logp_old, mask))
    np.testing.assert_allclose(np.asarray(fn(logp))[0, 0], [0.1, -0.2, 0.0], atol=1e-7)
    jac = np.asarray(jax.jit(jax.jacobian(fn))(logp))[0, 0, :, 0, 0, :]
    np.testing.assert_allclose(jac, np.eye(3), atol=1e-7)


def test_ctpo_is_grpo_with_log_space_bounds_on_one_token_answers_and_differs_on_longer_ones():
    """One-token answers: the cumulative ratio is the token ratio, so CTPO's loss is the token-ratio loss (the same
    value and gradient); on three-token answers the prefixes change it."""
    rng = np.random.default_rng(6)
    hp = Hyper(ctpo_clip_low=0.1, ctpo_clip_high=0.15, ctpo_clip_c=0.3)
    with jax.enable_x64(True):
        logits = jnp.asarray(rng.normal(size=(3, 5)))
        old = logits + jnp.asarray(rng.normal(scale=0.3, size=(3, 5)))
        tokens = jnp.asarray(rng.integers(0, 5, size=(3, 4, 3)))
        adv = jnp.asarray(rng.normal(size=(3, 4)))
        logp_old = jnp.take_along_axis(jax.nn.log_softmax(old, -1)[:, None, None, :].repeat(4, 1).repeat(3, 2),
                                       tokens[..., None], -1)[..., 0]
        out = {}
        for T in (1, 3):
            mask = jnp.zeros((3, 4, 3)).at[..., :T].set(1.0)
            for ratio in ("cumulative", "token"):
                spec = AlgoSpec(ratio=ratio, surrogate="ctpo", aggregation="token-mean")
                out[T, ratio] = jax.jit(jax.value_and_grad(
                    lambda x: _bandit(spec, x, tokens, mask, adv, logp_old * mask, hp)))(logits)  # noqa: B023
    np.testing.assert_allclose(out[1, "cumulative"][0], out[1, "token"][0], rtol=1e-12)
    np.testing.assert_allclose(out[1, "cumulative"][1], out[1, "token"][1], rtol=1e-12, atol=1e-15)
    assert abs(out[3, "cumulative"][0] - out[3, "token"][0]) > 1e-4


def test_kl_cov_penalty_has_no_gradient_on_policy():
    """On-policy every log-ratio is 0: the penalised token's gradient is the importance loss's -A, as verl's
    torch.abs (gradient 0 at 0); jnp.abs would add coef there."""
    logp = jnp.log(jnp.asarray([[[0.5], [0.3], [0.2]]]))
    adv = jnp.asarray([[[1.0], [1.0], [-2.0]]])
    mask = jnp.ones_like(logp)
    hp = Hyper(kl_cov_ratio=0.5, kl_cov_coef=1.0)  # one token of three penalised
    grad = jax.jit(jax.grad(lambda lp: _surrogate("kl_cov", lp - logp, lp, adv, hp, mask).sum()))(logp)
    np.testing.assert_allclose(np.asarray(grad)[0, :, 0], [-1.0, -1.0, 2.0], rtol=1e-6)
