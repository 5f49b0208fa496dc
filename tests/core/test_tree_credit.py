"""Per-token process credit on the tree (tabsim.sim.algos.tree_credit): GiGPO's anchor-state step advantage."""
from __future__ import annotations

from collections import defaultdict

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tabsim.sim.algos import ESTIMATORS, AlgoSpec, Batch, advantages
from tabsim.sim.algos.tree_credit import same_state
from tabsim.sim.params import Hyper

# a depth-3 group of four: answers 0 and 3 draw (1, 2, STOP), answer 1 (1, 3, STOP), answer 2 (2, STOP)
TOKENS = np.array([[[1, 2, 0], [1, 3, 0], [2, 0, 0], [1, 2, 0]]])
LENGTHS = np.array([[3.0, 3.0, 2.0, 3.0]])
REWARDS = np.array([[1.0, 0.0, 0.0, 1.0]])


def np_gigpo(r, lengths, tokens, std=False, eps=1e-6):
    """GiGPO (arXiv 2505.10978) as the authors' loops: episode advantage over the group's answers; each token a step
    whose anchor state is its prefix, grouped with a dict keyed by the prefix; step return = the outcome; mean
    (and, with ``std``, the unbiased std, 1 for a one-member group) per group; ``A = episode + step``."""
    B, G, T = tokens.shape
    out = np.zeros((B, G, T))
    for b in range(B):
        ep = r[b] - r[b].mean()
        if std:
            ep = ep / (r[b].std(ddof=1) + eps)
        groups = defaultdict(list)
        for g in range(G):
            for t in range(int(lengths[b, g])):
                groups[tuple(tokens[b, g, :t])].append((g, t))
        for members in groups.values():
            vals = np.array([r[b, g] for g, _ in members])
            mean, sd = vals.mean(), (vals.std(ddof=1) if len(vals) > 1 else 1.0)
            for g, t in members:
                step = r[b, g] - mean
                out[b, g, t] = ep[g] + (step / (sd + eps) if std else step)
    return out


def run(name, r, lengths, tokens):
    with jax.enable_x64(True):
        return np.asarray(ESTIMATORS[name](Batch(rewards=jnp.asarray(r), lengths=jnp.asarray(lengths),
                                                 tokens=jnp.asarray(tokens))))


def test_same_state_by_hand():
    s = np.asarray(same_state(jnp.asarray(TOKENS), jnp.asarray(LENGTHS)))[0].astype(int)
    assert (s[..., 0] == 1).all()  # every answer starts at the root
    np.testing.assert_array_equal(s[..., 1], [[1, 1, 0, 1], [1, 1, 0, 1], [0, 0, 1, 0], [1, 1, 0, 1]])
    # at depth 2 only answers 0 and 3 share (1, 2); answer 2 has stopped
    np.testing.assert_array_equal(s[..., 2], [[1, 0, 0, 1], [0, 1, 0, 0], [0, 0, 0, 0], [1, 0, 0, 1]])


def test_gigpo_by_hand():
    # episode: r - 1/2 = +-1/2. Step at the root: the same. At node (1): answers 0, 1, 3, mean 2/3, so +1/3, -2/3,
    # +1/3; answer 2 is alone at node (2): 0. At node (1, 2): answers 0 and 3, both 1: 0; answer 1 alone at (1, 3): 0.
    want = [[1.0, 0.5 + 1 / 3, 0.5], [-1.0, -0.5 - 2 / 3, -0.5], [-1.0, -0.5, 0.0], [1.0, 0.5 + 1 / 3, 0.5]]
    np.testing.assert_allclose(run("gigpo", REWARDS, LENGTHS, TOKENS)[0], want, atol=1e-12)


@pytest.mark.parametrize("name,std", [("gigpo", False), ("gigpo_std", True)])
def test_gigpo_matches_the_authors_loops(name, std):
    rng = np.random.default_rng(3)
    B, G, T = 6, 8, 4
    tokens = rng.integers(1, 3, size=(B, G, T))  # two content tokens: many shared prefixes
    lengths = rng.integers(1, T + 1, size=(B, G)).astype(float)
    r = (rng.random((B, G)) < 0.5).astype(float)
    r[0] = 1.0  # a homogeneous group
    np.testing.assert_allclose(run(name, r, lengths, tokens), np_gigpo(r, lengths, tokens, std=std), atol=1e-9)


def test_gigpo_on_a_bandit_is_twice_the_group_form():
    """One token: every answer is at the root, so the step group is the group: 2 (r - mean) and twice GRPO's
    Bessel z-score (eps 1e-6) for the std mode; through the advantage stage the shape is [B, G]."""
    rng = np.random.default_rng(0)
    r = (rng.random((5, 6)) < 0.5).astype(float)
    lengths, tokens = np.ones_like(r), rng.integers(0, 4, size=r.shape + (1,))
    np.testing.assert_allclose(run("gigpo", r, lengths, tokens)[..., 0], 2 * (r - r.mean(-1, keepdims=True)),
                               atol=1e-12)
    z = (r - r.mean(-1, keepdims=True)) / (r.std(-1, ddof=1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(run("gigpo_std", r, lengths, tokens)[..., 0], 2 * z, atol=1e-9)
    adv = advantages(AlgoSpec(estimator="gigpo"), jnp.asarray(r, jnp.float32), lengths=jnp.ones(r.shape),
                     valid=jnp.ones(5), hp=Hyper(), context={"tokens": jnp.asarray(tokens)})
    assert adv.shape == r.shape


def test_gigpo_without_shared_prefixes_is_the_episode_advantage_plus_root():
    """Answers that part at their first token: after the root every state holds one answer (step 0), so tokens
    t >= 1 carry the episode advantage alone, and the advantage stage returns [B, G, T]."""
    tokens = np.array([[[1, 1, 1], [2, 1, 1], [3, 1, 1]]])
    lengths, r = np.full((1, 3), 3.0), np.array([[1.0, 0.0, 0.0]])
    a = run("gigpo", r, lengths, tokens)
    ep = r - r.mean()
    np.testing.assert_allclose(a[0, :, 0], 2 * ep[0], atol=1e-12)
    np.testing.assert_allclose(a[0, :, 1:], np.repeat(ep[0][:, None], 2, 1), atol=1e-12)
    adv = advantages(AlgoSpec(estimator="gigpo"), jnp.asarray(r, jnp.float32), lengths=jnp.asarray(lengths),
                     valid=jnp.ones(1), hp=Hyper(), context={"tokens": jnp.asarray(tokens)})
    assert adv.shape == (1, 3, 3)


@pytest.mark.parametrize("name", ["gigpo", "gigpo_std"])
def test_gigpo_declares_its_capabilities(name):
    meta = ESTIMATORS.meta(name)
    assert meta["batch"] and meta["per_token"] and meta["reads"] == ("tokens",)
    assert "same tree state" in meta["no_expected"]


def test_gigpo_has_no_expected_flow():
    from tabsim.config import ConfigError, resolve
    from tabsim.runtime.run import check_dynamics
    cfg = resolve({"preset": "gigpo", "task": {"n_prompts": 4, "n_answers": 3, "n_correct": 1},
                   "train": {"batch_size": 2, "group_size": 4, "dynamics": "expected"}})
    with pytest.raises(ConfigError, match=r"algo.estimator = 'gigpo' has no exact flow: .*same tree state"):
        check_dynamics(cfg)
