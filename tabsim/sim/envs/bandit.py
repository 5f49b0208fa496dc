"""The contextual bandit task family: N prompts x K answers, k of them correct.

Static structure (shapes, which exact metrics to compute) lives on the stateless :class:`BanditEnv`;
numeric knobs (prior strength, format boost, heterogeneity) are traced fields of the hyperparameter
pytree, so one compiled program serves a whole grid of priors.

Prior (docs/science.md): logit ``log(p_s / k)`` on each correct answer (or, with ``task.correct_mass_ratio = r``,
``log(p_s r^j / sum_i r^i)`` on the correct answer of rank ``j``), ``log((1 - p_s) / (K - k))`` on each
wrong one, ``+ log(1 + f K)`` on the designated "format" answer (a wrong one), then normalised. With
heterogeneity, each prompt's own ``p_s`` is drawn from ``Beta(m c, (1 - m) c)`` with mean ``m`` and
concentration ``c``.
"""
from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np

from tabsim.sim.ops import ranks, take_rows, weighted_counts
from tabsim.base.precision import real
from tabsim.sim.pytree import pytree_dataclass
from tabsim.base.choices import MAX_COMPOSITIONS, n_compositions  # noqa: F401  (named without JAX, for the config)
from tabsim.sim.envs.base import (optional_metrics, prompt_means, prompt_values, register_env,
                                  sampled_majority_metrics, select_metrics, split_majority, with_standard_errors)
from tabsim.sim import rng as R


@pytree_dataclass
class BanditTask:
    """One seed's task instance. Arrays are ``[N, K]`` or ``[N]``."""

    prior_logits: jax.Array  # [N, K] normalised log-probabilities; also the KL reference
    correct: jax.Array  # [N, K] float 0/1
    format_answer: jax.Array  # [N] int index of the boosted wrong answer
    offline_label: jax.Array  # [N] int offline majority label from m base-policy samples
    prompt_strength: jax.Array  # [N] each prompt's own p_s


@pytree_dataclass
class Rollout:
    """Sampled answers of a batch: ``answers [B, G]``, ``tokens``/``mask`` ``[B, G, T]``."""

    answers: jax.Array
    tokens: jax.Array
    mask: jax.Array
    lengths: jax.Array


def compositions(k: int, K: int) -> np.ndarray:
    """All count vectors of ``k`` draws over ``K`` answers, ``[C(k+K-1, K-1), K]``."""
    out = []
    for bars in itertools.combinations(range(k + K - 1), K - 1):
        prev, counts = -1, []
        for b in bars:
            counts.append(b - prev - 1)
            prev = b
        counts.append(k + K - 1 - prev - 1)
        out.append(counts)
    return np.asarray(out, dtype=np.int64)




def answer_ranks(seed, n_prompts: int, n_answers: int, rng="fast"):
    """``[N, K]`` each answer's rank among its prompt's answers (0..K-1): ranks below k are the correct ones,
    rank k is the format answer."""
    return ranks(R.uniform(seed, (n_prompts, n_answers), step=R.TASK_STEP, tag=R.POSITIONS, rng=rng))


def draw_answer_structure(seed, params, *, n_prompts, n_answers, n_correct, heterogeneous, rng="fast"):
    """Each prompt's correct answers, its format answer and its own prior strength.

    Shared by every task family so that their draws coincide (a depth-1 tree is the bandit).

    Returns:
      ``correct [N, K]`` float 0/1, ``is_format [N, K]`` bool, ``p [N]`` per-prompt ``p_s``.
    """
    n, K, k = n_prompts, n_answers, n_correct
    rank = answer_ranks(seed, n, K, rng)
    correct = (rank < k).astype(real())
    is_format = rank == k
    p = jnp.full((n,), params.prior_strength, real())
    if heterogeneous:
        c = params.heterogeneity
        k_beta = jax.random.fold_in(jax.random.wrap_key_data(seed, impl="threefry2x32"), R.TASK_EXTRA)
        p = R.beta(k_beta, p * c, (1.0 - p) * c, (n,))
        p = jnp.clip(p, 1e-6, 1.0 - 1e-6)
    return correct, is_format, p


def offline_majority(seed, probs, m: int, n_answers: int, tie: str, rng: str = "fast"):
    """Each prompt's offline majority label ``[N]`` from ``m`` samples of ``probs [N, K]``.

    ``m = 0`` (no arm reads the label) gives -1, which matches no answer, and draws nothing.
    """
    if m == 0:
        return jnp.full((probs.shape[0],), -1, jnp.int32)
    base = R.categorical(seed, probs, m, step=R.TASK_STEP, tag=R.OFFLINE, rng=rng)
    return plurality(seed, R.TASK_STEP, R.OFFLINE_TIE, base, n_answers, tie, rng)


