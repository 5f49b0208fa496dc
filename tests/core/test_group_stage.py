"""The group stage (tabsim.sim.groups): GFPO's and CPPO's answer selections against NumPy references written from
TRL's and the CPPO authors' trainers, the one-sided filters, the cut of the batch's arrays and the config's refusals."""
from __future__ import annotations

import numpy as np
import pytest

from tabsim.base import choices
from tabsim.config import ConfigError, resolve

from tabsim.sim import groups


def hp(**kw):
    from tabsim.sim.params import Hyper
    return Hyper(**{"std_ddof": 1.0, "std_eps": 1e-4, **kw})


def grpo(rewards, **kw):
    import jax.numpy as jnp
    from tabsim.sim.algos import ESTIMATORS
    r = jnp.asarray(rewards, jnp.float32)
    return np.asarray(ESTIMATORS["grpo"](r, lengths=jnp.ones_like(r), valid=jnp.ones(r.shape[0]), hp=hp(**kw)))


# -- NumPy references, written from the trainers' sources -----------------------------------------------------------
def trl_gfpo(rewards, scores, k, eps=1e-4):
    """TRL's GFPOTrainer: per group, torch.topk of the filter scores (k = num_remains_in_group), the kept rewards,
    then (r - mean) / (std + 1e-4) with torch's default (Bessel) std over the k kept."""
    out, kept = [], []
    for r, s in zip(np.asarray(rewards, float), np.asarray(scores, float)):
        idx = np.sort(np.argsort(-s, kind="stable")[:k])
        rk = r[idx]
        out.append((rk - rk.mean()) / (rk.std(ddof=1) + eps))
        kept.append(idx)
    return np.asarray(out), np.asarray(kept)


def cppo_authors(rewards, pruning, eps=1e-4):
    """The CPPO authors' trainer (metric 'smallest'): the z-score over the whole group (Bessel std, eps 1e-4), then
    the int(G P) answers of smallest |A| removed; here per group."""
    out = []
    for r in np.asarray(rewards, float):
        a = (r - r.mean()) / (r.std(ddof=1) + eps)
        drop = np.argsort(np.abs(a), kind="stable")[: int(len(r) * pruning)]
        out.append(np.delete(a, np.sort(drop)))
    return np.asarray(out)


def test_registry_is_the_config_list_and_the_selecting_stages_are_those_that_read_k():
    assert groups.GROUP_STAGES.names() == choices.GROUP_STAGES
    assert tuple(n for n in choices.GROUP_STAGES if groups.GROUP_STAGES.meta(n)["kind"] == "answers") == \
        choices.GROUP_SELECTING


