"""Tree-MDP: bandit equivalence at depth 1, exact DP against Monte Carlo, token-level gradients, masks,
prior structure, config validation, and the run / partition tools on tree results."""
import functools
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tabsim as ts
from tabsim.sim.algos import AGGREGATIONS, AlgoSpec, policy_loss, take_logp
from tabsim.sim.envs.tree import STOP, TreeEnv, gather_logq
from tabsim.sim.params import Hyper
from tabsim.sim.rng import seed_words

from f32_tolerance import f32_bound, f64_bound  # tests/core: the float32 error bounds
from jit_task import init_task  # tests/core: the task from one compiled program

PAPER_CHECK_KEYS = ("entropy", "kl_ref", "format_mass", "mode_correct", "maj@4", "pass@4")


# -- depth 1 = bandit --------------------------------------------------------------------------
@pytest.mark.parametrize("algo", [
    pytest.param({"preset": "paper"}, marks=pytest.mark.heavy),  # the richer case below runs by default
    {"algo": {"estimator": "grpo", "std_ddof": 1, "std_eps": 1e-4, "surrogate": "clip", "aggregation":
              "seq-mean-token-mean", "kl": "k3", "kl_placement": "loss", "beta": 0.04, "epochs": 2,
              "minibatches": 2, "optimizer": "adam", "lr": 0.05}},
])
def test_depth1_tree_reproduces_bandit(algo):
    base = {**algo, "arms": {"arms": ["random", "majority", "majority_offline", "true"]},
            "task": {"n_prompts": 12, "n_answers": 6, "n_correct": 2, "heterogeneity": 8.0},
            "train": {"seeds": 2, "steps": 20, "eval_every": 5, "batch_size": 8, "pass_k": [4], "maj_k": [4]}}
    bandit = ts.run(base, progress=False).frame
    tree = ts.run({**base, "task": {**base["task"], "env": "tree", "tree": {"depth": 1, "branching": 6}}},
                  progress=False).frame
    # same draws: the sampled answers and rewards, hence the trained tables, are identical
    np.testing.assert_array_equal(tree["pass1"].values, bandit["pass1"].values)
    np.testing.assert_array_equal(tree["reward_mean"].values, bandit["reward_mean"].values)
    assert bandit["pass1"].nunique() > 10  # the trajectories do move
    # The other metrics read the same tables by another route (the tree takes log(q) of its answer
    # distribution, the bandit log_softmax). Each log-probability then differs by at most K + 2 roundings of
    # values of size 1 + L, L = max|log q|: the prior's p_s is clipped to [1e-6, 1 - 1e-6], so
    # log q >= log(1e-6 / K), and 20 steps of lr 0.05 move a logit by less than 1 each way. A metric
    # combines up to k = 4 of them per term (maj@4: exp of a sum of 4), sums at most
    # M = C(k + K - 1, K - 1) compositions and averages N prompts.
    K, N, k = 6, 12, 4
    L = -np.log(1e-6 / K) + 2.0
    tol = f32_bound(k * (K + 2) + math.comb(k + K - 1, K - 1) + N, 1.0 + L)
    for key in PAPER_CHECK_KEYS:
        np.testing.assert_allclose(tree[key].values, bandit[key].values, rtol=0, atol=tol, err_msg=key)
    # the mean answer length: a sum of the K answer probabilities (1 up to K + 2 roundings), averaged over N
    np.testing.assert_allclose(tree["len_mean"].values, 1.0, rtol=0, atol=f32_bound(K + 2 + N, 1.0))


