"""Per-token process credit on the tree (tabsim.sim.algos.tree_credit): GiGPO's anchor-state step advantage and
TEMPO's prefix-tree TD corrections."""
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


def np_tempo(r, lengths, tokens, ddof=1, eps=1e-6):
    """TEMPO (arXiv 2509.18314) as the authors' loops (compute_tempo_outcome_advantage): walk each answer's tokens,
    narrowing the set of answers that share its prefix;
    A = (r - mean + mean(branch) - mean(ancestors)) / (std + eps)."""
    B, G, T = tokens.shape
    tokens = np.where(np.arange(T) < lengths[..., None], tokens, -1)  # padding, as a pad id no answer draws
    out = np.zeros((B, G, T))
    for b in range(B):
        mean, std = r[b].mean(), r[b].std(ddof=ddof)
        if std == 0:
            continue
        for i in range(G):
            previous = list(range(G))
            for t in range(int(lengths[b, i])):
                branch = [k for k in previous if tokens[b, k, t] == tokens[b, i, t]]
                td = r[b, branch].mean() - r[b, previous].mean()
                out[b, i, t] = (r[b, i] - mean + td) / (std + eps)
                previous = branch
    return out


def run(name, r, lengths, tokens, **hp):
    """Estimator ``name`` on one batch, in float64, compiled once (one program, not one per eager op)."""
    with jax.enable_x64(True):
        b = Batch(rewards=jnp.asarray(r), lengths=jnp.asarray(lengths), tokens=jnp.asarray(tokens),
                  hp=Hyper(**{"std_ddof": 1.0, "std_eps": 1e-6, **hp}))
        return np.asarray(jax.jit(ESTIMATORS[name])(b))


def adv_shape(name, r, lengths, tokens):
    """The shape the advantage stage (:func:`tabsim.sim.algos.advantages`, which checks it) returns, traced
    abstractly (nothing compiled)."""
    def stage(r, lengths, tokens):
        return advantages(AlgoSpec(estimator=name), r, lengths=lengths, valid=jnp.ones(r.shape[:1]), hp=Hyper(),
                          context={"tokens": tokens})
    out = jax.eval_shape(stage, jnp.asarray(r, jnp.float32), jnp.asarray(lengths, jnp.float32), jnp.asarray(tokens))
    return tuple(out.shape)


def test_same_state_by_hand():
    s = np.asarray(jax.jit(same_state)(jnp.asarray(TOKENS), jnp.asarray(LENGTHS)))[0].astype(int)
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
    assert adv_shape("gigpo", r, np.ones_like(r), tokens) == r.shape


def test_gigpo_without_shared_prefixes_is_the_episode_advantage_plus_root():
    """Answers that part at their first token: after the root every state holds one answer (step 0), so tokens
    t >= 1 carry the episode advantage alone, and the advantage stage returns [B, G, T]."""
    tokens = np.array([[[1, 1, 1], [2, 1, 1], [3, 1, 1]]])
    lengths, r = np.full((1, 3), 3.0), np.array([[1.0, 0.0, 0.0]])
    a = run("gigpo", r, lengths, tokens)
    ep = r - r.mean()
    np.testing.assert_allclose(a[0, :, 0], 2 * ep[0], atol=1e-12)
    np.testing.assert_allclose(a[0, :, 1:], np.repeat(ep[0][:, None], 2, 1), atol=1e-12)
    assert adv_shape("gigpo", r, lengths, tokens) == (1, 3, 3)


@pytest.mark.parametrize("name", ["gigpo", "gigpo_std", "tempo"])
def test_tree_estimators_declare_their_capabilities(name):
    meta = ESTIMATORS.meta(name)
    assert meta["batch"] and meta["per_token"] and meta["reads"] == ("tokens",)
    assert "expected flow does not enumerate" in meta["no_expected"]


def test_gigpo_has_no_expected_flow():
    from tabsim.config import ConfigError, resolve
    from tabsim.runtime.run import check_dynamics
    cfg = resolve({"preset": "gigpo", "task": {"n_prompts": 4, "n_answers": 3, "n_correct": 1},
                   "train": {"batch_size": 2, "group_size": 4, "dynamics": "expected"}})
    with pytest.raises(ConfigError, match=r"algo.estimator = 'gigpo_std' has no exact flow: .*same tree state"):
        check_dynamics(cfg)