def test_gfpo_length_keeps_the_k_shortest_and_standardises_over_them():
    rewards = np.array([[1, 0, 1, 0, 1, 0], [0, 0, 1, 1, 0, 1]], np.float32)
    lengths = np.array([[3, 1, 2, 5, 1, 4], [2, 6, 3, 1, 5, 4]], np.int32)
    stage = groups.GroupStage("gfpo_length", 3)
    (r_kept, len_kept), keep = groups.at_score(stage, 6, rewards, None, lengths, (rewards, lengths))
    assert keep is None
    np.testing.assert_array_equal(len_kept, [[1, 2, 1], [2, 3, 1]])  # the 3 shortest, in drawn order
    adv = grpo(r_kept)
    # by hand, group 1: rewards 0, 1, 1, mean 2/3, Bessel std sqrt(1/3)
    np.testing.assert_allclose(adv[0], np.array([-2 / 3, 1 / 3, 1 / 3]) / (np.sqrt(1 / 3) + 1e-4), rtol=1e-5)
    want, idx = trl_gfpo(rewards, -lengths, 3)
    np.testing.assert_allclose(adv, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(r_kept, np.take_along_axis(rewards, idx, 1))


def test_gfpo_efficiency_keeps_the_highest_reward_per_token():
    rewards = np.array([[1, 1, 0, 1]], np.float32)
    lengths = np.array([[4, 1, 1, 2]], np.int32)  # r / len: 0.25, 1, 0, 0.5
    (len_kept,), _ = groups.at_score(groups.GroupStage("gfpo_efficiency", 2), 4, rewards, None, lengths, (lengths,))
    np.testing.assert_array_equal(len_kept, [[1, 2]])  # answers 1 and 3
    _, idx = trl_gfpo(rewards, rewards / lengths, 2)
    np.testing.assert_array_equal(idx, [[1, 3]])


def test_cppo_keeps_the_largest_absolute_advantages_of_the_whole_group():
    rewards = np.array([[1, 0, 0, 0], [1, 1, 0, 1], [0, 1, 1, 0]], np.float32)
    adv_full = grpo(rewards)
    # by hand, group 1: mean 1/4, Bessel std 1/2: A = (0.75, -0.25, -0.25, -0.25) / (0.5 + 1e-4)
    np.testing.assert_allclose(adv_full[0], np.array([0.75, -0.25, -0.25, -0.25]) / 0.5001, rtol=1e-5)
    lengths = np.ones_like(rewards, np.int32)
    adv, len_kept = groups.at_advantage(groups.GroupStage("cppo", 2), 4, rewards, lengths, adv_full,
                                        (adv_full, lengths))
    np.testing.assert_allclose(adv[0], [0.75 / 0.5001, -0.25 / 0.5001], rtol=1e-5)  # ties: the earlier answer
    np.testing.assert_allclose(np.sort(adv, -1), np.sort(cppo_authors(rewards, 0.5), -1), rtol=1e-5, atol=1e-6)
    assert len_kept.shape == (3, 2)


def test_one_sided_filters_keep_the_other_side():
    rewards = np.array([[0, 0, 0], [1, 1, 1], [1, 0, 0]], np.float32)
    outcome = rewards
    rewards_kl = rewards - 0.3  # a KL in the reward: the filters read the outcome rewards
    for name, want in (("drop_all_wrong", [0, 1, 1]), ("drop_all_right", [1, 0, 1])):
        parts = (rewards_kl,)
        out, keep = groups.at_score(groups.GroupStage(name), 3, rewards_kl, outcome, np.ones((3, 3)), parts)
        assert out is parts
        np.testing.assert_array_equal(keep, want)


def test_the_cut_takes_the_answer_axis_and_leaves_shared_nodes_and_none():
    import jax.numpy as jnp
    idx = jnp.asarray([[0, 2], [1, 3]])
    x = jnp.arange(2 * 4 * 3).reshape(2, 4, 3)
    shared = jnp.zeros((2, 1, 1, 5))
    cut, same, none = groups.select((x, shared, None), idx, 4)
    np.testing.assert_array_equal(cut, np.asarray(x)[[[0], [1]], np.asarray(idx)])
    assert same is shared and none is None


def test_stage_refusals_name_the_field_and_the_value():
    with pytest.raises(ValueError, match=r"train.group_stage: 'cppo' ranks answers by one advantage each"):
        groups.GroupStage("cppo", 2).check(4, token_returns=True)
    base = {"train": {"group_size": 8}}
    for train, msg in (({"group_stage": "gfpo_length"}, r"train.group_keep: .*2 <= k < G .*got None"),
                       ({"group_stage": "cppo", "group_keep": 8}, r"train.group_keep: .*got 8"),
                       ({"group_stage": "drop_all_wrong", "group_keep": 4}, r"reads no k; got 4"),
                       ({"group_keep": 4}, r"train.group_keep: read only by a group stage"),
                       ({"group_stage": "gfpo", "group_keep": 4}, r"unknown group stage 'gfpo'.*allowed"),
                       ({"group_stage": "cppo", "group_keep": 4, "dynamics": "expected"},
                        r"train.group_stage: 'cppo' cuts the sampled groups")):
        with pytest.raises(ConfigError, match=msg) as err:
            resolve({**base, "train": {**base["train"], **train}})
        assert len(str(err.value).strip().splitlines()) == 2, str(err.value)  # "invalid config:" and one line


def test_a_config_without_a_stage_is_written_as_before():
    plain = resolve({}).model_dump()["train"]
    assert "group_stage" not in plain and "group_keep" not in plain
    cut = resolve({"train": {"group_stage": "cppo", "group_keep": 4}}).model_dump()["train"]
    assert cut["group_stage"] == "cppo" and cut["group_keep"] == 4


@pytest.mark.parametrize("name, stage, G, k", [("gfpo", "gfpo_length", 16, 8), ("cppo", "cppo", 16, 8)])
def test_presets_sample_more_and_keep_k(name, stage, G, k):
    from tabsim.config.static import schedule
    cfg = resolve({"preset": name})
    assert (cfg.train.group_stage, cfg.train.group_size, cfg.train.group_keep) == (stage, G, k)
    assert schedule(cfg).groups == groups.GroupStage(stage, k)


@pytest.mark.heavy  # eager: a minute of one-off op compiles on a busy 2-core machine; the presets' smoke test runs
@pytest.mark.parametrize("stage, k", [("gfpo_length", 2), ("cppo", 2), ("drop_all_wrong", None)])  # gfpo and cppo
def test_one_step_on_a_tree_trains_on_the_kept_answers(stage, k):
    """One eager update (no compilation, as the presets' smoke test) of a depth-3 tree with a stage (the sparse
    path: visited rows and per-node distributions cut with the answers): finite, and the policy moves."""
    import jax
    import jax.numpy as jnp
    from tabsim.config.static import algo_spec, make_env, schedule
    from tabsim.sim.engine import init_state
    from tabsim.sim.params import Hyper
    from tabsim.sim.update import make_update

    cfg = resolve({"preset": "grpo", "task": {"n_prompts": 2, "n_answers": 4, "n_correct": 1, "env": "tree",
                                              "tree": {"depth": 3}},
                   "train": {"steps": 1, "batch_size": 2, "group_size": 4, "seeds": 1, "group_stage": stage,
                             **({"group_keep": k} if k else {})},
                   "arms": {"arms": ["frozen", "true"]}})
    env, algo = make_env(cfg), algo_spec(cfg)
    h = Hyper(**{n: np.float32(v) for n, v in cfg.hyper_values().items()})
    update = make_update(env, algo, schedule(cfg), tuple(cfg.arms.arms))
    with jax.disable_jit():
        task, state = init_state(env, algo, jnp.asarray([2, 1], jnp.uint32), h)  # a kept pair with distinct rewards
        after, diag = update(state, task, 1, h)
    assert all(np.isfinite(np.asarray(v)).all() for v in diag.values()), diag
    assert np.abs(np.asarray(after.logits) - np.asarray(state.logits)).max() > 1e-6


# -- DAPO's refill ---------------------------------------------------------------------------------------------------
def verl_dapo_refill(rewards, B):
    """verl's recipe/dapo: keep the groups whose rewards have a std above 0, in the order generated, and cut the batch
    to the first B; fewer than B kept raises there (here: None)."""
    kept = [i for i, r in enumerate(np.asarray(rewards)) if np.std(r) > 0]
    return kept[:B] if len(kept) >= B else None


def test_refill_keeps_the_first_informative_groups_in_the_order_drawn():
    rewards = np.array([[0, 0], [1, 0], [1, 1], [0, 1], [1, 0]], np.float32)
    np.testing.assert_array_equal(groups.informative_first(rewards, 2), [1, 3])
    assert verl_dapo_refill(rewards, 2) == [1, 3]
    # fewer informative than B: verl stops with an error, tabsim fills with the first uninformative ones in order
    np.testing.assert_array_equal(groups.informative_first(rewards, 4), [1, 3, 4, 0])
    assert verl_dapo_refill(rewards, 4) is None
    idx = np.array([7, 3, 5, 0, 2])
    lengths = np.arange(10).reshape(5, 2)
    kept_idx, kept_len, scalar = groups.refill(2, rewards, (idx, lengths, np.float32(3)))
    np.testing.assert_array_equal(kept_idx, [3, 0])
    np.testing.assert_array_equal(kept_len, [[2, 3], [6, 7]])
    assert scalar == 3


def test_refill_config_refusals_and_a_config_without_it_written_as_before():
    for cfg, msg in (({"task": {"n_prompts": 8}, "train": {"batch_size": 4, "refill": 5}},
                      r"train.refill: batch_size \+ refill = 4 \+ 5 .* <= task.n_prompts=8"),
                     ({"train": {"batch_size": 4, "refill": 4, "dynamics": "expected"}},
                      r"train.refill: 4 refills the batch")):
        with pytest.raises(ConfigError, match=msg):
            resolve(cfg)
    assert "refill" not in resolve({}).model_dump()["train"]
    assert resolve({"train": {"batch_size": 4, "refill": 4}}).model_dump()["train"]["refill"] == 4


@pytest.mark.heavy  # eager, as above
def test_one_refilled_step_on_a_bandit_trains_the_kept_prompts_only():
    """One eager bandit update drawing 2 + 4 candidates: the two prompts kept are informative ones and the only rows
    that move."""
    import jax
    import jax.numpy as jnp
    from tabsim.config.static import algo_spec, make_env, schedule
    from tabsim.sim.engine import init_state
    from tabsim.sim.params import Hyper
    from tabsim.sim.update import make_update

    cfg = resolve({"preset": "dapo", "task": {"n_prompts": 6, "n_answers": 4, "n_correct": 1},
                   "train": {"steps": 1, "batch_size": 2, "group_size": 4, "seeds": 1, "refill": 4},
                   "arms": {"arms": ["frozen", "true"]}})
    env, algo, sched = make_env(cfg), algo_spec(cfg), schedule(cfg)
    h = Hyper(**{n: np.float32(v) for n, v in cfg.hyper_values().items()})
    update = make_update(env, algo, sched, tuple(cfg.arms.arms))
    with jax.disable_jit():
        task, state = init_state(env, algo, jnp.asarray([0, 1], jnp.uint32), h)
        after, diag = update(state, task, 1, h)
    moved = np.flatnonzero(np.abs(np.asarray(after.logits) - np.asarray(state.logits)).max(-1) > 0)
    assert len(moved) == 2 and float(diag["kept_frac"]) == 1.0, (moved, diag)


@pytest.mark.heavy  # compiles two programs; the config refuses these combinations today (tabsim.config.behaviour)
@pytest.mark.parametrize("train", [{"group_stage": "gfpo_length", "group_keep": 2}, {"refill": 2}])
def test_the_cut_carries_a_behaviour_samplers_importance_weights(train):
    """A behaviour sampler's per-token weights are cut with the answers and the groups (built past the config)."""
    import jax
    import jax.numpy as jnp
    from tabsim.config.static import algo_spec, make_env, schedule
    from tabsim.sim.engine import init_state
    from tabsim.sim.params import Hyper
    from tabsim.sim.update import make_update

    base = {"preset": "grpo", "task": {"n_prompts": 4, "n_answers": 4, "n_correct": 1, "env": "tree",
                                       "tree": {"depth": 2}}, "arms": {"arms": ["frozen", "true"]}}
    small = {"steps": 1, "batch_size": 2, "group_size": 4, "seeds": 1}
    cb = resolve({**base, "algo": {"behaviour": "mismatch", "is_correction": "token_truncate"}, "train": small})
    cs = resolve({**base, "train": {**small, **train}})
    env, algo = make_env(cb), algo_spec(cb)
    h = Hyper(**{n: np.float32(v) for n, v in cb.hyper_values().items()})
    update = jax.jit(make_update(env, algo, schedule(cs), tuple(cb.arms.arms)))
    task, state = init_state(env, algo, jnp.asarray([2, 1], jnp.uint32), h)
    after, diag = update(state, task, 1, h)  # a [B, G, T] weight against [B, k] advantages raised before
    assert np.isfinite(np.asarray(after.logits)).all() and float(diag["kept_frac"]) > 0
