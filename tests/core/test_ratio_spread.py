"""The optional metric log_ratio_range (tabsim.sim.ratio_spread): the range of the token log importance ratios over
a step's updates, as GMPO's released trainer logs it (arXiv 2507.20673; callsys/GMPO train_zero_math_gmpo.py: the
largest and smallest ``(new_logps - old_logps) * response_mask`` over the step's minibatches)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tabsim import ConfigError, resolve
from tabsim.sim import ratio_spread


def np_range(logp_updates, logp_old, mask):
    """NumPy reference, written from the authors' logging: per update the max and min of the masked log-ratio
    (a masked position counts as 0), then the largest max less the smallest min over the step's updates."""
    lr = [(np.asarray(lp) - np.asarray(logp_old)) * np.asarray(mask) for lp in logp_updates]
    return max(x.max() for x in lr) - min(x.min() for x in lr)


def jnp_range(logp_updates, logp_old, mask):
    per = [ratio_spread.extremes(jnp.asarray(lp), jnp.asarray(logp_old), jnp.asarray(mask)) for lp in logp_updates]
    stacked = {k: jnp.stack([p[k] for p in per]) for k in ratio_spread.KEYS}
    return float(ratio_spread.step_range(stacked))


def test_hand_values():
    """Two updates of one group of two paths of two tokens: log-ratios (0, 0.5 | 0.2, -0.3) then (0.1, 0.7 | -0.4,
    padding 9): the padded 9 is not a token, so the range is 0.7 - (-0.4) = 1.1."""
    old = np.zeros((1, 2, 2), np.float32)
    mask = np.array([[[1, 1], [1, 0]]], np.float32)
    ups = [np.array([[[0.0, 0.5], [0.2, -0.3]]], np.float32), np.array([[[0.1, 0.7], [-0.4, 9.0]]], np.float32)]
    assert jnp_range(ups, old, mask) == pytest.approx(1.1, abs=1e-6)
    assert np_range(ups, old, mask) == pytest.approx(1.1, abs=1e-6)
    # every ratio above 1: the range still reaches down to 0 (the authors' masked minimum)
    assert jnp_range([np.full((1, 2, 2), 0.3, np.float32)], old, np.ones((1, 2, 2), np.float32)) == \
        pytest.approx(0.3, abs=1e-6)


def test_matches_the_numpy_reference_on_random_batches():
    rng = np.random.default_rng(0)
    for _ in range(20):
        shape = (3, 4, 5)
        old = rng.normal(-1.5, 0.5, shape).astype(np.float32)
        mask = (rng.random(shape) < 0.7).astype(np.float32)
        ups = [old + rng.normal(0, 0.2, shape).astype(np.float32) for _ in range(rng.integers(1, 5))]
        assert jnp_range(ups, old, mask) == pytest.approx(np_range(ups, old, mask), abs=1e-5)


def test_no_old_log_probabilities_is_one_on_policy_update():
    e = ratio_spread.extremes(jnp.zeros((2, 3, 1)), None, jnp.ones((2, 3, 1)))
    assert float(e["log_ratio_max"]) == 0.0 and float(e["log_ratio_min"]) == 0.0


def test_the_wrapper_adds_the_extremes_and_keeps_the_gradient():
    """``with_extremes`` leaves the gradient and the existing diagnostics as they were and adds the extremes of
    the log-probabilities ``logp_now`` reads at the logits the gradient is taken at."""
    logp_old = jnp.asarray([[[-1.0], [-2.0]]])
    rollout = type("R", (), {"mask": jnp.ones((1, 2, 1))})()
    batch = {"logp_old": logp_old, "rollout": rollout}

    def grad(logits, idx, b, hp):
        return logits * 2.0, {"clip_frac": jnp.float32(0.25)}

    wrapped = ratio_spread.with_extremes(grad, False, lambda logits, idx, b: logits)
    logits = jnp.asarray([[[-0.5], [-2.5]]])
    g, aux = wrapped(logits, None, batch, None)
    np.testing.assert_array_equal(np.asarray(g), np.asarray(logits) * 2.0)
    assert float(aux["clip_frac"]) == 0.25
    assert float(aux["log_ratio_max"]) == pytest.approx(0.5) and float(aux["log_ratio_min"]) == pytest.approx(-0.5)


def test_refused_under_the_expected_flow():
    with pytest.raises(ConfigError) as err:
        resolve({"train": {"dynamics": "expected", "metrics": ["pass1", "log_ratio_range"]}})
    assert "log_ratio_range" in str(err.value) and "expected" in str(err.value)


def test_not_a_per_prompt_metric():
    with pytest.raises(ConfigError) as err:
        resolve({"train": {"metrics": ["pass1", "log_ratio_range"], "prompt_metrics": ["log_ratio_range"]}})
    assert "prompt_metrics" in str(err.value)


BANDIT = {"preset": "grpo", "task": {"n_prompts": 3, "n_answers": 4, "n_correct": 1},
          "train": {"steps": 1, "batch_size": 3, "group_size": 6, "seeds": 1, "metrics": ["pass1", "log_ratio_range"]},
          "arms": {"arms": ["frozen", "true"]}, "algo": {"lr": 2.0}}


@pytest.mark.heavy  # three eager updates (op by op)
def test_one_engine_step_records_the_range_of_the_sampled_tokens():
    """One bandit step with two epochs: the first update is on-policy (every ratio 1), the second reads the
    table after the first, so the range is that of ``log pi_1 - log pi_0`` over the answers the rollout drew
    (NumPy, from the one-epoch step's table and the rollout redrawn with the same seed and step); one epoch gives
    0; recording the metric changes neither the table nor the other diagnostics."""
    from eager_step import eager_step
    from tabsim.config.static import algo_spec, make_env, schedule
    from tabsim.sim.update import roll_out, update_plan

    two = resolve({**BANDIT, "algo": {"lr": 2.0, "epochs": 2}})
    env, hp, task, state, after2, diag2 = eager_step(two)
    _, _, _, _, after1, diag1 = eager_step(resolve(BANDIT))
    assert float(diag1["log_ratio_range"]) == 0.0
    plain = resolve({**BANDIT, "algo": {"lr": 2.0, "epochs": 2}, "train": {**BANDIT["train"], "metrics": ["pass1"]}})
    *_, after_plain, diag_plain = eager_step(plain)
    assert "log_ratio_range" not in diag_plain
    np.testing.assert_array_equal(np.asarray(after_plain.logits), np.asarray(after2.logits))
    assert float(diag_plain["clip_frac"]) == float(diag2["clip_frac"])
    plan = update_plan(env, algo_spec(two), schedule(two), tuple(two.arms.arms), None)
    with jax.disable_jit():
        _, rollout, *_ = roll_out(env, algo_spec(two), plan, state.logits, task, jnp.arange(3), state.seed, state.step)
    tokens = np.asarray(rollout.tokens)[..., 0]  # [B, G]
    l0 = np.asarray(jax.nn.log_softmax(state.logits, -1))
    l1 = np.asarray(jax.nn.log_softmax(after1.logits, -1))
    lp0, lp1 = (np.take_along_axis(x, tokens, 1) for x in (l0, l1))
    want = np_range([lp0, lp1], lp0, np.ones_like(lp0))
    assert want > 0.01
    assert float(diag2["log_ratio_range"]) == pytest.approx(want, abs=1e-5)
