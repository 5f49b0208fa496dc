"""The tree-MDP task family: answers are token sequences, so length and token-level ratios are real.

Nodes are prefixes. Every node has a tabular softmax over ``b`` actions; action ``0`` is STOP, actions
``1 .. b-1`` are content tokens that lead to a child node. An answer ends at STOP or after ``D``
tokens, so lengths run from 1 to ``D`` (the STOP token counts). Each terminal (node, action) pair is a
*leaf*; a static map sends leaves to one of ``K`` answers (many paths reach the same answer), and the
rewards (:mod:`tabsim.sim.arms`) compare answers, never paths. The root's actions are grouped into
*styles*: the subtrees under them, each with its own prior mass and accuracy.

Indexing (static, numpy): nodes in breadth-first order, level ``d`` holds ``(b-1)^d`` nodes starting at
``offset[d]``; the child of level-``d`` node ``i`` under content token ``a`` is level-``d+1`` node
``i (b-1) + a - 1``. With ``D = 1`` and ``b = K`` the tree is the bandit: one node whose actions are
the answers, and its task, sampling and metrics reproduce :class:`~tabsim.sim.envs.bandit.BanditEnv`
draw for draw.

Prior (a distribution over leaves, turned into node logits by summing subtree masses bottom-up)::

    m(leaf) ∝ P(style s) P(c | s) P(L | s, c) / n(s, L, c)   x (1 + f K) if its answer is the format answer

with ``c`` the leaf's correctness for the prompt, ``L`` its length and ``n(s, L, c)`` the number of
leaves of that class (mass is uniform within a class). ``P(c = 1 | s)`` is the style's accuracy (the
traced ``prior_strength`` p_s unless the style fixes it) and ``P(L | s, c) ∝ exp(lambda_c (L - 1)/(D - 1))``
is the length profile (``lambda_wrong > lambda_correct``: wrong answers tend to be longer). Classes
that a prompt's tree cannot realise drop out and the rest renormalise. With one style and
``D = 1`` this is the bandit prior ``log(p_s / k)`` / ``log((1 - p_s)/(K - k))`` plus the format boost.
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tabsim.sim.ops import cumsum_last, log_softmax_last, softmax_last
from tabsim.sim.pytree import pytree_dataclass
from tabsim.base.choices import MAX_PAIRS, TREE_FIELDS, float_field, int_field, tree_styles
from tabsim.sim import rng as R
from tabsim.sim.envs.base import (optional_metrics, prompt_means, prompt_values, register_env,
                                  sampled_majority_metrics, select_metrics, split_majority, wanted,
                                  with_standard_errors)
from tabsim.sim.envs.bandit import draw_answer_structure, majority_tables, offline_majority

STOP = 0


@pytree_dataclass
class TreeTask:
    """One seed's task instance. ``prior_logits`` is ``[N, n_nodes, b]``; the rest as in the bandit."""

    prior_logits: jax.Array  # [N, n_nodes, b] normalised per-node log-probabilities; the KL reference
    correct: jax.Array  # [N, K] float 0/1
    format_answer: jax.Array  # [N] int index of the boosted wrong answer
    offline_label: jax.Array  # [N] int offline majority label from m base-policy samples
    prompt_strength: jax.Array  # [N] each prompt's own p_s


@pytree_dataclass
class TreeRollout:
    """Sampled answers: ``answers``/``lengths`` ``[B, G]``; ``tokens``/``mask``/``nodes`` ``[B, G, T]``.

    ``mask`` is 1 up to and including the STOP token; ``nodes`` is the node each token was sampled at
    (0 on padding).
    """

    answers: jax.Array
    tokens: jax.Array
    mask: jax.Array
    lengths: jax.Array
    nodes: jax.Array
    logq: jax.Array | None = None  # [B, G, T, b] log_softmax of the rows read (``rollout(with_logq=True)``)


