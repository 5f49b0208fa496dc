"""The reward composer (tabsim.sim.rewards) and the label-free arms (tabsim.sim.arms): NumPy references written
from the papers' formulas and the authors' released code, hand-computed values, the config's refusals and
the default left as it was. Direct function calls on small arrays: nothing here compiles a training program."""
from __future__ import annotations

import types

import jax.numpy as jnp
import numpy as np
import pytest

from tabsim.config import ConfigError, resolve
from tabsim.config.static import algo_spec, make_env, schedule
from tabsim.sim import arms as arms_mod
from tabsim.sim import rewards as R
from tabsim.sim.params import Hyper
from tabsim.sim.update import update_plan


def hp(**kw):
    return Hyper(**kw)


def rollout(answers, lengths=None, tokens=None, mask=None):
    answers = np.asarray(answers)
    lengths = np.ones(answers.shape) if lengths is None else np.asarray(lengths, float)
    T = int(lengths.max())
    mask = (np.arange(T) < lengths[..., None]).astype(np.float32) if mask is None else mask
    tokens = answers[..., None] if tokens is None else tokens
    return types.SimpleNamespace(answers=jnp.asarray(answers), lengths=jnp.asarray(lengths, jnp.float32),
                                 mask=jnp.asarray(mask), tokens=jnp.asarray(tokens))


# -- DAPO's soft overlong punishment --------------------------------------------------------------------
def dapo_eq13(L, l_max, l_cache):
    """DAPO eq. 13, case by case (as TRL's get_soft_overlong_punishment writes it)."""
    if L <= l_max - l_cache:
        return 0.0
    if L <= l_max:
        return ((l_max - l_cache) - L) / l_cache
    return -1.0


def test_overlong_by_hand():
    # L_max 4, L_cache 2: lengths 1..5 lose 0, 0, 0.5, 1, 1
    got = R.overlong_penalty(jnp.arange(1.0, 6.0), 4.0, 2.0)
    np.testing.assert_allclose(got, [0.0, 0.0, -0.5, -1.0, -1.0])


@pytest.mark.parametrize("l_max,l_cache", [(4.0, 2.0), (10.0, 3.0), (3.0, 3.0), (7.0, 0.5)])
def test_overlong_matches_the_papers_cases(l_max, l_cache):
    L = np.linspace(0.0, 12.0, 97)
    want = [dapo_eq13(x, l_max, l_cache) for x in L]
    np.testing.assert_allclose(R.overlong_penalty(jnp.asarray(L), l_max, l_cache), want, atol=1e-6)


def test_overlong_is_added_with_its_factor():
    spec = R.RewardSpec(terms=("overlong",))
    r = jnp.asarray([[1.0, 0.0, 1.0, 1.0]])
    got = R.compose(spec, r, env=None, task_b=None, rollout=rollout([[0, 1, 2, 3]], [[1, 2, 3, 4]]), logp_old=None,
                    hp=hp(overlong_max=4.0, overlong_cache=2.0, overlong_factor=0.5))
    np.testing.assert_allclose(got, [[1.0, 0.0, 0.75, 0.5]])


# -- the unlikeliness reward ----------------------------------------------------------------------------
def authors_unlikeliness(scores, old_log_probs, mask, rank_penalty):
    """The reward scaling of the authors' RayLeanTrainer._compute_advantages (rewarding-unlikely-release), one
    group at a time in NumPy: masked-mean token log-probs, ranks by a double argsort, r (1 - rank/G penalty)."""
    out = np.zeros_like(scores)
    for b in range(scores.shape[0]):
        lp = (old_log_probs[b] * mask[b]).sum(-1) / mask[b].sum(-1)
        ranks = np.argsort(np.argsort(lp, kind="stable"), kind="stable") / scores.shape[1]
        out[b] = scores[b] * (1 - ranks * rank_penalty)
    return out


def test_unlikeliness_by_hand():
    # log p (-1, -3, -2, -0.5): ranks 2, 0, 1, 3 of 4; r = (1, 1, 0, 1) -> (1 - .25 * 2/4, 1, 0, 1 - .25 * 3/4)
    r = jnp.asarray([[1.0, 1.0, 0.0, 1.0]])
    logp = jnp.asarray([[[-1.0], [-3.0], [-2.0], [-0.5]]])
    got = R.unlikeliness(r, logp, jnp.ones_like(logp), 0.25)
    np.testing.assert_allclose(got, [[0.875, 1.0, 0.0, 0.8125]])