def test_depth1_gather_path_equals_broadcast_gradient():
    """The general per-node gather (used for D > 1) gives the bandit's gradient up to float rounding."""
    env = TreeEnv(n_prompts=5, n_answers=6, depth=1, branching=6)
    logits = jax.random.normal(jax.random.key(0), (5, 1, 6))
    ro = env.rollout(seed_words(3), 0, logits, 7)
    adv = jax.random.normal(jax.random.key(1), (5, 7))
    spec = AlgoSpec(surrogate="clip", aggregation="seq-mean-token-mean")
    hp = Hyper()

    def loss(lg, fn):
        lq = fn(lg)
        old = jax.lax.stop_gradient(take_logp(lq, ro.tokens)) - 0.1  # the rollout's: no gradient through it
        return policy_loss(spec, lq, ro.tokens, ro.mask, adv, old, lq, hp)[0]

    g_b = jax.jit(jax.grad(lambda lg: loss(lg, lambda x: env.token_logq(x, ro))))(logits)
    g_g = jax.jit(jax.grad(lambda lg: loss(lg, lambda x: gather_logq(x, ro.nodes))))(logits)
    assert np.abs(np.asarray(g_b)).max() > 1e-2
    # float32, each path sums a prompt's G cotangents (ratio e^0.1 times |A| / 35, the mean of 5 G answers) in
    # its own order, then log-softmax's backward (b terms, pi off by (b + 3) |log pi| u): twice the bound
    G, b = ro.tokens.shape[1], logits.shape[-1]
    log_pi = np.asarray(jax.nn.log_softmax(logits, -1))
    tol = 2 * f32_bound(G + (b + 3) * (2 + np.abs(log_pi).max()), np.exp(0.1) * np.abs(np.asarray(adv)).max() / 5)
    np.testing.assert_allclose(np.asarray(g_g), np.asarray(g_b), rtol=0, atol=tol)


# -- exact DP against Monte Carlo ---------------------------------------------------------------
def test_dp_metrics_match_monte_carlo():
    env = TreeEnv(n_prompts=4, n_answers=5, n_correct=2, depth=4, branching=3,
                  styles=[{"mass": 2.0, "accuracy": 0.7}, {"mass": 1.0}], length_slope_wrong=1.0)
    hp = Hyper(prior_strength=0.4)
    task = jax.jit(env.init_task)(seed_words(0), hp)
    logits = task.prior_logits + 0.8 * jax.random.normal(jax.random.key(5), task.prior_logits.shape)
    ev = {k: float(v) for k, v in jax.jit(env.evaluate)(logits, task, hp).items()}
    G = 40_000
    ro = jax.jit(env.rollout, static_argnums=3)(seed_words(11), 0, logits, G)
    corr = np.asarray(env.answer_correct(task, ro.answers))
    L = np.asarray(ro.lengths)
    style = np.asarray(env.pair_style)[0][np.asarray(ro.tokens[..., 0])]
    seq_logp = jax.jit(lambda lg, r: (take_logp(env.token_logq(lg, r), r.tokens) * r.mask).sum(-1))
    logp, logp_ref = np.asarray(seq_logp(logits, ro)), np.asarray(seq_logp(task.prior_logits, ro))

    def check(name, samples, dp, per_prompt_weights=None):
        """Per-prompt sample means averaged over prompts; tolerance 5 standard errors of that average.

        SE of the average of N independent per-prompt means = sqrt(sum_n var_n / G_n) / N; a
        5-SE miss has probability < 1e-6 for a correct DP (normal approximation, G >= 1e4).
        """
        w = np.ones_like(samples) if per_prompt_weights is None else per_prompt_weights
        n = w.sum(1)
        means = (samples * w).sum(1) / n
        var = ((samples - means[:, None]) ** 2 * w).sum(1) / (n - 1)
        se = np.sqrt((var / n).sum()) / len(n)
        assert abs(means.mean() - dp) < 5 * se + 1e-6, (name, means.mean(), dp, se)

    check("pass1", corr, ev["pass1"])
    check("len_mean", L, ev["len_mean"])
    check("len_correct", L, ev["len_correct"], corr)
    check("len_wrong", L, ev["len_wrong"], 1 - corr)
    check("style0_mass", (style == 0).astype(float), ev["style0_mass"])
    check("style1_acc", corr, ev["style1_acc"], (style == 1).astype(float))
    check("seq_entropy", -logp, ev["seq_entropy"])
    check("kl_ref", logp - logp_ref, ev["kl_ref"])
    fmt = np.asarray(env.is_format(task, ro.answers))
    check("format_mass", fmt, ev["format_mass"])
    q = np.asarray(jax.jit(env.answer_distribution)(logits))
    emp = np.stack([np.bincount(a, minlength=5) for a in np.asarray(ro.answers)]) / G
    assert np.all(np.abs(emp - q) < 5 * np.sqrt(q * (1 - q) / G) + 1e-6)
    # every length 1..D is sampled and the sampled lengths follow the DP length distribution
    assert set(np.unique(L)) == {1.0, 2.0, 3.0, 4.0}


