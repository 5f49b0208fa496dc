"""The last differences from the trainers, each pinned with a small hand-computed case.

* verl's ``low_var_kl`` clamps k3 to [-10, 10] (``kl="low_var_kl"``); TRL's k3 does not (``kl="k3"``).
* verl's REINFORCE++ with the KL in the reward gives each token its return to go.
* docs/presets.md names the settings that make each trainer's column exact.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tabsim.sim.algos import KL_ESTIMATORS, AlgoSpec, closed_form, policy_loss
from tabsim.sim.algos.advantages import ESTIMATORS, reinforce_pp_token_returns
from tabsim.sim.engine import Schedule, TrainState, make_update
from tabsim.sim.envs.tree import TreeEnv
from tabsim.sim.params import Hyper
from tabsim.sim.rng import seed_words

from f32_tolerance import f32_bound  # tests/core: the float32 error bounds
from jit_task import init_task  # tests/core: the task from one compiled program

DOCS = Path(__file__).resolve().parents[2] / "docs" / "presets.md"


# -- low_var_kl ---------------------------------------------------------------------------------
def _kl_and_grad(name, p, p_ref):
    lp, lr = jnp.log(jnp.float32(p)), jnp.log(jnp.float32(p_ref))
    f = lambda x: KL_ESTIMATORS[name](x, lr, None, None)  # noqa: E731
    return float(f(lp)), float(jax.grad(f)(lp))


def test_low_var_kl_clamp_binds_where_the_reference_is_much_likelier():
    # policy 0.02, reference 0.5: l = log(0.04); k3 = 25 + log(0.04) - 1 = 20.781, dk3/dlogp = 1 - 25 = -24
    k3, g3 = _kl_and_grad("k3", 0.02, 0.5)
    # float32: casts, two logs, their difference, exp and a sum (6 roundings), the exp's derivative 25 scaling l's
    tol = f32_bound(6, 25.0)
    assert k3 == pytest.approx(24.0 + math.log(0.04), abs=tol)
    assert g3 == pytest.approx(-24.0, abs=tol)
    clamped, g = _kl_and_grad("low_var_kl", 0.02, 0.5)
    assert clamped == 10.0 and g == 0.0
    # the closed form's derivative agrees (0 where the clamp binds)
    assert float(closed_form.KL_TOKEN_DERIVATIVES["low_var_kl"](jnp.log(jnp.float32(0.04)))) == 0.0


def test_low_var_kl_equals_k3_where_the_clamp_does_not_bind():
    # policy 0.3, reference 0.5: l = log(0.6); k3 = 1/0.6 + log(0.6) - 1 = 0.15584, derivative 1 - 1/0.6
    # float32: the cast of 0.3, two logs, their difference, exp and two sums (6 roundings), the exp and its
    # derivative 1/0.6 scaling l's error
    tol = f32_bound(6, 1 / 0.6)
    for name in ("k3", "low_var_kl"):
        v, g = _kl_and_grad(name, 0.3, 0.5)
        assert v == pytest.approx(1 / 0.6 + math.log(0.6) - 1, abs=tol)
        assert g == pytest.approx(1 - 1 / 0.6, abs=tol)
    # the clamp starts at k3 = 10: a reference about 13.6 times the policy probability
    edge = -2.6  # exp(2.6) - 2.6 - 1 = 9.86 < 10; exp(2.7) - 3.7 = 11.18 > 10
    assert float(KL_ESTIMATORS["low_var_kl"](jnp.float32(edge), 0.0, None, None)) < 10.0
    assert float(KL_ESTIMATORS["low_var_kl"](jnp.float32(-2.7), 0.0, None, None)) == 10.0


def test_low_var_kl_in_the_loss_has_no_gradient_on_a_clamped_token():
    """A one-answer batch whose token is clamped: the loss gradient is the policy term alone."""
    logits = jnp.log(jnp.asarray([[0.02, 0.5, 0.48]], jnp.float32))
    ref = jnp.log(jnp.asarray([[0.5, 0.25, 0.25]], jnp.float32))
    tokens = jnp.zeros((1, 1, 1), jnp.int32)
    mask = jnp.ones((1, 1, 1), jnp.float32)
    adv = jnp.zeros((1, 1), jnp.float32)  # no policy term: the gradient is the KL's alone
    hp = Hyper(beta=1.0)

    def grad(kl):
        spec = AlgoSpec(surrogate="reinforce", kl=kl, kl_placement="loss")

        def loss(z):
            logq = jax.nn.log_softmax(z)[:, None, None, :]
            logp_old = jax.lax.stop_gradient(logq[..., :1])  # ratio 1 (not read by ``reinforce``)
            return policy_loss(spec, logq, tokens, mask, adv, logp_old, jnp.broadcast_to(ref[:, None, None, :],
                                                                                         logq.shape), hp)[0]
        return np.asarray(jax.grad(loss)(logits))

    np.testing.assert_allclose(grad("low_var_kl"), 0.0, atol=0)  # a zero cotangent through log_softmax: exact
    # k3: -24 (onehot(0) - pi) at pi = (0.02, 0.5, 0.48)
    # float32: the log-softmax of 3 logits (~6 roundings) and the k3 chain (6) times its derivative 25
    np.testing.assert_allclose(grad("k3"), -24.0 * (np.array([[1.0, 0, 0]]) - [[0.02, 0.5, 0.48]]),
                               rtol=0, atol=f32_bound(12, 25.0))


# -- REINFORCE++ returns to go ------------------------------------------------------------------
def test_reinforce_pp_token_returns_hand_computed():
    # two answers: rewards 1 (two tokens, beta kl 0.1 and 0.2) and 0 (one token, beta kl 0.3)
    rewards = jnp.asarray([[1.0, 0.0]])
    penalty = jnp.asarray([[[0.1, 0.2], [0.3, 0.0]]])
    mask = jnp.asarray([[[1.0, 1.0], [1.0, 0.0]]])
    adv = np.asarray(reinforce_pp_token_returns(rewards, penalty, mask=mask, valid=jnp.ones(1)))
    # returns to go 0.7, 0.8 and -0.3: mean 0.4, unbiased variance 0.74 / 2 = 0.37
    sd = math.sqrt(0.37 + 1e-8)
    # float32: returns to go (3), the mean and variance of 3 tokens (9), sqrt, +eps and the quotient (3):
    # 15 roundings on values up to 0.7 / sd = 1.15
    np.testing.assert_allclose(adv, [[[0.3 / sd, 0.4 / sd], [-0.7 / sd, 0.0]]], rtol=0, atol=f32_bound(15, 0.7 / sd))
    # the whole answer's KL (the outcome estimators' convention) gives other values
    whole = ESTIMATORS["reinforce_pp"](rewards - (penalty * mask).sum(-1), lengths=mask.sum(-1), valid=jnp.ones(1),
                                       hp=Hyper())
    assert abs(float(whole[0, 0]) - adv[0, 0, 0]) > 0.05


def test_reinforce_pp_token_returns_on_one_token_answers_is_the_outcome_estimator():
    rng = np.random.default_rng(0)
    rewards = jnp.asarray(rng.integers(0, 2, (3, 4)), jnp.float32)
    penalty = jnp.asarray(rng.normal(scale=0.1, size=(3, 4, 1)), jnp.float32)
    valid = jnp.asarray([1.0, 0.0, 1.0])
    tok = reinforce_pp_token_returns(rewards, penalty, mask=jnp.ones((3, 4, 1)), valid=valid)[..., 0]
    out = ESTIMATORS["reinforce_pp"](rewards - penalty[..., 0], lengths=jnp.ones((3, 4)), valid=valid, hp=Hyper())
    # the same returns r - beta kl whitened by two programs, each summing the 12 entries in its own order:
    # the mean errs by 12 u max|x| (over the std: max|x| / sd in A), the variance, rsqrt and products by
    # about 12 + 4 roundings of |A|: f32_bound(2 * 12 + 4, .) each
    x = np.asarray(rewards - penalty[..., 0])[np.asarray(valid) > 0]
    tol = 2 * f32_bound(2 * 12 + 4, np.abs(x).max() / x.std(ddof=1) + np.abs(np.asarray(out)).max())
    np.testing.assert_allclose(tok, out, rtol=0, atol=tol)


def test_tree_engine_uses_returns_to_go_for_reinforce_pp(monkeypatch):
    """On a tree with the KL in the reward the update differs from the whole-answer-KL one."""
    env = TreeEnv(n_prompts=4, n_answers=4, n_correct=1, depth=2, branching=3)  # answers of 1 or 2 tokens
    spec = AlgoSpec(estimator="reinforce_pp", kl="k1", kl_placement="reward")
    sched = Schedule(steps=1, batch_size=4, group_size=4, eval_every=1)
    seed = jnp.asarray(seed_words(3))
    hp = Hyper(beta=0.5, lr=1.0, filter=0.0, prior_strength=0.5)
    task = init_task(env, seed, hp)
    # the policy moved away from the reference, so the KL terms are not zero
    noise = jax.jit(jax.random.normal, static_argnums=1)(jax.random.key(0), task.prior_logits.shape)
    logits = task.prior_logits + noise
    state = TrainState(logits=logits, opt_state=(), seed=seed, step=jnp.zeros((), jnp.int32))

    def step():
        update = jax.jit(make_update(env, spec, sched, ("true",)), static_argnums=2)
        return np.asarray(update(state, task, 0, hp)[0].logits)

    per_token = step()
    import tabsim.sim.update as update_mod

    monkeypatch.setattr(update_mod, "TOKEN_RETURNS", {})
    whole = step()
    assert np.abs(per_token - whole).max() > 1e-3


# -- docs/presets.md ----------------------------------------------------------------------------
def _rows():
    rows = {}
    for line in DOCS.read_text().splitlines():
        m = re.match(r"\| `(\w+)` \|", line)
        if m:
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            rows[m.group(1)] = dict(zip(("preset", "tabsim", "trl", "verl"), cells))
    return rows


@pytest.mark.parametrize("name", ["grpo", "dr_grpo", "dapo", "reinforce_pp", "spurious_rewards"])
def test_docs_verl_columns_name_the_dual_clip(name):
    assert 'algo.surrogate="dual_clip"' in _rows()[name]["verl"]


@pytest.mark.parametrize("name", ["gspo", "cispo", "sapo"])
def test_docs_trl_columns_name_trls_eps(name):
    assert "algo.std_eps=1e-4" in _rows()[name]["trl"]


def test_docs_name_the_checked_versions_and_the_clamp():
    text = DOCS.read_text()
    assert "TRL 1.16" not in text and "(1.16" not in text
    assert "v1.9.0" in text and "1.10.0.dev0" in text and "verl 0.9.0" in text
    assert 'algo.kl="low_var_kl"' in _rows()["grpo"]["verl"]
    assert "They bind only far outside" not in text.split("low_var_kl` clamp")[1].split("\n- ")[0]
    assert "20.78" in text