def test_unlikeliness_matches_the_authors_trainer():
    rng = np.random.default_rng(3)
    B, G, T = 4, 8, 3
    scores = (rng.random((B, G)) < 0.5).astype(np.float64)
    logp = -rng.random((B, G, T)) * 3
    mask = (np.arange(T) < rng.integers(1, T + 1, (B, G))[..., None]).astype(np.float64)
    want = authors_unlikeliness(scores, logp, mask, 0.25)
    got = R.unlikeliness(jnp.asarray(scores), jnp.asarray(logp), jnp.asarray(mask), 0.25)
    np.testing.assert_allclose(got, want, rtol=1e-6)


# -- the backward noise correction ----------------------------------------------------------------------
def test_backward_by_hand_and_unbiased():
    fpr, fnr = 0.1, 0.2
    got = np.asarray(R.backward_correction(jnp.asarray([0.0, 1.0]), fpr, fnr))
    np.testing.assert_allclose(got, [-1 / 7, 9 / 7], rtol=1e-6)
    # the corrected reward's mean under the noisy channel is the clean reward: 1 for a correct answer, 0 else
    np.testing.assert_allclose((1 - fnr) * got[1] + fnr * got[0], 1.0, rtol=1e-6)
    np.testing.assert_allclose(fpr * got[1] + (1 - fpr) * got[0], 0.0, atol=1e-6)


def test_backward_leaves_a_group_z_score_unchanged():
    """Affine with a positive slope: a z-score with the population std gives the same advantages (eps 0)."""
    rng = np.random.default_rng(0)
    r = (rng.random((5, 8)) < 0.5).astype(np.float32)
    r[:, 0], r[:, 1] = 0.0, 1.0
    z = lambda x: (x - x.mean(-1, keepdims=True)) / x.std(-1, keepdims=True)  # noqa: E731
    np.testing.assert_allclose(z(np.asarray(R.backward_correction(jnp.asarray(r), 0.2, 0.3))), z(r), atol=1e-5)


# -- the style (habit) term -----------------------------------------------------------------------------
def test_style_reads_the_root_style_on_a_tree_and_the_format_answer_on_a_bandit():
    cfg = resolve({"task": {"env": "tree", "n_prompts": 2, "n_answers": 4, "n_correct": 1,
                            "tree": {"depth": 2, "branching": 4, "styles": [{"actions": [0, 1]}, {"actions": [2, 3]}]}},
                   "train": {"batch_size": 2}})
    env = make_env(cfg)
    tokens = np.asarray([[[0, 0], [1, 2], [2, 0], [3, 1]]])
    got = R.answer_style(env, None, rollout([[0, 0, 0, 0]], tokens=tokens, mask=np.ones((1, 4, 2))), 1)
    np.testing.assert_array_equal(got, [[0.0, 0.0, 1.0, 1.0]])
    bandit = types.SimpleNamespace(is_format=lambda task_b, a: (a == task_b.format_answer[:, None]).astype(jnp.float32))
    task_b = types.SimpleNamespace(format_answer=jnp.asarray([2]))
    np.testing.assert_array_equal(R.answer_style(bandit, task_b, rollout([[2, 1, 2, 0]]), 0), [[1.0, 0.0, 1.0, 0.0]])


# -- composition ----------------------------------------------------------------------------------------
def test_no_terms_is_the_arms_reward():
    r = jnp.asarray([[1.0, 0.0]])
    assert R.compose(None, r, env=None, task_b=None, rollout=None, logp_old=None, hp=hp()) is r
    assert R.compose(R.RewardSpec(), r, env=None, task_b=None, rollout=None, logp_old=None, hp=hp()) is r


def test_group_normalisation_z_scores_each_part_before_the_sum():
    spec = R.RewardSpec(terms=("backward", "overlong"), normalize="group")
    r = np.asarray([[1.0, 0.0, 1.0, 1.0]])
    L = np.asarray([[1.0, 2.0, 3.0, 4.0]])
    h = hp(overlong_max=4.0, overlong_cache=2.0, overlong_factor=2.0, fpr=0.1, fnr=0.2, std_eps=0.0)
    got = R.compose(spec, jnp.asarray(r), env=None, task_b=None, rollout=rollout([[0, 1, 2, 3]], L), logp_old=None,
                    hp=h)
    z = lambda x: (x - x.mean()) / x.std()  # noqa: E731
    want = z((r - 0.1) / 0.7) + 2.0 * z(np.asarray([[0.0, 0.0, -0.5, -1.0]]))
    np.testing.assert_allclose(got, want, rtol=1e-5)