def test_prior_hand_computed_small_tree():
    """D = 2, b = 2: leaves root-STOP (L1), n1-STOP (L2), n1-go (L2), answers 0, 1, 0 (round-robin)."""
    env = TreeEnv(n_prompts=1, n_answers=2, n_correct=1, depth=2, branching=2, length_slope_correct=0.7)
    np.testing.assert_array_equal(env.pair_answer, [[0, 0], [1, 0]])
    hp = Hyper(prior_strength=0.6, format_boost=0.0)
    init, evaluate = jax.jit(env.init_task), jax.jit(env.evaluate)
    seen = set()
    for s in range(6):  # seeds with either answer correct
        task = init(seed_words(s), hp)
        c = np.asarray(task.correct[0])
        if c[0] == 1:  # correct leaves: L1 and L2 (n1-go); wrong leaf: n1-STOP
            pl1 = 1 / (1 + np.exp(0.7))
            m = {"root_stop": 0.6 * pl1, "n1_go": 0.6 * (1 - pl1), "n1_stop": 0.4}
        else:  # the only correct leaf is n1-STOP
            m = {"root_stop": 0.4 * 0.5, "n1_go": 0.4 * 0.5, "n1_stop": 0.6}
        p_root_stop = m["root_stop"]
        p_n1_stop = m["n1_stop"] / (m["n1_stop"] + m["n1_go"])
        # the prior: D = 2 levels of a logsumexp and a log-softmax over b = 2 (b + 2 roundings each), exp
        prior_ops = 2 * (2 + 2) + 1
        np.testing.assert_allclose(np.exp(np.asarray(task.prior_logits[0, :, 0])), [p_root_stop, p_n1_stop],
                                   rtol=f32_bound(prior_ops, 1.0))
        ev = evaluate(task.prior_logits, task, hp)
        # pass@1 sums the 3 leaves' probabilities, each a product of D = 2 of the prior's
        np.testing.assert_allclose(float(ev["pass1"]), 0.6, rtol=f32_bound(prior_ops + 2 + 3, 1.0))
        seen.add(int(c[0]))
    assert seen == {0, 1}


def test_prior_style_and_length_structure():
    """Without a format boost, the DP prior has the specified style masses and accuracies."""
    styles = [{"mass": 3.0, "accuracy": 0.8}, {"mass": 1.0, "accuracy": 0.25}]
    env = TreeEnv(n_prompts=16, n_answers=4, n_correct=1, depth=5, branching=3, styles=styles,
                  length_slope_wrong=3.0, length_slope_correct=-3.0)
    task = jax.jit(env.init_task)(seed_words(1), Hyper(prior_strength=0.5, format_boost=0.0))
    ev = {k: float(v) for k, v in jax.jit(env.evaluate)(task.prior_logits, task, Hyper()).items()}
    # A mass is a mean over N = 16 prompts of a sum of the 31 nodes x 3 = 93 leaves' probabilities
    # (non-negative, summing to <= 1), each the exp of D + 1 = 6 log-probabilities of size <= max|log p|
    # (a relative error of 6 max|log p| u, counted in eps to cover the prior's own logsumexp levels):
    # about 1.7e-5 (0.6 eps seen). An accuracy is a ratio of two such sums: twice that.
    log_p = np.abs(np.asarray(task.prior_logits)).max()
    mass_tol = f32_bound(env.n_nodes * 3 + 16 + 6 * log_p, 1.0)
    assert abs(ev["style0_mass"] - 0.75) < mass_tol and abs(ev["style1_mass"] - 0.25) < mass_tol
    assert abs(ev["style0_acc"] - 0.8) < 2 * mass_tol and abs(ev["style1_acc"] - 0.25) < 2 * mass_tol
    assert abs(ev["pass1"] - (0.75 * 0.8 + 0.25 * 0.25)) < mass_tol
    assert ev["len_wrong"] > ev["len_correct"] + 0.5
    # KL of the prior to itself: each node's sum pi (log_softmax(prior) - prior) is the log-softmax's
    # rounding, <= eps (1 + max|log p|), weighted by the reach, whose sum over nodes is the mean length <= D
    assert abs(ev["kl_ref"]) < f32_bound(5 * (1 + log_p), 1.0)