def majority_tables(k: int, K: int, tie: str):
    """Exact maj@k tables: counts ``[M, K]``, log multinomial coefficients ``[M]`` and the credit
    ``[M, K]`` each answer gets when it is the plurality (split evenly over ties for ``random``,
    all to the lowest index for ``lowest``)."""
    counts = compositions(k, K)
    lmc = math.lgamma(k + 1) - np.sum([[math.lgamma(c + 1) for c in row] for row in counts], axis=1)
    is_max = counts == counts.max(axis=1, keepdims=True)
    if tie == "random":
        credit = is_max / is_max.sum(axis=1, keepdims=True)
    else:
        credit = np.zeros_like(is_max, dtype=float)
        credit[np.arange(len(counts)), is_max.argmax(axis=1)] = 1.0
    return counts.astype(np.float32), lmc, credit.astype(np.float64)  # float64: each program casts to its type


def plurality(seed, step, tag, answers, n_answers: int, tie: str, rng: str = "fast"):
    """Plurality answer of each row of ``answers [R, G]``; ties random or to the lowest index."""
    counts = weighted_counts(answers, None, n_answers)
    if tie == "random":
        counts = counts + 0.5 * R.uniform(seed, counts.shape, step=step, tag=tag, rng=rng)
    return jnp.argmax(counts, axis=-1)