# ------------------------------------------------------------------------------------------------
# TEMPO
# ------------------------------------------------------------------------------------------------
def test_tempo_by_hand():
    # mean 1/2, Bessel std 1/sqrt(3). Answer 0: at t = 0 the branch (1) holds answers 0, 1, 3 (V = 2/3, the root's
    # 1/2): (1/2 + 1/6) sqrt(3); at t = 1 the branch (1, 2) holds 0 and 3 (V = 1): (1/2 + 1/3) sqrt(3); t = 2 is no
    # branch: GRPO's 1/2 sqrt(3). Answer 2 leaves alone at t = 0 (V = 0): (-1/2 - 1/2) sqrt(3), then GRPO.
    s3 = np.sqrt(3.0)
    want = [[(1 / 2 + 1 / 6) * s3, (1 / 2 + 1 / 3) * s3, s3 / 2],
            [(-1 / 2 + 1 / 6) * s3, (-1 / 2 - 2 / 3) * s3, -s3 / 2],
            [-s3, -s3 / 2, 0.0],
            [(1 / 2 + 1 / 6) * s3, (1 / 2 + 1 / 3) * s3, s3 / 2]]
    np.testing.assert_allclose(run("tempo", REWARDS, LENGTHS, TOKENS, std_eps=0.0)[0], want, atol=1e-12)


@pytest.mark.parametrize("ddof,eps", [(1, 1e-6), (0, 1e-4)])
def test_tempo_matches_the_authors_loops(ddof, eps):
    rng = np.random.default_rng(5)
    B, G, T = 6, 7, 4
    tokens = rng.integers(1, 3, size=(B, G, T))
    lengths = rng.integers(1, T + 1, size=(B, G)).astype(float)
    r = (rng.random((B, G)) < 0.5).astype(float)
    r[0] = 0.0  # a homogeneous group: 0
    got = run("tempo", r, lengths, tokens, std_ddof=float(ddof), std_eps=eps)
    np.testing.assert_allclose(got, np_tempo(r, lengths, tokens, ddof=ddof, eps=eps), atol=1e-9)


def test_tempo_without_branching_is_grpo():
    """The paper's reduction: where no answer leaves the branch the TD term is 0. Three answers along one path (a
    random reward arm gives them different rewards) get GRPO's z-score on every token."""
    tokens = np.ones((1, 3, 3), int)
    lengths, r = np.full((1, 3), 3.0), np.array([[1.0, 0.0, 0.0]])
    z = (r - r.mean()) / (r.std(ddof=1) + 1e-6)
    np.testing.assert_allclose(run("tempo", r, lengths, tokens), np.repeat(z[..., None], 3, -1), atol=1e-12)


def test_tempo_on_a_bandit_is_twice_grpo():
    """One token: the branch of an answer is its arm, whose rewards are equal, so the TD term is r - mean again."""
    rng = np.random.default_rng(1)
    arms = rng.integers(0, 4, size=(5, 6))
    r = (arms == 0).astype(float)  # arm 0 is the correct one
    z = (r - r.mean(-1, keepdims=True)) / (r.std(-1, ddof=1, keepdims=True) + 1e-6)
    z[r.std(-1) == 0] = 0.0
    np.testing.assert_allclose(run("tempo", r, np.ones_like(r), arms[..., None])[..., 0], 2 * z, atol=1e-9)
    assert adv_shape("tempo", r, np.ones_like(r), arms[..., None]) == r.shape


def test_tempo_has_no_expected_flow():
    from tabsim.config import ConfigError, resolve
    from tabsim.runtime.run import check_dynamics
    cfg = resolve({"preset": "tempo", "task": {"n_prompts": 4, "n_answers": 3, "n_correct": 1},
                   "train": {"batch_size": 2, "group_size": 4, "dynamics": "expected"}})
    with pytest.raises(ConfigError, match=r"algo.estimator = 'tempo' has no exact flow: .*share each prefix"):
        check_dynamics(cfg)


@pytest.mark.parametrize("name", ["tempo", "gigpo"])
def test_a_stage_ranking_answers_by_advantage_is_refused(name):
    """CPPO keeps the answers of largest |A|, one number per answer: with per-token advantages on a tree the update
    is refused in one line when the config is validated (before: a JAX top_k error on the [B, G, T] advantages). On
    a bandit the advantages are per answer and the stage runs; gfpo_length acts before the advantages and runs."""
    from tabsim.config import resolve
    from tabsim.config.static import make_env, schedule
    from tabsim.runtime.run import algo_spec
    from tabsim.sim.update import make_update

    def build(env, stage):
        task = {"n_prompts": 2, "n_answers": 4, "n_correct": 1, **({"env": "tree", "tree": {"depth": 3}}
                                                                     if env == "tree" else {})}
        cfg = resolve({"preset": "grpo", "algo": {"estimator": name}, "task": task, "arms": {"arms": ["true"]},
                       "train": {"batch_size": 2, "group_size": 6, "group_stage": stage, "group_keep": 4}})
        return make_update(make_env(cfg), algo_spec(cfg), schedule(cfg), tuple(cfg.arms.arms))

    with pytest.raises(ValueError, match=rf"(?m)^\s*train.group_stage: 'cppo' ranks answers by one advantage each, "
                                         rf"and algo.estimator = '{name}' gives every token its own"):
        build("tree", "cppo")
    build("bandit", "cppo")
    build("tree", "gfpo_length")