# -- token-level gradients ----------------------------------------------------------------------
def np_policy_grad(logits, nodes, tokens, mask, adv, logp_old, logp_ref, *, ratio, aggregation, eps, beta):
    """Reference gradient of the clip surrogate (+ k3 KL) w.r.t. the node tables, token by token.

    ``dL/dlogits[b, node_t] += dL/dlogp_t (onehot(a_t) - q(node_t))`` with ``dL/dlogp_t`` from the
    chain rule through the aggregation weight, the clip and the (token or sequence) log-ratio.
    """
    B, G, T = tokens.shape
    z = logits - logits.max(-1, keepdims=True)
    q = np.exp(z) / np.exp(z).sum(-1, keepdims=True)
    logp = np.log(q[np.arange(B)[:, None, None], nodes, tokens])
    n_i = mask.sum(-1)
    n_seq = (n_i > 0).sum()
    if aggregation == "token-mean":
        wt = mask / mask.sum()
    elif aggregation == "seq-mean-token-mean":
        wt = mask / np.maximum(n_i, 1)[..., None] / n_seq
    elif aggregation == "seq-mean-token-sum":
        wt = mask / n_seq
    elif aggregation == "seq-mean-token-sum-norm":
        wt = mask / (n_seq * T)
    elif aggregation == "balanced":  # per group (n+/G) mean_tok(pos) + (n-/G) mean_tok(neg), mean over kept groups
        valid = n_i > 0
        n_kept = max((valid.sum(-1) > 0).sum(), 1)
        wt = np.zeros(mask.shape)
        for b, g in itertools.product(range(B), range(G)):
            if valid[b, g] and adv[b, g] != 0:
                side = (np.sign(adv[b]) == np.sign(adv[b, g])) & valid[b]
                wt[b, g] = mask[b, g] * side.sum() / max(valid[b].sum(), 1) / (n_i[b] * side).sum() / n_kept
    else:  # group-sum
        wt = mask / np.maximum(n_i, 1)[..., None] / G
    lr = (logp - logp_old) * mask
    if ratio == "sequence":
        lr = np.broadcast_to((lr.sum(-1) / np.maximum(n_i, 1))[..., None], lr.shape) * mask
    w = np.exp(lr)
    A = adv[..., None]
    inside = (w >= 1 - eps) & (w <= 1 + eps)
    unclipped = inside | (-A * w > -A * np.clip(w, 1 - eps, 1 + eps))
    dloss_dlr = np.where(unclipped, -A * w, 0.0) * wt  # [B, G, T]
    if ratio == "token":
        dlogp = dloss_dlr * mask
    else:
        dlogp = dloss_dlr.sum(-1, keepdims=True) * mask / np.maximum(n_i, 1)[..., None]
    dlogp = dlogp + beta * wt * (1.0 - np.exp(-(logp - logp_ref)))  # k3
    grad = np.zeros_like(logits)
    for b, g, t in itertools.product(range(B), range(G), range(T)):
        n, a = nodes[b, g, t], tokens[b, g, t]
        onehot = np.eye(logits.shape[-1])[a]
        grad[b, n] += dlogp[b, g, t] * (onehot - q[b, n])
    return grad