@register_env("bandit")
class BanditEnv:
    """Stateless one-step bandit. Policy parameters are a logit table ``[N, K]``.

    Args:
      n_prompts, n_answers, n_correct: N, K and k.
      heterogeneous: draw each prompt's p_s from a Beta (traced concentration ``heterogeneity``).
      unequal: split p_s among the correct answers geometrically, ``p_s r^j / sum_i r^i`` for the correct answer of
        rank ``j`` (traced ratio ``correct_mass_ratio``; ``task.correct_mass_ratio``); default the equal split.
      tie: majority tie rule, ``random`` or ``lowest``.
      offline_samples: m, the base-policy samples that fix each prompt's offline majority label (0: no
        arm reads it; the label is -1).
      pass_k, maj_k: the k of the exact pass@k and maj@k metrics.
      maj_draws: sampled groups per prompt for a maj@k whose exact enumeration exceeds ``MAX_COMPOSITIONS``
        (``train.maj_draws``; ``None``: every maj@k is exact), recorded with its standard error ``maj@k_se``.
      metrics: the answer-level metrics to record (``tabsim.sim.envs.ANSWER_METRICS``; ``None``: all).
      rng: hot-path generator (see :mod:`tabsim.sim.rng`).
      prompt_metrics: the metrics also returned per prompt (``train.prompt_metrics``; :func:`prompt_values`),
        with each prompt's ``p_s`` when ``heterogeneous``; ``None``: none (the means only).
    """

    def __init__(self, *, n_prompts=40, n_answers=8, n_correct=2, heterogeneous=False, tie="random",
                 offline_samples=64, pass_k=(), maj_k=(), rng="fast", metrics=None, unequal=False, maj_draws=None,
                 prompt_metrics=None):
        self.n_prompts, self.n_answers, self.n_correct = n_prompts, n_answers, n_correct
        self.unequal = unequal
        self.heterogeneous, self.tie, self.offline_samples = heterogeneous, tie, offline_samples
        self.pass_k, self.maj_k, self.rng = tuple(pass_k), tuple(maj_k), rng
        self.metrics = None if metrics is None else tuple(metrics)
        self.prompt_metrics = None if prompt_metrics is None else tuple(prompt_metrics)
        self.max_len = 1
        self.single_node = True  # every answer is drawn at the prompt: the engine's closed-form path
        # maj@k above the enumeration cap is estimated from maj_draws sampled groups (train.maj_draws)
        exact, self.maj_sampled = split_majority(self.maj_k, n_answers, maj_draws)
        self.maj_draws = maj_draws
        self._maj = {k: tuple(jnp.asarray(a) for a in majority_tables(k, n_answers, tie)) for k in exact}

    @property
    def table_shape(self):
        return (self.n_prompts, self.n_answers)

    # -- task -------------------------------------------------------------------------------
    def init_task(self, seed, params) -> BanditTask:
        """Draw correct positions, the format answer, per-prompt strengths and the offline label.

        ``seed`` is a seed's ``uint32[2]`` words; the task uses the reserved step ``TASK_STEP`` of its stream.
        """
        n, K, k = self.n_prompts, self.n_answers, self.n_correct
        correct, is_format, p = draw_answer_structure(seed, params, n_prompts=n, n_answers=K, n_correct=k,
                                                      heterogeneous=self.heterogeneous, rng=self.rng)
        if self.unequal:  # the j-th correct answer (by rank) gets p_s r^j / sum_i r^i
            rank = answer_ranks(seed, n, K, self.rng).astype(real())
            w = jnp.where(correct > 0, params.correct_mass_ratio ** rank, 0.0)
            right = jnp.log(p[:, None] * w / w.sum(-1, keepdims=True))
            logits = jnp.where(correct > 0, right, jnp.log((1.0 - p) / (K - k))[:, None])
        else:
            logits = jnp.where(correct > 0, jnp.log(p / k)[:, None], jnp.log((1.0 - p) / (K - k))[:, None])
        logits = logits + jnp.where(is_format, jnp.log1p(params.format_boost * K), 0.0)
        prior = jax.nn.log_softmax(logits, axis=-1)
        label = offline_majority(seed, jnp.exp(prior), self.offline_samples, K, self.tie, self.rng)
        return BanditTask(prior_logits=prior, correct=correct, format_answer=jnp.argmax(is_format, axis=1),
                          offline_label=label, prompt_strength=p)

    # -- sampling and log-probabilities ---------------------------------------------------------
    def rollout(self, seed, step, logits_b, group_size: int) -> Rollout:
        """Sample ``G`` answers per prompt by inverse CDF: one uniform per answer."""
        probs = jax.nn.softmax(logits_b, axis=-1)
        answers = R.categorical(seed, probs, group_size, step=step, tag=R.ROLLOUT, rng=self.rng)
        ones = jnp.ones(answers.shape + (1,), jnp.float32)
        return Rollout(answers=answers, tokens=answers[..., None], mask=ones, lengths=ones[..., 0])

    def token_logq(self, logits_b, rollout: Rollout):
        """Log next-token distribution at the visited nodes, ``[B, 1, 1, A]``.

        Every answer of a group is sampled at the same node (the prompt), so the distribution is
        returned once per prompt and broadcasts against ``[B, G, T]``; the gradient of anything
        summed over the group then reaches the logits as one count-weighted row per prompt.
        """
        return jax.nn.log_softmax(logits_b, axis=-1)[:, None, None, :]

    def answer_correct(self, task_b: BanditTask, answers):
        """``[B, G]`` 0/1 correctness of sampled answers."""
        return take_rows(task_b.correct, answers)

    def is_format(self, task_b: BanditTask, answers):
        return (answers == task_b.format_answer[:, None]).astype(jnp.float32)

    def answer_distribution(self, logits):
        """Exact distribution over answers, ``[N, K]``."""
        return jax.nn.softmax(logits, axis=-1)

    # -- exact metrics --------------------------------------------------------------------------
    def evaluate(self, logits, task: BanditTask, params) -> dict:
        """Exact metrics of the policy (no sampling): pass@1, pass@k, maj@k, entropy, mode accuracy."""
        logq = jax.nn.log_softmax(logits, axis=-1)
        q = jnp.exp(logq)
        p_correct = (q * task.correct).sum(-1)
        out = {  # per prompt, [N]
            "pass1": p_correct,
            "entropy": -(q * logq).sum(-1),
            "mode_correct": jnp.take_along_axis(task.correct, jnp.argmax(logq, -1)[:, None], 1)[:, 0],
            "format_mass": jnp.take_along_axis(q, task.format_answer[:, None], 1)[:, 0],
            "kl_ref": (q * (logq - task.prior_logits)).sum(-1),
        }
        out = select_metrics(out, self.metrics)
        for k in self.pass_k:
            out[f"pass@{k}"] = 1.0 - (1.0 - p_correct) ** k
        for k, (counts, lmc, credit) in self._maj.items():
            logp_counts = lmc[None, :] + logq @ counts.T  # [N, M]
            out[f"maj@{k}"] = (jnp.exp(logp_counts) * (task.correct @ credit.T)).sum(-1)
        if self.metrics is not None:  # the optional metrics train.metrics names (none by default)
            out.update(optional_metrics(self.metrics, logq, task.correct, task.prior_logits, logq))
        if self.maj_sampled:  # maj@k above the enumeration cap, estimated (none by default)
            est, var = sampled_majority_metrics(self, q, task.correct)
            means = with_standard_errors(prompt_means({**out, **est}), var)
            out = {**out, **est}
        else:
            means = prompt_means(out)
        if self.prompt_metrics:  # train.prompt_metrics: the per-prompt values too (none by default)
            means.update(prompt_values(out, self.prompt_metrics,
                                       task.prompt_strength if self.heterogeneous else None))
        return means
