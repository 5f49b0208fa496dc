"""The environments' optional facts: unequal prior masses among a bandit prompt's correct answers
(task.correct_mass_ratio) and the metrics recorded only when train.metrics names them (correct_entropy,
filtered_kl, root_mass)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tabsim.config import ConfigError, resolve
from tabsim.config.static import make_env, static_key
from tabsim.sim.envs.base import optional_metrics
from tabsim.sim.params import Hyper

from jit_task import init_task  # tests/core: the task from one compiled program

SEED = jnp.asarray([0, 1], jnp.uint32)


def task_of(**task):
    cfg = resolve({"task": {"n_prompts": 2, "n_answers": 6, "n_correct": 3, "format_boost": 0.0, **task},
                   "train": {"batch_size": 2}})
    env = make_env(cfg)
    return cfg, env, init_task(env, SEED, Hyper(**{k: np.float32(v) for k, v in cfg.hyper_values().items()}))


def test_correct_masses_follow_the_geometric_ratio_by_rank():
    """r = 1/2 over k = 3 correct answers: shares 4/7, 2/7, 1/7 of p_s = 0.5, in the order of the answers' ranks
    (the draw that picks the correct answers); the wrong answers keep (1 - p_s) / (K - k) each."""
    from tabsim.sim.envs.bandit import answer_ranks
    _, env, task = task_of(correct_mass_ratio=0.5)
    prior = np.exp(np.asarray(task.prior_logits, np.float64))
    rank = np.asarray(answer_ranks(SEED, 2, 6, env.rng))
    correct = np.asarray(task.correct) > 0
    for i in range(2):
        by_rank = prior[i][np.argsort(rank[i])]
        np.testing.assert_allclose(by_rank[:3], 0.5 * np.array([4, 2, 1]) / 7, rtol=1e-5)
        np.testing.assert_allclose(prior[i][~correct[i]], 0.5 / 3, rtol=1e-5)
    # unset: the equal split p_s / k, the program of before (the same static key as a config without the field)
    cfg, _, equal = task_of()
    np.testing.assert_allclose(np.exp(np.asarray(equal.prior_logits)), 1 / 6, rtol=1e-6)
    assert "unequal" not in static_key(cfg) and "unequal" in static_key(task_of(correct_mass_ratio=1.0)[0])
    np.testing.assert_allclose(np.exp(np.asarray(task_of(correct_mass_ratio=1.0)[2].prior_logits)), 1 / 6, rtol=1e-6)


def test_correct_mass_ratio_is_bandit_only_unwritten_when_unset_and_swept_only_when_set():
    assert "correct_mass_ratio" not in resolve({}).model_dump()["task"]
    assert resolve({"task": {"correct_mass_ratio": 2.0}}).model_dump()["task"]["correct_mass_ratio"] == 2.0
    with pytest.raises(ConfigError, match="correct_mass_ratio"):
        resolve({"task": {"env": "tree", "correct_mass_ratio": 0.5}})
    with pytest.raises(ConfigError, match="sweep.correct_mass_ratio"):
        resolve({"sweep": {"correct_mass_ratio": [0.5, 2.0]}})
    cfg = resolve({"task": {"correct_mass_ratio": 1.0}, "sweep": {"correct_mass_ratio": [0.5, 2.0]}})
    assert [c["correct_mass_ratio"] for c in cfg.grid()] == [0.5, 2.0]
    with pytest.raises(ConfigError, match="correct_mass_ratio"):
        resolve({"task": {"correct_mass_ratio": 0.0}})


def test_optional_metrics_by_hand():
    """q = [0.4, 0.1, 0.3, 0.2] with answers 0 and 1 correct: q(. | correct) = [0.8, 0.2], entropy
    -(0.8 ln 0.8 + 0.2 ln 0.2) = 0.500402; against a uniform reference (given correct [0.5, 0.5]) the KL is
    0.8 ln 1.6 + 0.2 ln 0.4 = 0.192745; a prompt with no correct answer gives nan."""
    q = jnp.log(jnp.asarray([[0.4, 0.1, 0.3, 0.2], [0.4, 0.1, 0.3, 0.2]]))
    correct = jnp.asarray([[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    ref = jnp.log(jnp.full((2, 4), 0.25))
    names = ("correct_entropy", "filtered_kl", "root_mass")
    out = jax.jit(optional_metrics, static_argnums=0)(names, q, correct, ref, q)
    assert float(out["correct_entropy"][0]) == pytest.approx(0.500402, abs=1e-5)
    assert float(out["filtered_kl"][0]) == pytest.approx(0.192745, abs=1e-5)
    assert np.isnan(float(out["correct_entropy"][1])) and np.isnan(float(out["filtered_kl"][1]))
    np.testing.assert_allclose([float(out[f"root{a}_mass"][0]) for a in range(4)], [0.4, 0.1, 0.3, 0.2], rtol=1e-6)
    assert optional_metrics(None, q, correct, ref, q) == {} and optional_metrics(("pass1",), q, correct, ref, q) == {}


@pytest.mark.parametrize("env", ["bandit", "tree"])
def test_the_reference_is_its_own_filtered_model_and_the_metrics_are_recorded_only_when_named(env):
    task = {"n_prompts": 3, "n_answers": 5, "n_correct": 2, **({"env": "tree", "tree": {"depth": 2}} if env == "tree"
                                                               else {})}
    names = ["pass1", "correct_entropy", "filtered_kl", "root_mass"]
    cfg = resolve({"task": task, "train": {"batch_size": 3, "metrics": names}})
    envo = make_env(cfg)
    hp = Hyper(**{k: np.float32(v) for k, v in cfg.hyper_values().items()})
    t = init_task(envo, SEED, hp)
    m = jax.jit(envo.evaluate)(t.prior_logits, t, hp)  # one program, not an eager compilation per operation
    assert float(m["filtered_kl"]) == pytest.approx(0.0, abs=1e-6)
    q = np.asarray(envo.answer_distribution(t.prior_logits), np.float64)
    c = np.asarray(t.correct) > 0
    qc = np.where(c, q, 0) / (q * c).sum(-1, keepdims=True)
    want_h = -np.where(qc > 0, qc * np.log(np.where(qc > 0, qc, 1)), 0).sum(-1).mean()
    assert float(m["correct_entropy"]) == pytest.approx(want_h, rel=1e-5)
    roots = [k for k in m if k.startswith("root")]
    assert len(roots) == envo.branching if env == "tree" else len(roots) == 5
    assert sum(float(m[k]) for k in roots) == pytest.approx(1.0, abs=1e-6)
    default = make_env(resolve({"task": task, "train": {"batch_size": 3}}))
    plain = jax.jit(default.evaluate)(t.prior_logits, t, hp)
    assert not {"correct_entropy", "filtered_kl"} & set(plain) and not any(k.startswith("root") for k in plain)
    assert resolve({"train": {"metrics": ["root_mass", "pass1"]}}).train.metrics == ["pass1", "root_mass"]


# -- maj@k above the enumeration cap: a Monte-Carlo estimate with its standard error ---------------------
@pytest.mark.parametrize("tie", ["random", "lowest"])
def test_sampled_majority_agrees_with_the_exact_enumeration_within_its_standard_error(tie):
    """maj@7 over K = 4 answers (120 count vectors, enumerable) from 20000 sampled groups: within 4 standard
    errors of the exact value, per prompt (a two-sided 4-s.e. band fails by chance with probability 6e-5)."""
    from tabsim.sim.envs.bandit import majority_tables
    from tabsim.sim.envs.base import sampled_majority
    q = np.array([[0.4, 0.3, 0.2, 0.1], [0.25, 0.25, 0.3, 0.2], [0.1, 0.1, 0.1, 0.7]])
    correct = np.array([[0.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
    counts, lmc, credit = majority_tables(7, 4, tie)
    exact = (np.exp(lmc[None, :] + np.log(q) @ counts.T) * (correct @ credit.T)).sum(-1)
    est, var = jax.jit(sampled_majority, static_argnums=(2, 3, 4))(jnp.asarray(q, jnp.float32),
                                                                   jnp.asarray(correct, jnp.float32), 7, 20000, tie)
    se = np.sqrt(np.asarray(var))
    assert (se > 0).all() and (se < 0.005).all()
    assert (np.abs(np.asarray(est) - exact) < 4 * se).all(), (np.asarray(est), exact, se)


def test_maj_draws_lets_a_maj_k_above_the_cap_through_and_is_unwritten_when_unset():
    with pytest.raises(ConfigError, match="train.maj_draws"):
        resolve({"train": {"maj_k": [64]}})  # C(71, 7) count vectors over 8 answers
    cfg = resolve({"task": {"n_prompts": 3}, "train": {"maj_k": [5, 64], "maj_draws": 500, "batch_size": 3}})
    env = make_env(cfg)
    assert env.maj_sampled == (64,) and set(env._maj) == {5}
    assert "maj_draws" not in resolve({}).model_dump()["train"] and ("maj_draws", 500) == static_key(cfg)[-2:]
    hp = Hyper(**{k: np.float32(v) for k, v in cfg.hyper_values().items()})
    t = init_task(env, SEED, hp)
    m = jax.jit(env.evaluate)(t.prior_logits, t, hp)
    assert 0 < float(m["maj@64"]) <= 1 and 0 < float(m["maj@64_se"]) < 0.05 and "maj@5_se" not in m