@pytest.mark.parametrize("ratio", ["token", "sequence"])
def test_token_gradients_equal_numpy_reference(ratio):
    env = TreeEnv(n_prompts=3, n_answers=3, depth=3, branching=3)
    with jax.enable_x64(True):
        key = jax.random.key(0)
        logits = jax.random.normal(key, (3, env.n_nodes, 3), dtype=jnp.float64)
        ro = jax.jit(env.rollout, static_argnums=3)(seed_words(2), 0, logits.astype(jnp.float32), 5)
        assert len(np.unique(np.asarray(ro.lengths))) == 3  # lengths 1, 2 and 3 all present
        old = logits + 0.4 * jax.random.normal(jax.random.key(1), logits.shape, dtype=jnp.float64)
        ref = logits + 0.3 * jax.random.normal(jax.random.key(2), logits.shape, dtype=jnp.float64)
        adv = jax.random.normal(jax.random.key(3), (3, 5), dtype=jnp.float64)
        mask = ro.mask.astype(jnp.float64).at[1].set(0.0)  # one group removed by the filter
        logp_old, logq_ref = jax.jit(lambda old, ref, ro: (take_logp(env.token_logq(old, ro), ro.tokens),
                                                           env.token_logq(ref, ro)))(old, ref, ro)
        hp = jax.tree_util.tree_map(lambda x: jnp.float64(x), Hyper(eps_low=0.2, eps_high=0.2, beta=0.05))
        # float64 on both sides: a node's entry sums up to B G T tokens' d loss / d logp (onehot - q), each
        # through about 8 roundings (ratio, clip, k3, weights) and D log-softmaxes of 3 A; a token's term is
        # at most its ratio times |A| plus beta |1 - e^(l_ref - l)|, and the weights sum to <= B
        lp, lp_ref = (np.asarray(x) for x in jax.jit(lambda lg, ro, lq: (take_logp(env.token_logq(lg, ro), ro.tokens),
                                                                          take_logp(lq, ro.tokens)))(logits, ro, logq_ref))
        term = (np.exp(np.abs(lp - np.asarray(logp_old)).max()) * np.abs(np.asarray(adv)).max()
                + 0.05 * np.exp(np.abs(lp_ref - lp).max()))
        B, G, T = ro.tokens.shape
        tol = 2 * f64_bound(B * G * T + 8 + 3 * 3 * env.depth, B * term)
        for aggregation in AGGREGATIONS:
            spec = AlgoSpec(ratio=ratio, surrogate="clip", aggregation=aggregation, kl="k3", kl_placement="loss")

            def loss(lg):
                return policy_loss(spec, env.token_logq(lg, ro), ro.tokens, mask, adv, logp_old, logq_ref, hp)[0]

            g = np.asarray(jax.jit(jax.grad(loss))(logits))
            expect = np_policy_grad(np.asarray(logits), np.asarray(ro.nodes), np.asarray(ro.tokens),
                                    np.asarray(mask), np.asarray(adv), np.asarray(logp_old),
                                    lp_ref, ratio=ratio,
                                    aggregation=aggregation, eps=0.2, beta=0.05)
            np.testing.assert_allclose(g, expect, rtol=0, atol=tol, err_msg=aggregation)
            assert np.abs(expect).max() > 1e-3
            assert np.all(g[1] == 0.0)  # the filtered group's prompt gets no gradient


# -- masks -------------------------------------------------------------------------------------
MASK_ENV = TreeEnv(n_prompts=2, n_answers=4, depth=5, branching=3)  # one compiled rollout for every length
mask_rollout = jax.jit(MASK_ENV.rollout, static_argnums=3)


@functools.partial(jax.jit, static_argnums=0)
def mask_gradient(spec, lg, ro, adv):
    env = MASK_ENV
    logp_old = take_logp(env.token_logq(lg, ro), ro.tokens)
    return jax.grad(lambda x: policy_loss(spec, env.token_logq(x, ro), ro.tokens, ro.mask, adv, logp_old,
                                          env.token_logq(lg, ro), Hyper())[0])(lg)


@pytest.mark.parametrize("length", [1, 2, 3, 4, 5])
def test_masks_every_length(length):
    """Force STOP at depth ``length - 1``: every answer has exactly that length, and the padding
    carries no gradient under any aggregation."""
    D = 5
    env = MASK_ENV
    depth = env.node_depth
    stop_bias = np.where(depth == length - 1, 30.0, -30.0)
    logits = np.zeros((2, env.n_nodes, 3), np.float32)
    logits[:, :, STOP] = stop_bias
    ro = mask_rollout(seed_words(7), 3, jnp.asarray(logits), 16)
    tok, mask, nodes = np.asarray(ro.tokens), np.asarray(ro.mask), np.asarray(ro.nodes)
    np.testing.assert_array_equal(np.asarray(ro.lengths), length)
    np.testing.assert_array_equal(mask, np.broadcast_to(np.arange(D) < length, mask.shape))
    assert np.all(tok[..., length:] == 0) and np.all(nodes[..., length:] == 0)
    if length < D:
        assert np.all(tok[..., length - 1] == STOP) and np.all(tok[..., : length - 1] != STOP)
    for t in range(length - 1):  # nodes follow the tokens down the tree
        np.testing.assert_array_equal(nodes[..., t + 1], env.child[nodes[..., t], tok[..., t]])
    last = nodes[..., length - 1], tok[..., length - 1]
    np.testing.assert_array_equal(np.asarray(ro.answers), env.pair_answer[last])
    assert np.all(env.terminal[last])
    adv = jnp.linspace(-1.0, 1.0, 32).reshape(2, 16)
    lg = jnp.asarray(logits)
    for aggregation in AGGREGATIONS:
        g = mask_gradient(AlgoSpec(surrogate="reinforce", aggregation=aggregation), lg, ro, adv)
        touched = np.zeros(env.n_nodes, bool)
        touched[np.unique(nodes[..., :length])] = True
        assert np.all(np.asarray(g)[:, ~touched] == 0.0)
        assert np.isfinite(np.asarray(g)).all()


