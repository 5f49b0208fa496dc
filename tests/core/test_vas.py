"""VAS's variance half (``algo.curriculum = "vas"``, :mod:`tabsim.sim.vas`): the scores, the momentum, the refresh
schedule and the batch's two halves, against a NumPy reference of the authors' code (LengSicong/MMR1 at d8161a0:
``calculate_learnability_metric``, ``_compute_curriculum_weights``, ``_update_curriculum_weights``,
``MixedCurriculumSampler``) and hand values; the config's refusals."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tabsim as ts
from tabsim.config import ConfigError
from tabsim.sim import vas


def np_learnability(rewards):
    """The authors' weights from one refresh: pass rate over the rollouts, p (1 - p), min-max with + 1e-8."""
    p = (np.asarray(rewards) > 0).mean(-1)
    s = p * (1 - p)
    return (s - s.min()) / (s.max() - s.min() + 1e-8)


def np_weights(refreshes, momentum):
    """``_update_curriculum_weights`` over successive refreshes: the first taken as is, then m old + (1 - m) new."""
    w = None
    for rewards in refreshes:
        new = np_learnability(rewards)
        w = new if w is None else momentum * w + (1 - momentum) * new
    return w


def test_scores_by_hand():
    rewards = jnp.asarray([[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0], [0, 0, 0, 0]], jnp.float32)
    # p = 1/2, 1, 1/4, 0: p (1 - p) = 1/4, 0, 3/16, 0; min-max over the four: 1, 0, 3/4, 0
    np.testing.assert_allclose(vas.scores(rewards), [1.0, 0.0, 0.75, 0.0], atol=1e-6)


@pytest.mark.parametrize("momentum", [0.0, 0.3, 1.0])
def test_weights_follow_the_authors_update(momentum):
    rng = np.random.default_rng(0)
    refreshes = [(rng.random((6, 8)) < rng.random((6, 1))).astype(np.float32) for _ in range(3)]
    state = vas.vas(6)
    for i, r in enumerate(refreshes):
        state = vas.blend(state, vas.scores(jnp.asarray(r)), i == 0, momentum)
    np.testing.assert_allclose(state.weights, np_weights(refreshes, momentum), atol=1e-6)


def test_the_batch_halves():
    weighted, uniform = jnp.arange(10, 18), jnp.arange(8)
    assert vas.mix(weighted, uniform, 0.5).tolist() == [10, 11, 12, 13, 4, 5, 6, 7]  # int(8 x 0.5) = 4 by weight
    assert vas.mix(weighted, uniform, 0.3).tolist() == [10, 11, 2, 3, 4, 5, 6, 7]  # int(2.4) = 2
    assert vas.mix(weighted, uniform, 0.0).tolist() == list(range(8))
    assert vas.mix(weighted, uniform, 1.0).tolist() == list(range(10, 18))


def test_the_weighted_half_draws_by_weight_with_replacement():
    u = jax.random.uniform(jax.random.PRNGKey(0), (4000,))
    drawn = np.asarray(vas.weighted_part(jnp.asarray([0.0, 1.0, 0.0, 3.0]), u))
    share = np.bincount(drawn, minlength=4) / drawn.size
    se = np.sqrt(0.25 * 0.75 / drawn.size)
    assert share[0] == share[2] == 0 and abs(share[1] - 0.25) < 4 * se and abs(share[3] - 0.75) < 4 * se
    # every weight 0 (every prompt scored alike): uniform
    drawn = np.asarray(vas.weighted_part(jnp.zeros(4), u))
    assert np.all(np.abs(np.bincount(drawn, minlength=4) / drawn.size - 0.25) < 4 * np.sqrt(0.25 * 0.75 / drawn.size))


@pytest.mark.heavy  # one compiled refresh (a task draw and the full pass)
def test_refresh_only_at_multiples_of_the_period():
    cfg = ts.resolve({"preset": "vas", "task": {"n_prompts": 6, "heterogeneity": 0.5},
                      "train": {"steps": 8, "eval_every": 4, "batch_size": 2},
                      "algo": {"vas_every": 3, "vas_momentum": 0.5}, "arms": {"arms": ["frozen", "true"]}})
    from tabsim.config.static import algo_spec, make_env
    from tabsim.sim.params import Hyper

    env, algo = make_env(cfg), algo_spec(cfg)
    hp = Hyper(**{k: np.float32(v) for k, v in cfg.hyper_values().items()})
    seed = jnp.asarray([0, 1], jnp.uint32)
    task = jax.jit(env.init_task)(seed, hp)
    state, logits = vas.init(algo, env), task.prior_logits
    refresh = jax.jit(lambda st, s: vas.refresh(algo, st, env, logits, task, 1, ("frozen", "true"), seed, s, hp))
    weights = []
    for step in range(7):
        state = refresh(state, jnp.int32(step))
        weights.append(np.asarray(state.weights))

    def fresh(s):  # the scores of a refresh at step s, by hand: the verifier's rewards of the rollouts at s + VAS_STREAM
        ro = env.rollout(seed, s + vas.VAS_STREAM, logits, algo.vas_rollouts)
        return np_learnability(np.asarray(env.answer_correct(task, ro.answers)))

    np.testing.assert_allclose(weights[0], fresh(0), atol=1e-6)  # the first refresh: the scores as they are
    assert all(np.array_equal(weights[s], weights[0]) for s in (1, 2))
    np.testing.assert_allclose(weights[3], 0.5 * fresh(0) + 0.5 * fresh(3), atol=1e-6)
    assert all(np.array_equal(weights[s], weights[3]) for s in (4, 5))
    assert not np.array_equal(weights[6], weights[3])


def test_refusals():
    with pytest.raises(ConfigError, match="algo.curriculum: 'vas'.*expected"):
        ts.resolve({"preset": "vas", "train": {"dynamics": "expected"}})
    with pytest.raises(ConfigError, match="algo.curriculum: 'vas' draws the batch itself, and algo.prompt_skip"):
        ts.resolve({"preset": "vas", "algo": {"prompt_skip": "greso"}})
    with pytest.raises(ConfigError, match="curriculum"):
        ts.resolve({"algo": {"curriculum": "nope"}})
    with pytest.raises(ConfigError, match="vas_ratio"):
        ts.resolve({"preset": "vas", "algo": {"vas_ratio": 1.5}})
    # the default writes none of the fields (a config written before them keeps its digest)
    assert "curriculum" not in ts.resolve({"preset": "grpo"}).model_dump()["algo"]


def test_registered_as_listed():
    from tabsim.base import choices

    assert vas.CURRICULA.names() == choices.CURRICULA
    assert "refreshed from rollouts" in vas.CURRICULA.meta("vas")["no_expected"]
