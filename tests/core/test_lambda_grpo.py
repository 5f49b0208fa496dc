"""lambda-GRPO's token weights (tabsim.sim.algos.token_weights.lambda_grpo, arXiv 2509.21154): hand values, a NumPy
reference that builds the group's prefix tree as the authors' InfPRMTree does, the bandit case and the preset."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from tabsim.config import resolve
from tabsim.config.static import algo_spec, make_env, schedule
from tabsim.sim.algos import AlgoSpec, policy_loss
from tabsim.sim.algos.token_weights import TOKEN_WEIGHTS, token_weights
from tabsim.sim.params import Hyper


def tree_scales(tokens, mask):
    """``[G, T]`` the authors' rule on one group: split the answers into a prefix tree (a node holds the tokens all
    its answers share, children split at the first position they differ; identical answers share a leaf) and
    give every token of a node ``1 / (number of answers under the node)``."""
    seqs = [tuple(int(x) for x, m in zip(tok, mk) if m > 0) for tok, mk in zip(tokens, mask)]
    out = np.zeros(np.shape(tokens))

    def node(members, start):
        end = start
        while True:  # extend the node while every member has the same token at ``end``
            heads = {seqs[i][end] if end < len(seqs[i]) else None for i in members}
            if len(heads) != 1 or heads == {None}:
                break
            end += 1
        for i in members:
            out[i, start:end] = 1.0 / len(members)
        if len(heads) == 1:  # every member ended here (identical answers)
            return
        for h in heads:
            child = [i for i in members if (seqs[i][end] if end < len(seqs[i]) else None) == h]
            if h is not None:
                node(child, end)

    node(list(range(len(seqs))), 0)
    return out


# depth-3 answers over tokens {0 = STOP, 1, 2}: a0 = 1 2 STOP, a1 = 1 1 STOP, a2 = 2 STOP, a3 = 1 2 1
GROUP_TOKENS = np.array([[1, 2, 0], [1, 1, 0], [2, 0, 0], [1, 2, 1]])
GROUP_MASK = np.array([[1, 1, 1], [1, 1, 1], [1, 1, 0], [1, 1, 1]], np.float32)


def weights(tokens, mask):
    return np.asarray(token_weights("lambda_grpo", None, jnp.asarray(tokens), jnp.asarray(mask, jnp.float32), None,
                                    Hyper()))


def test_lambda_grpo_weights_by_hand():
    """Token 0: '1' is shared by a0, a1, a3 (1/3), '2' by a2 alone; token 1: '1 2' by a0 and a3 (1/2), the others
    alone; token 2: every prefix is its answer's own (1); a2's masked position gets 0."""
    w = weights(GROUP_TOKENS[None], GROUP_MASK[None])[0]
    want = np.array([[1 / 3, 1 / 2, 1], [1 / 3, 1, 1], [1, 1, 0], [1 / 3, 1 / 2, 1]])
    np.testing.assert_allclose(w, want, rtol=1e-6)
    np.testing.assert_allclose(w, tree_scales(GROUP_TOKENS, GROUP_MASK), rtol=1e-6)


def test_lambda_grpo_is_the_authors_tree_on_random_groups():
    rng = np.random.default_rng(11)
    B, G, T = 8, 6, 4
    tokens = rng.integers(0, 2, (B, G, T))  # two tokens: many shared prefixes and duplicates
    n = rng.integers(1, T + 1, (B, G))
    mask = (np.arange(T) < n[..., None]).astype(np.float32)
    tokens = np.where(mask > 0, tokens, 0)
    want = np.stack([tree_scales(tokens[b], mask[b]) for b in range(B)])
    np.testing.assert_allclose(weights(tokens, mask), want, rtol=1e-6)


def test_lambda_grpo_on_a_bandit_divides_by_the_copies():
    """One token per answer: answers 3, 3, 1, 3, 0 weigh 1/3, 1/3, 1, 1/3, 1."""
    tokens = np.array([[[3], [3], [1], [3], [0]]])
    w = weights(tokens, np.ones(tokens.shape, np.float32))[0, :, 0]
    np.testing.assert_allclose(w, [1 / 3, 1 / 3, 1, 1 / 3, 1], rtol=1e-6)


def test_policy_loss_with_distinct_answers_is_unweighted():
    """Answers that differ at their first token are their own process sets (weight 1): the loss is GRPO's; a
    group of copies divides the surrogate by G."""
    rng = np.random.default_rng(0)
    logq = jnp.asarray(np.log(rng.dirichlet(np.ones(3), (1, 3, 2))), jnp.float32)
    mask = jnp.ones((1, 3, 2), jnp.float32)
    adv = jnp.asarray([[1.0, -0.5, 0.2]])
    hp = Hyper(eps_low=0.2, eps_high=0.2)
    spec, plain = AlgoSpec(token_weight="lambda_grpo", aggregation="seq-mean-token-mean"), \
        AlgoSpec(aggregation="seq-mean-token-mean")
    for tokens, scale in ((jnp.asarray([[[0, 1], [1, 1], [2, 0]]]), 1.0), (jnp.asarray([[[2, 1]] * 3]), 1 / 3)):
        logp_old = jnp.take_along_axis(logq, tokens[..., None], -1)[..., 0] - 0.05
        got = float(policy_loss(spec, logq, tokens, mask, adv, logp_old, None, hp)[0])
        ref = float(policy_loss(plain, logq, tokens, mask, adv, logp_old, None, hp)[0])
        assert got == pytest.approx(scale * ref, rel=1e-5)


def test_lambda_grpo_is_registered_configured_and_refused_by_the_exact_flow():
    assert "lambda_grpo" in TOKEN_WEIGHTS
    cfg = resolve({"preset": "lambda_grpo"})
    spec = algo_spec(cfg)
    assert spec.token_weight == "lambda_grpo" and spec.aggregation == "seq-mean-token-mean"
    assert cfg.train.group_size == 6 and cfg.hyper_values()["std_eps"] == pytest.approx(1e-4)
    from tabsim.sim.expected import flow
    cfg = resolve({"algo": {"token_weight": "lambda_grpo"}, "task": {"n_prompts": 2, "n_answers": 3, "n_correct": 1},
                   "train": {"group_size": 2, "batch_size": 2}})
    with pytest.raises(ValueError, match="token_weight"):
        flow.check(make_env(cfg), algo_spec(cfg), schedule(cfg), tuple(cfg.arms.arms))