# -- config, run and the partition tools ----------------------------------------------------------
@pytest.mark.parametrize("tree,field", [
    ({"depth": 0}, "task.tree.depth"),
    ({"branching": 1}, "task.tree.branching"),
    ({"depht": 3}, "task.tree.depht"),
    ({"styles": [{"mass": -1}]}, r"task.tree.styles\[0\].mass"),
    ({"styles": [{"accuracy": 1.5}]}, r"task.tree.styles\[0\].accuracy"),
    ({"styles": [{"actions": [0]}, {"actions": [0, 1, 2]}]}, r"task.tree.styles\[1\].actions"),
    ({"styles": [{"actions": [0]}]}, "task.tree.styles"),
    ({"length_slope_wrong": "long"}, "task.tree.length_slope_wrong"),
    ({"depth": 20, "branching": 4}, "task.tree.depth"),
    ({"depth": 1, "branching": 3}, "task.tree.depth"),  # 3 leaves < 8 answers
    ({"n_answers": 5}, "task.tree.n_answers"),
])
def test_bad_tree_config_is_refused_naming_the_field(tree, field):
    with pytest.raises(ValueError, match=field):  # refused by resolve (a ConfigError), before any env is built
        ts.make_env(ts.resolve({"task": {"env": "tree", "tree": tree},
                                "train": {"seeds": 1, "steps": 2, "batch_size": 4}}))


def test_tree_runs_through_run_and_partition():
    import tabsim.stats as st

    cfg = {"task": {"env": "tree", "n_prompts": 16, "n_answers": 5, "n_correct": 1,
                    "tree": {"depth": 3, "branching": 3, "styles": [{"mass": 2.0, "accuracy": 0.6}, {"mass": 1.0}],
                             "length_slope_wrong": 1.0}},
           "arms": {"arms": ["frozen", "random", "majority", "true"]},
           "algo": {"estimator": "grpo", "surrogate": "clip", "aggregation": "seq-mean-token-mean", "lr": 2.0,
                    "epochs": 2, "minibatches": 2},
           "train": {"seeds": 4, "steps": 40, "batch_size": 8, "group_size": 8, "eval_every": 20},
           "sweep": {"prior_strength": [0.3, 0.6]}}
    res = ts.run(cfg, progress=False)
    fin = res.final()
    assert len(fin) == 2 * 4 * 4
    assert np.isfinite(fin[["pass1", "len_correct", "len_wrong", "style0_mass", "kl_ref"]].values).all()
    part = st.seed_partition(fin, by=("prior_strength",))
    st.check_identity(part)
    summ = st.summarize_partition(part, by=("prior_strength",), method="t")
    assert set(summ["term"]) >= {"d_null", "d_elicit", "d_rd"}
    true_gain = part.groupby("prior_strength").d_total.mean()
    assert (true_gain > 0).all()  # the verifier arm learns on the tree
    frozen = fin[fin.arm == "frozen"]
    # the frozen table is the prior, a log-softmax output: log-softmax again gives it back within (b + 4) u
    # (1 + |prior|) (a sum of b exp's near 1, its log, two differences), each node's KL is that, weighted by
    # a node's reach, <= D nodes a path
    r = ts.resolve(cfg)
    env = ts.make_env(r)
    prior = np.concatenate([np.asarray(init_task(env, seed_words(s), Hyper(
        **r.hyper_values({"prior_strength": p}))).prior_logits) for s in range(4) for p in (0.3, 0.6)])
    tol = env.depth * f32_bound(prior.shape[-1] + 4, 1 + np.abs(prior).max())
    np.testing.assert_allclose(frozen.kl_ref, 0.0, rtol=0, atol=tol)