def gather_logq(logits_b, nodes):
    """``log_softmax`` of the node tables at ``nodes [B, G, T]``: ``[B, G, T, b]`` from ``logits_b [B, n, b]``."""
    B = logits_b.shape[0]
    return jax.nn.log_softmax(logits_b[jnp.arange(B)[:, None, None], nodes], axis=-1)


def table_rows(n_nodes: int, nodes, prompts=None):
    """Row of each visited node in the flattened table ``[N n_nodes, b]``, same shape as ``nodes``.

    ``nodes`` is ``[B, ...]`` node indices of batch prompt ``i``; ``prompts [B]`` maps batch position
    ``i`` to its prompt (default ``i``: the table is the batch's own).
    """
    B = nodes.shape[0]
    p = jnp.arange(B, dtype=jnp.int32) if prompts is None else jnp.asarray(prompts, jnp.int32)
    return p.reshape((B,) + (1,) * (nodes.ndim - 1)) * n_nodes + nodes


def gather_rows(logits, rows):
    """Logit rows ``[..., b]`` of the flattened table at ``rows`` (from :func:`table_rows`)."""
    return logits.reshape(-1, logits.shape[-1])[rows]


def _fail(field: str, msg: str):
    raise ValueError(f"task.tree.{field}: {msg}")


def tree_structure(depth: int, branching: int, root_style: np.ndarray, n_answers: int) -> dict:
    """Static index tables of a full tree, each over nodes ``[n_nodes]`` or pairs ``[n_nodes, b]``.

    Returns ``level_sizes``, ``offsets``, ``node_depth``, ``child`` (0 where terminal), ``terminal``,
    ``pair_len`` (length of the answer ending at the pair), ``pair_style`` and ``pair_answer``.
    Answers go round-robin over the leaves sorted by (length, style, breadth-first index), so every
    (length, style) class covers as many distinct answers as it has leaves, up to K; with ``D = 1`` the
    root's action ``a`` is answer ``a mod K``.
    """
    D, b = depth, branching
    c = b - 1
    level_sizes = np.asarray([c**d for d in range(D)], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(level_sizes)[:-1]])
    n_nodes = int(level_sizes.sum())
    node_depth = np.repeat(np.arange(D), level_sizes)
    child = np.zeros((n_nodes, b), np.int32)
    root_action = np.zeros(n_nodes, np.int64)  # the content token under the root that a node descends from
    for d in range(D - 1):
        i = np.arange(level_sizes[d])
        kids = offsets[d + 1] + i[:, None] * c + np.arange(c)[None, :]
        child[offsets[d] + i, 1:] = kids
        root_action[kids] = (1 + np.arange(c))[None, :] if d == 0 else root_action[offsets[d] + i][:, None]
    terminal = np.zeros((n_nodes, b), bool)
    terminal[:, STOP] = True
    terminal[node_depth == D - 1, :] = True
    pair_len = np.broadcast_to(node_depth[:, None] + 1, (n_nodes, b)).copy()
    pair_style = np.broadcast_to(root_style[root_action][:, None], (n_nodes, b)).copy()
    pair_style[0, :] = root_style  # pairs at the root: the style of the action itself
    order = np.lexsort((np.arange(n_nodes * b), pair_style.ravel(), pair_len.ravel(), ~terminal.ravel()))
    pair_answer = np.zeros(n_nodes * b, np.int32)
    n_leaves = int(terminal.sum())
    pair_answer[order[:n_leaves]] = np.arange(n_leaves) % n_answers
    return dict(level_sizes=level_sizes, offsets=offsets, node_depth=node_depth, child=child, terminal=terminal,
                pair_len=pair_len, pair_style=pair_style, pair_answer=pair_answer.reshape(n_nodes, b),
                n_nodes=n_nodes, n_leaves=n_leaves)