# -- label-free arms -----------------------------------------------------------------------------------
def label_free(name, answers, logq, mask):
    return np.asarray(arms_mod.arm_rewards(name, None, None, None, None, jnp.asarray(answers), hp(), None,
                                           (jnp.asarray(logq), jnp.asarray(mask))))


def test_label_free_arms_by_hand_on_a_bandit():
    p = np.asarray([0.5, 0.25, 0.125, 0.125])
    logq = np.log(p)[None, None, None, :]  # [B, 1, 1, K]: one node per prompt
    answers = np.asarray([[0, 0, 1, 3]])
    mask = np.ones((1, 4, 1))
    # KL(U || p) = -log 4 - mean log p = -2 log 2 + (1 + 2 + 3 + 3) log 2 / 4 = log 2 / 4
    np.testing.assert_allclose(label_free("self_certainty", answers, logq, mask), np.full((1, 4), np.log(2) / 4),
                               rtol=1e-6)
    # minus the entropy: -(1/2 log 2 + 1/4 log 4 + 2/8 log 8) = -1.75 log 2, the same for every answer of the group
    np.testing.assert_allclose(label_free("entropy", answers, logq, mask), np.full((1, 4), -1.75 * np.log(2)),
                               rtol=1e-6)
    np.testing.assert_allclose(label_free("frequency", answers, logq, mask), [[0.5, 0.5, 0.25, 0.25]])


def test_self_certainty_and_entropy_average_over_the_answers_tokens():
    rng = np.random.default_rng(1)
    B, G, T, V = 2, 3, 3, 4
    logits = rng.normal(size=(B, G, T, V))
    logq = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    lengths = np.asarray([[1, 2, 3], [3, 3, 1]])
    mask = (np.arange(T) < lengths[..., None]).astype(np.float64)
    sc, ent = np.zeros((B, G)), np.zeros((B, G))
    for b in range(B):
        for g in range(G):
            n = lengths[b, g]
            p = np.exp(logq[b, g, :n])
            sc[b, g] = np.mean([np.sum(np.log((1 / V) / p[t]) / V) for t in range(n)])  # KL(U || p_t), by definition
            ent[b, g] = -np.mean([-(p[t] * np.log(p[t])).sum() for t in range(n)])
    answers = np.zeros((B, G), int)
    np.testing.assert_allclose(label_free("self_certainty", answers, logq, mask), sc, rtol=1e-5)
    np.testing.assert_allclose(label_free("entropy", answers, logq, mask), ent, rtol=1e-5)


def test_a_policy_arm_without_the_policy_is_refused_alone_and_nan_among_the_others():
    with pytest.raises(ValueError, match="reads the rollout policy"):
        arms_mod.arm_rewards("self_certainty", None, None, None, None, jnp.zeros((1, 2), int), hp(), None)
    # every arm at once (the default ``arms``) without a policy: the label arms as usual, the policy arms NaN
    env = types.SimpleNamespace(answer_correct=lambda task_b, a: (a == 1).astype(jnp.float32))
    got = np.asarray(arms_mod.all_rewards(None, None, env, None, jnp.asarray([[1, 0, 1]]), hp(),
                                          ("true", "self_certainty", "frequency", "entropy")))
    np.testing.assert_array_equal(got[0], [[1.0, 0.0, 1.0]])
    np.testing.assert_allclose(got[2], [[2 / 3, 1 / 3, 2 / 3]])
    assert np.isnan(got[1]).all() and np.isnan(got[3]).all()


# -- configuration -------------------------------------------------------------------------------------
def test_default_config_is_unchanged():
    cfg = resolve({})
    assert algo_spec(cfg).reward is None
    dumped = cfg.model_dump()["algo"]
    assert not {"reward_terms", "reward_normalize", "overlong_max", "rank_penalty"} & set(dumped)


