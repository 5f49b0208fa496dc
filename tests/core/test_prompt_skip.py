"""The prompt skip (tabsim.sim.prompt_skip): GRESO's skip rule and its exploration probabilities against a NumPy
reference written from the authors' released trainer (Infini-AI-Lab/GRESO: DataProfiler's probabilistic skips and
ray_trainer's adjustment), the draw of the kept prompts, and the config's refusals."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from tabsim.base import choices
from tabsim.config import ConfigError, resolve
from tabsim.sim import prompt_skip as S


# -- NumPy reference, written from the authors' trainer ---------------------------------------------------------------
def greso_skip_probability(trace, p_easy, p_hard):
    """The authors' easy_probabilistic_skip, then hard_probabilistic_skip, on a prompt's trace of group mean
    rewards: the trailing means >= 0.98 (easy) or, where the last is <= 0.11, the trailing means <= 0.11 (hard);
    skip with 1 - max(p ** count, 0.01). Returned: the chance to be skipped by either test."""
    easy = 0
    for m in reversed(trace):
        if m < 0.98:
            break
        easy += 1
    p_skip_easy = 1 - max(p_easy ** easy, 0.01) if trace else 0.0
    hard = 0
    if trace and trace[-1] <= 0.11:
        for m in reversed(trace):
            if m > 0.11:
                break
            hard += 1
    p_skip_hard = 1 - max(p_hard ** hard, 0.01) if trace else 0.0
    return p_skip_easy + (1 - p_skip_easy) * p_skip_hard


def greso_adjust(p_easy, p_hard, easy_ratio, hard_ratio, target, epoch):
    """The authors' adjustment after a training step: targets target / 3 (easy) and target * 2 / 3 (hard), steps of
    0.01 within [0.05, 0.95], only for epoch > 0."""
    if epoch > 0:
        p_hard = max(p_hard - 0.01, 0.05) if hard_ratio >= target * 2 / 3 else min(p_hard + 0.01, 0.95)
        p_easy = max(p_easy - 0.01, 0.05) if easy_ratio >= target / 3 else min(p_easy + 0.01, 0.95)
    return p_easy, p_hard


def hp(**kw):
    from tabsim.sim.params import Hyper
    return Hyper(**kw)


def test_registry_is_the_config_list():
    assert S.PROMPT_SKIPS.names() == choices.PROMPT_SKIPS
    assert "state carried" in S.PROMPT_SKIPS.meta("greso")["no_expected"]


def test_skip_probability_follows_the_reward_history():
    import jax
    import jax.numpy as jnp
    advance = jax.jit(S.advance)  # one compilation instead of op-by-op dispatch
    # five prompts, G = 4, three steps (each advanced as step 0: the exploration probabilities stay)
    history = [np.array([[1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]], np.float32),
               np.array([[1, 1, 1, 1], [0, 0, 0, 0], [1, 1, 1, 1], [0, 1, 0, 0], [0, 0, 0, 0]], np.float32),
               np.array([[1, 1, 1, 1], [0, 0, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0], [1, 1, 1, 1]], np.float32)]
    h = hp(skip_p_easy=0.5, skip_p_hard=0.6, skip_target=0.25)
    state = S.greso(5, h)
    np.testing.assert_array_equal(S.keep_probability(state), 1.0)  # no history: every prompt is rolled out
    idx = jnp.arange(5)
    for rewards in history:
        state = advance(state, idx, jnp.asarray(rewards), 0, h)
    # by hand: prompt 0 all right 3 times: 0.5^3; prompt 1 all wrong 3 times: 0.6^3; prompt 2 all right twice:
    # 0.5^2; prompt 3 all wrong once (after a mixed group): 0.6; prompt 4 all right once (after all wrong): 0.5
    keep = np.asarray(S.keep_probability(state))
    np.testing.assert_allclose(keep, [0.125, 0.216, 0.25, 0.6, 0.5], rtol=1e-6)
    traces = [[float(r[i].mean()) for r in history] for i in range(5)]
    want = [1 - greso_skip_probability(t, 0.5, 0.6) for t in traces]
    np.testing.assert_allclose(keep, want, rtol=1e-6)
    # the floor: ten all-right groups in a row keep a 1% chance (0.5^10 < 0.01)
    for _ in range(7):
        state = advance(state, idx, jnp.asarray(history[2]), 0, h)
    assert float(S.keep_probability(state)[0]) == pytest.approx(0.01)
    assert 1 - greso_skip_probability([1.0] * 10, 0.5, 0.6) == pytest.approx(0.01)


def test_exploration_probabilities_move_towards_the_targets_from_the_second_pass():
    import jax
    import jax.numpy as jnp
    advance = jax.jit(S.advance)
    h = hp(skip_p_easy=0.5, skip_p_hard=0.5, skip_target=0.25)
    rewards = jnp.asarray([[1, 1], [1, 0], [1, 0], [0, 1]], jnp.float32)  # a quarter all right, none all wrong
    idx = jnp.arange(4)
    n = 8  # 4 prompts a step of 8: the second pass starts at step 2
    state = S.greso(n, h)
    for step, epoch in ((0, 0), (1, 0), (2, 1)):
        before = (float(state.p_easy), float(state.p_hard))
        state = advance(state, idx, rewards, step, h)
        want = greso_adjust(*before, easy_ratio=0.25, hard_ratio=0.0, target=0.25, epoch=epoch)
        np.testing.assert_allclose((state.p_easy, state.p_hard), want, rtol=1e-6)
    # by hand at step 2: 0.25 >= 0.25 / 3, p_easy 0.5 - 0.01; 0 < 0.25 * 2 / 3, p_hard 0.5 + 0.01
    np.testing.assert_allclose((state.p_easy, state.p_hard), (0.49, 0.51), rtol=1e-6)
    low = S.SkipState(easy=state.easy, hard=state.hard, p_easy=jnp.float32(0.05), p_hard=jnp.float32(0.95))
    low = advance(low, idx, rewards, 5, h)
    np.testing.assert_allclose((low.p_easy, low.p_hard), (0.05, 0.95), rtol=1e-6)  # held in [0.05, 0.95]


def test_first_kept_takes_the_kept_prompts_in_order_then_the_skipped():
    order = np.array([4, 2, 0, 3, 1])
    kept = np.array([False, True, False, True, True])
    np.testing.assert_array_equal(S.first_kept(order, kept, 2), [2, 3])
    np.testing.assert_array_equal(S.first_kept(order, kept, 4), [2, 3, 1, 4])  # fewer kept: the first skipped


def _env(n):
    return SimpleNamespace(n_prompts=n, rng="fast")


def test_draw_without_history_is_the_usual_draw_and_skips_at_the_rule_rate():
    import jax
    import jax.numpy as jnp
    from tabsim.sim.update import Schedule, sample_prompts
    sched = Schedule(batch_size=3, refill=1)
    seed = jnp.asarray([0, 7], jnp.uint32)
    state = SimpleNamespace(prompt_skip=S.greso(10, hp()), tracker=None, seed=seed, step=jnp.int32(3))
    np.testing.assert_array_equal(jax.jit(lambda: S.draw(state, sample_prompts, _env(10), sched))(),
                                  sample_prompts(_env(10), sched, seed, jnp.int32(3)))
    plain = SimpleNamespace(prompt_skip=None, tracker=None, seed=seed, step=jnp.int32(3))
    assert S.draw(plain, lambda *a: "usual", _env(10), sched) == "usual"  # no skip state: the usual draw itself
    # two prompts, one kept: prompt 0 kept with 0.5^2 = 0.25 (two all-right groups), prompt 1 always: prompt 0 is
    # the step's prompt when it comes first (1/2) and is kept (1/4), P = 1/8
    skip = S.SkipState(easy=jnp.asarray([2, 0], jnp.int32), hard=jnp.zeros(2, jnp.int32), p_easy=jnp.float32(0.5),
                       p_hard=jnp.float32(0.5))
    M = 4000

    def one(step):
        return S.draw(SimpleNamespace(prompt_skip=skip, tracker=None, seed=seed, step=step), sample_prompts,
                      _env(2), Schedule(batch_size=1))[0]

    share = float(np.mean(np.asarray(jax.jit(jax.vmap(one))(jnp.arange(M, dtype=jnp.int32))) == 0))
    assert abs(share - 0.125) < 4 * np.sqrt(0.125 * 0.875 / M), share


def test_config_refusals_and_a_config_without_it_written_as_before():
    for cfg, msg in (({"algo": {"prompt_skip": "greso"}, "train": {"dynamics": "expected"}},
                      r"algo.prompt_skip: 'greso' carries each prompt's reward history"),
                     ({"algo": {"prompt_skip": "greso"}, "train": {"replacement": True}},
                      r"algo.prompt_skip: 'greso' skips prompts of a draw without replacement"),
                     ({"algo": {"prompt_skip": "gresso"}}, r"unknown prompt skip 'gresso'"),
                     ({"algo": {"prompt_skip": "greso", "skip_p_easy": 1.5}}, r"skip_p_easy")):
        with pytest.raises(ConfigError, match=msg) as err:
            resolve(cfg)
        assert len(str(err.value).strip().splitlines()) == 2, str(err.value)
    plain = resolve({}).model_dump()["algo"]
    assert not {"prompt_skip", "skip_p_easy", "skip_p_hard", "skip_target"} & set(plain)
    greso = resolve({"preset": "greso"}).model_dump()["algo"]
    assert greso["prompt_skip"] == "greso" and greso["skip_target"] == 0.25


@pytest.mark.heavy  # eager: one-off op compiles (the presets' smoke test steps the greso preset in the suite)
def test_one_step_skips_and_records_the_history():
    """One eager bandit update of the greso preset: the rolled-out prompts' runs are recorded, the others stay 0."""
    from eager_step import eager_step

    cfg = resolve({"preset": "greso", "task": {"n_prompts": 8, "n_answers": 4, "n_correct": 1},
                   "train": {"steps": 1, "batch_size": 3, "group_size": 4, "seeds": 1},
                   "arms": {"arms": ["frozen", "true"]}})
    env, h, task, state, after, _ = eager_step(cfg)
    runs = np.asarray(after.prompt_skip.easy + after.prompt_skip.hard)
    assert (runs <= 1).all() and float(after.prompt_skip.p_easy) == 0.5  # step 0: no adaptation