@register_env("tree")
class TreeEnv:
    """Stateless tree-MDP. Policy parameters are per-prompt node tables ``[N, n_nodes, b]``.

    Args:
      n_prompts, n_answers, n_correct: N, K and k (``task.n_prompts`` etc.).
      depth: D, the maximum answer length in tokens (``task.tree.depth``, default 4).
      branching: b, actions per node including STOP (``task.tree.branching``, default 3).
      styles: list of ``{mass, accuracy, actions}``: the root actions each style owns (default
        round-robin), its relative prior mass and its accuracy (default: the traced ``prior_strength``).
        Default: one style over the whole tree.
      length_slope_correct, length_slope_wrong: lambda_c of the length profile
        ``P(L | s, c) ∝ exp(lambda_c (L - 1) / (D - 1))`` (default 0: every length equally likely).
      heterogeneous, tie, offline_samples, pass_k, maj_k, maj_draws, rng, metrics: as in the bandit (``metrics``
        selects among the answer-level metrics; the tree's own metrics are always recorded).
    """

    def __init__(self, *, n_prompts=40, n_answers=8, n_correct=2, heterogeneous=False, tie="random",
                 offline_samples=64, pass_k=(), maj_k=(), rng="fast", metrics=None, maj_draws=None,
                 prompt_metrics=None, **tree: Any):
        for key in tree:
            if key not in TREE_FIELDS:
                _fail(key, f"unknown field; allowed: {', '.join(TREE_FIELDS)}")
        self.n_prompts, self.n_answers, self.n_correct = n_prompts, n_answers, n_correct
        self.heterogeneous, self.tie, self.offline_samples = heterogeneous, tie, offline_samples
        self.pass_k, self.maj_k, self.rng = tuple(pass_k), tuple(maj_k), rng
        self.metrics = None if metrics is None else tuple(metrics)
        self.prompt_metrics = None if prompt_metrics is None else tuple(prompt_metrics)
        D = self.depth = int_field(tree, "depth", 4, 1, 32)
        b = self.branching = int_field(tree, "branching", 3, 2, 1024)
        self.styles = tree_styles(tree.get("styles"), b)
        self.slope = (float_field(tree, "length_slope_wrong", 0.0), float_field(tree, "length_slope_correct", 0.0))
        n_nodes = sum((b - 1) ** d for d in range(D))
        if n_nodes * b > MAX_PAIRS:
            _fail("depth", f"depth={D} with branching={b} gives {n_nodes} nodes x {b} actions = {n_nodes * b} "
                           f"table entries per prompt (max {MAX_PAIRS}); use a smaller depth or branching")
        root_style = np.zeros(b, np.int64)
        for i, (_, _, actions) in enumerate(self.styles):
            root_style[list(actions)] = i
        s = tree_structure(D, b, root_style, n_answers)
        if s["n_leaves"] < n_answers:
            _fail("depth", f"depth={D} with branching={b} has {s['n_leaves']} leaves, fewer than "
                           f"task.n_answers={n_answers}; some answers would be unreachable")
        self.n_nodes, self.n_leaves, self.max_len = s["n_nodes"], s["n_leaves"], D
        self.single_node = self.n_nodes == 1  # one-node tree: the bandit, and its closed-form update
        # the engine differentiates the loss with respect to the visited rows only and scatter-adds them
        # into the table (``tabsim.sim.engine``): a rollout touches B G D of the N n_nodes rows
        self.sparse_rows = not self.single_node
        self.n_styles = len(self.styles)
        self.level_sizes, self.offsets = tuple(int(x) for x in s["level_sizes"]), tuple(int(x) for x in s["offsets"])
        self.node_depth, self.child, self.terminal = s["node_depth"], s["child"], s["terminal"]
        self.pair_len, self.pair_style, self.pair_answer = s["pair_len"], s["pair_style"], s["pair_answer"]
        S, K = self.n_styles, n_answers
        term = self.terminal.ravel()
        # (style, answer) indicator matrix over pairs; zero rows for non-terminal pairs
        sa = np.zeros((n_nodes * b, S * K), np.float32)
        sa[np.flatnonzero(term), (self.pair_style.ravel() * K + self.pair_answer.ravel())[term]] = 1.0
        self._sa = sa
        pair_cls = self.pair_style.ravel() * D + self.pair_len.ravel() - 1  # (style, length) class of each pair
        # leaves of each answer per class, [K, S D]: a prompt's correct leaves per class are
        # ``correct @ _answer_cls`` (counts, exact in float32) without a [N, pairs] product
        self._answer_cls = np.zeros((K, S * D), np.float32)
        np.add.at(self._answer_cls, (self.pair_answer.ravel()[term], pair_cls[term]), 1.0)
        # (class, answer) cell of every pair (non-terminal pairs: overwritten by their subtree mass)
        self._pair_cell = (pair_cls * K + self.pair_answer.ravel()).astype(np.int32)
        self._style_p = np.asarray([m for m, _, _ in self.styles], np.float64)
        self._style_p = (self._style_p / self._style_p.sum()).astype(np.float32)
        self._style_acc = np.asarray([np.nan if a is None else a for _, a, _ in self.styles], np.float32)
        x = np.arange(D, dtype=np.float32) / max(D - 1, 1)
        self._len_logits = np.stack([self.slope[0] * x, self.slope[1] * x]).astype(np.float32)  # [2 (wrong, right), D]
        # maj@k above the enumeration cap is estimated from maj_draws sampled groups (train.maj_draws)
        exact, self.maj_sampled = split_majority(self.maj_k, n_answers, maj_draws)
        self.maj_draws = maj_draws
        self._maj = {k: tuple(jnp.asarray(a) for a in majority_tables(k, n_answers, tie)) for k in exact}

    @property
    def table_shape(self):
        return (self.n_prompts, self.n_nodes, self.branching)

    def _levels(self, x):
        """Split ``x [..., n_nodes, ...]`` (node axis 1) into its levels."""
        return [x[:, o:o + n] for o, n in zip(self.offsets, self.level_sizes)]

    # -- task -------------------------------------------------------------------------------
    def init_task(self, seed, params) -> TreeTask:
        """Draw correct answers, the format answer, per-prompt strengths and the offline label.

        The draws are the bandit's (same addresses and shapes), so a depth-1 tree with ``b = K`` gets
        the bandit's task; the prior over leaves is then turned into node logits bottom-up.
        """
        n, K, k = self.n_prompts, self.n_answers, self.n_correct
        D, b, S = self.depth, self.branching, self.n_styles
        correct, is_format, p = draw_answer_structure(seed, params, n_prompts=n, n_answers=K, n_correct=k,
                                                      heterogeneous=self.heterogeneous, rng=self.rng)
        n_right = (correct @ self._answer_cls).reshape(n, S, D)  # leaves per (style, length) class
        n_wrong = ((1.0 - correct) @ self._answer_cls).reshape(n, S, D)
        has_r, has_w = n_right.sum(-1) > 0, n_wrong.sum(-1) > 0  # [N, S]
        acc = jnp.where(jnp.isnan(self._style_acc)[None, :], p[:, None], self._style_acc[None, :])
        p_right = jnp.where(has_r & has_w, acc, jnp.where(has_r, 1.0, 0.0))  # P(c = 1 | s)
        big = jnp.float32(-1e30)  # classes the tree cannot realise for this prompt drop out
        len_w = jax.nn.softmax(jnp.where(n_wrong > 0, self._len_logits[0], big), axis=-1)
        len_r = jax.nn.softmax(jnp.where(n_right > 0, self._len_logits[1], big), axis=-1)
        # per class (s, L, c): P(s) P(c | s) P(L | s, c) / n(s, L, c), in this order so D = 1 gives the
        # bandit's p / k; then one gather sends each pair its class's weight
        sp = self._style_p[None, :, None]
        w_cls = jnp.stack([(sp * (1.0 - p_right)[..., None] * len_w) / jnp.maximum(n_wrong, 1.0),
                           (sp * p_right[..., None] * len_r) / jnp.maximum(n_right, 1.0)], axis=-1)  # [N, S, D, 2]
        # log-weight of every (class, answer) for this prompt, [N, S D, K]: the class weight for the answer's
        # correctness, plus the format boost; then one gather by a static index sends each pair its value
        log_cls = jnp.log(w_cls).reshape(n, S * D, 2)
        fmt = jnp.where(is_format, jnp.log1p(params.format_boost * K), 0.0)  # [N, K]
        table = jnp.where(correct[:, None, :] > 0, log_cls[..., 1:], log_cls[..., :1]) + fmt[:, None, :]
        # level by level (no slices of a whole-tree array), each a gather from the flat table whose
        # indices are laid out as its output [N, pairs of the level] (no transposed copy)
        flat, cells = table.reshape(-1), S * D * K
        first = jnp.arange(n, dtype=jnp.int32)[:, None] * cells
        levels = [flat[first + self._pair_cell[None, o * b:(o + m) * b]].reshape(n, m, b)
                  for o, m in zip(self.offsets, self.level_sizes)]
        # subtree log-masses bottom-up; a non-terminal pair's mass is its child's subtree mass
        for d in range(D - 2, -1, -1):
            below = jax.nn.logsumexp(levels[d + 1], axis=-1).reshape(n, self.level_sizes[d], b - 1)
            levels[d] = levels[d].at[:, :, 1:].set(below)
        prior = jax.nn.log_softmax(jnp.concatenate(levels, axis=1), axis=-1)
        p_ans = self._joint(prior, 1.0)[0].sum(1)
        label = offline_majority(seed, p_ans, self.offline_samples, K, self.tie, self.rng)
        return TreeTask(prior_logits=prior, correct=correct, format_answer=jnp.argmax(is_format, axis=1),
                        offline_label=label, prompt_strength=p)

    # -- sampling and log-probabilities ---------------------------------------------------------
    def rollout(self, seed, step, logits_b, group_size: int, prompts=None, with_logq: bool = False) -> TreeRollout:
        """Sample ``G`` answers per prompt token by token, one uniform per (answer, position).

        Each token is drawn by inverse CDF at the current node; after STOP (or ``D`` tokens) the
        answer is done and the rest is padding (token 0, mask 0, node 0). With ``prompts [B]`` the
        rows are read from the whole table ``logits_b [N, n_nodes, b]`` at those prompts (no copy of
        the batch's tables); the draws are the same as from ``logits_b[prompts]``. ``with_logq`` also
        returns ``logq [B, G, T, b]``, the ``log_softmax`` of every row read (padding: the root's), the
        values ``log_softmax_last(gather_rows(logits_b, table_rows(...)))`` would give, without a
        second gather.
        """
        B = logits_b.shape[0] if prompts is None else prompts.shape[0]
        G, D = group_size, self.depth
        u = R.uniform(seed, (B, G, D), step=step, tag=R.ROLLOUT, rng=self.rng)
        b = self.branching
        node = jnp.zeros((B, G), jnp.int32)
        alive = jnp.ones((B, G), bool)
        if self.n_nodes == 1:  # one node: one token, the bandit's sampling (jax.nn.softmax, bit for bit)
            probs = jax.nn.softmax(logits_b[:, 0][:, None, :], axis=-1)
            cdf = cumsum_last(probs)[..., : b - 1]
            a = (u[..., 0, None] >= cdf).sum(-1).astype(jnp.int32)
            logq = log_softmax_last(jnp.broadcast_to(logits_b[:, :1], (B, G, b)))[:, :, None] if with_logq else None
            return TreeRollout(answers=jnp.asarray(self.pair_answer.ravel())[a], tokens=a[..., None],
                               mask=jnp.ones((B, G, 1), jnp.float32), lengths=jnp.ones((B, G), jnp.float32),
                               nodes=node[..., None], logq=logq)
        flat = logits_b.reshape(-1, b)  # rows of the flattened table: one gather per level, no bounds checks
        base = table_rows(self.n_nodes, node, prompts)

        def level(carry, xs):
            """One token for every answer: the level is a loop iteration (its state kept in memory, one
            copy of the code to compile); ``off``/``size`` are the level's first node and node count."""
            node, alive, last, off, size = carry
            d, u_d = xs
            row = flat.at[base + node].get(mode="promise_in_bounds")  # [B, G, b]
            cdf = cumsum_last(softmax_last(row))[..., : b - 1]
            a = jnp.where(alive, (u_d[..., None] >= cdf).sum(-1).astype(jnp.int32), STOP)
            out = (a, alive, node, log_softmax_last(row) if with_logq else None)
            # STOP (or any token of the last level) ends an answer; content token a leads to child
            # off + size + (node - off) (b - 1) + a - 1 (breadth-first order: index arithmetic, no tables)
            ends = alive & ((a == STOP) | (d == D - 1))
            last = jnp.where(ends, node * b + a, last)  # the (node, action) pair the answer ended at
            alive = alive & ~ends
            node = jnp.where(alive, off + size + (node - off) * (b - 1) + a - 1, 0)
            return (node, alive, last, off + size, size * (b - 1)), out

        carry = (node, alive, jnp.zeros((B, G), jnp.int32), jnp.int32(0), jnp.int32(1))
        (_, _, last, _, _), (toks, masks, nodes, logq) = jax.lax.scan(
            level, carry, (jnp.arange(D, dtype=jnp.int32), jnp.moveaxis(u, -1, 0)))
        answers = jnp.asarray(self.pair_answer.ravel())[last]
        mask = jnp.moveaxis(masks, 0, -1).astype(jnp.float32)
        return TreeRollout(answers=answers, tokens=jnp.moveaxis(toks, 0, -1), mask=mask, lengths=mask.sum(-1),
                           nodes=jnp.moveaxis(nodes, 0, -1), logq=None if logq is None else jnp.moveaxis(logq, 0, -2))

    def token_logq(self, logits_b, rollout: TreeRollout):
        """Log next-token distribution at every visited node, ``[B, G, T, b]`` (padding: the root's).

        A one-node tree (``D = 1``) returns the root's distribution once per prompt, ``[B, 1, 1, b]``,
        as the bandit does, so its gradient is summed in the same order and depth-1 runs match the
        bandit bit for bit.
        """
        if self.n_nodes == 1:
            return jax.nn.log_softmax(logits_b[:, 0], axis=-1)[:, None, None, :]
        return gather_logq(logits_b, rollout.nodes)

    def answer_correct(self, task_b: TreeTask, answers):
        """``[B, G]`` 0/1 correctness of sampled answers."""
        return jnp.take_along_axis(task_b.correct, answers, axis=1)

    def is_format(self, task_b: TreeTask, answers):
        return (answers == task_b.format_answer[:, None]).astype(jnp.float32)

    # -- exact metrics by dynamic programming ----------------------------------------------------
    def _reach(self, logq):
        """Log-probability of reaching each node, ``[N, n_nodes]``, top-down over the levels."""
        n = logq.shape[0]
        out = [jnp.zeros((n, 1), logq.dtype)]
        for d, lq in enumerate(self._levels(logq)[:-1]):
            out.append((out[-1][..., None] + lq[..., 1:]).reshape(n, -1))
        return jnp.concatenate(out, axis=1)

    def _joint(self, logq, weight):
        """``P(style, answer)`` and ``E[weight 1{style, answer}]``, each ``[N, S, K]``; also the reach."""
        n = logq.shape[0]
        log_reach = self._reach(logq)
        p_pair = jnp.exp(log_reach[..., None] + logq) * self.terminal  # [N, n_nodes, b] leaf probabilities
        flat = p_pair.reshape(n, -1)
        joint = (flat @ self._sa).reshape(n, self.n_styles, self.n_answers)
        weighted = ((flat * jnp.asarray(weight, flat.dtype).reshape(-1)) @ self._sa).reshape(joint.shape)
        return joint, weighted, log_reach

    def answer_distribution(self, logits):
        """Exact distribution over answers, ``[N, K]``."""
        return self._joint(jax.nn.log_softmax(logits, axis=-1), 1.0)[0].sum(1)

    def evaluate(self, logits, task: TreeTask, params) -> dict:
        """Exact metrics of the policy by DP over the tree (no sampling).

        Bandit keys (answer level): ``pass1``, ``entropy`` (of the answer distribution), ``mode_correct``,
        ``mode_mass``, ``format_mass``, ``kl_ref`` (KL of the answer-sequence distributions,
        ``sum_nodes reach KL(q || q_ref)``), ``pass@k``, ``maj@k``. Tree keys: ``len_mean``,
        ``len_correct``/``len_wrong`` (expected length given a correct / wrong answer, per prompt),
        ``seq_entropy`` (of the leaf distribution), ``token_entropy`` (mean next-token entropy per
        generated token), ``style{i}_mass`` and ``style{i}_acc``. All are means over prompts.
        """
        logq = jax.nn.log_softmax(logits, axis=-1)
        joint, plen, log_reach = self._joint(logq, self.pair_len)
        q = joint.sum(1)  # [N, K]
        qlen = plen.sum(1)
        corr = task.correct
        p_correct = (q * corr).sum(-1)
        logq_ans = jnp.log(jnp.maximum(q, 1e-38))
        reach = jnp.exp(log_reach)
        node_kl = (jnp.exp(logq) * (logq - task.prior_logits)).sum(-1)
        node_h = -(jnp.exp(logq) * logq).sum(-1)
        len_mean = qlen.sum(-1)
        seq_h = (reach * node_h).sum(-1)
        tiny = 1e-30
        out = {  # per prompt, [N]; the bandit's keys first and in its order, reduced as the bandit's
            "pass1": p_correct,
            "entropy": -(q * logq_ans).sum(-1),
            "mode_correct": jnp.take_along_axis(corr, jnp.argmax(q, -1)[:, None], 1)[:, 0],
            "format_mass": jnp.take_along_axis(q, task.format_answer[:, None], 1)[:, 0],
            "kl_ref": (reach * node_kl).sum(-1),
        }
        out = select_metrics(out, self.metrics)
        for k in self.pass_k:
            out[f"pass@{k}"] = 1.0 - (1.0 - p_correct) ** k
        for k, (counts, lmc, credit) in self._maj.items():
            logp_counts = lmc[None, :] + logq_ans @ counts.T  # [N, M]
            out[f"maj@{k}"] = (jnp.exp(logp_counts) * (corr @ credit.T)).sum(-1)
        if self.metrics is not None:  # the optional metrics train.metrics names (none by default)
            prior_ans = (self._joint(task.prior_logits, 1.0)[0].sum(1) if wanted(self.metrics, "filtered_kl")
                         else None)
            out.update(optional_metrics(self.metrics, jnp.log(q), corr,
                                        None if prior_ans is None else jnp.log(prior_ans), logq[:, 0]))
        tree = {
            "mode_mass": q.max(-1),
            "len_mean": len_mean,
            "len_correct": (qlen * corr).sum(-1) / jnp.maximum(p_correct, tiny),
            "len_wrong": (qlen * (1.0 - corr)).sum(-1) / jnp.maximum(1.0 - p_correct, tiny),
            "seq_entropy": seq_h,
            "token_entropy": seq_h / len_mean,
        }
        style_mass = joint.sum(-1)  # [N, S]
        style_right = (joint * corr[:, None, :]).sum(-1)
        for i in range(self.n_styles):
            tree[f"style{i}_mass"] = style_mass[:, i]
            tree[f"style{i}_acc"] = style_right[:, i] / jnp.maximum(style_mass[:, i], tiny)
        if self.maj_sampled:  # maj@k above the enumeration cap, estimated (none by default)
            est, var = sampled_majority_metrics(self, q, corr)
            means = {**with_standard_errors(prompt_means({**out, **est}), var), **prompt_means(tree)}
            out = {**out, **est}
        else:
            means = {**prompt_means(out), **prompt_means(tree)}
        if self.prompt_metrics:  # train.prompt_metrics: the per-prompt values too (none by default)
            means.update(prompt_values(out, self.prompt_metrics,
                                       task.prompt_strength if self.heterogeneous else None))
        return means