def test_terms_reach_the_spec_and_are_written():
    cfg = resolve({"algo": {"reward_terms": ["backward", "overlong"], "reward_normalize": "group"}})
    assert algo_spec(cfg).reward == R.RewardSpec(terms=("backward", "overlong"), normalize="group")
    assert cfg.model_dump()["algo"]["reward_terms"] == ["backward", "overlong"]


@pytest.mark.parametrize("config,match", [
    ({"algo": {"reward_terms": ["overlength"]}}, r"algo.reward_terms.*'overlength'.*overlong"),
    ({"algo": {"reward_terms": ["overlong", "overlong"]}}, "listed twice"),
    ({"algo": {"reward_normalize": "batch"}}, r"algo.reward_normalize.*'batch'.*group"),
    ({"algo": {"reward_terms": ["overlong"]}, "train": {"dynamics": "expected"}}, "train.dynamics = 'expected'"),
    ({"arms": {"arms": ["frozen", "frequency"]}, "train": {"dynamics": "expected"}}, "frequency"),
    ({"algo": {"reward_terms": ["backward"]}, "arms": {"fpr": 0.5, "fnr": 0.5}}, "fpr \\+ fnr < 1"),
    ({"algo": {"reward_terms": ["backward"]}, "sweep": {"fnr": [0.1, 0.9]}, "arms": {"fpr": 0.2}}, "fnr = 0.9"),
    ({"algo": {"reward_terms": ["overlong"], "overlong_max": 2.0, "overlong_cache": 3.0}}, "algo.overlong_cache"),
    ({"algo": {"reward_terms": ["style"], "reward_style": 1}}, r"algo.reward_style.*\[0, 1\)"),
    ({"algo": {"rank_penalty": 1.5}}, "rank_penalty"),
])
def test_bad_settings_are_refused_in_one_line(config, match):
    with pytest.raises(ConfigError, match=match) as err:
        resolve(config)
    assert len([ln for ln in str(err.value).splitlines() if ln.strip()]) <= 2  # "invalid config:" and the line


def test_policy_readers_get_the_rollout_log_probabilities_on_the_closed_path():
    """The closed-form bandit path reads no old log-probabilities unless the reward needs them."""
    base = {"task": {"n_prompts": 4}, "train": {"batch_size": 4}, "algo": {"surrogate": "reinforce"}}
    for extra, needs in (({}, False), ({"algo": {"surrogate": "reinforce", "reward_terms": ["unlikeliness"]}}, True),
                         ({"arms": {"arms": ["frozen", "self_certainty"]}}, True)):
        cfg = resolve({**base, **extra})
        plan = update_plan(make_env(cfg), algo_spec(cfg), schedule(cfg), tuple(cfg.arms.arms), None)
        assert plan.closed and plan.needs_old is needs, extra


def test_presets_carry_their_rewards():
    assert resolve({"preset": "intuitor"}).arms.arms == ["frozen", "random", "self_certainty", "true"]
    assert resolve({"preset": "unlikeliness"}).train.group_size == 32
    assert algo_spec(resolve({"preset": "dapo_overlong"})).reward == R.RewardSpec(terms=("overlong",))


def one_update(config, arm: str):
    """``(logits before, logits after)`` of one update of ``config`` on ``arm`` (beside frozen), op by op."""
    from eager_step import eager_step
    cfg = resolve({**config, "arms": {"arms": ["frozen", arm]}})
    *_, state, after, _ = eager_step(cfg)
    return np.asarray(state.logits), np.asarray(after.logits)


SMALL = {"task": {"n_prompts": 2, "n_answers": 4, "n_correct": 1},
         "train": {"steps": 1, "batch_size": 2, "group_size": 4, "seeds": 1, "pass_k": [1], "metrics": ["pass1"]},
         "algo": {"surrogate": "reinforce", "lr": 0.5}}


@pytest.mark.heavy  # two eager updates: some tens of seconds of op-by-op warm-up on a busy machine
def test_self_certainty_moves_a_tree_policy_but_not_a_bandit_one():
    """On a bandit every answer of a group gets the same self-certainty, so the group z-score is 0 everywhere
    and the table stays exactly as it was; on a tree the answers' paths differ, and so does the update."""
    before, after = one_update(SMALL, "self_certainty")
    np.testing.assert_array_equal(after, before)
    tree = {**SMALL, "task": {**SMALL["task"], "env": "tree", "tree": {"depth": 3}}}
    before, after = one_update(tree, "self_certainty")
    assert np.abs(after - before).max() > 1e-4
