"""The environment registry and what every environment shares: the answer-level metrics and their means."""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import entr, rel_entr

# the exact answer-level metrics every environment records (named without JAX, for the config), and those it
# records only when ``train.metrics`` names them
from tabsim.base.choices import ANSWER_METRICS, MAX_COMPOSITIONS, OPTIONAL_METRICS, n_compositions
from tabsim.base.registry import Registry

ENVS = Registry("env")


def register_env(name: str):
    """A class decorator that registers an environment under ``name`` and sets its ``name`` attribute."""
    def deco(cls):
        ENVS.register(name)(cls)
        cls.name = name
        return cls

    return deco


def select_metrics(per_prompt: dict, metrics) -> dict:
    """``per_prompt`` without the answer-level metrics not in ``metrics`` (``None``: keep all).

    What is dropped is never reduced or returned, so XLA removes its computation from the program.
    """
    if metrics is None:
        return per_prompt
    return {k: v for k, v in per_prompt.items() if k not in ANSWER_METRICS or k in metrics}


def wanted(metrics, name: str) -> bool:
    """Whether the optional metric ``name`` (:data:`OPTIONAL_METRICS`) is asked for: only when ``metrics`` names it."""
    return metrics is not None and name in metrics


def optional_metrics(metrics, logq_ans, correct, log_prior_ans, root_logq) -> dict:
    """The optional per-prompt metrics ``metrics`` names, each ``[N]`` (the root's one per action).

    ``correct_entropy``: the entropy of the policy given a correct answer, ``q(a | correct) = q(a) 1[a correct] /
    P(correct)``; ``filtered_kl``: ``KL(q(. | correct) || q_ref(. | correct))``, the distance to the "filtered base
    model" (the reference restricted to the correct answers and renormalised), 0 when the policy is that model;
    ``root_mass``: ``root{a}_mass``, the probability of each action at the root (the tree's depth-1 prefixes and
    STOP; the bandit's answers). A prompt the policy (or reference) never answers correctly gets ``nan``.

    Args:
      logq_ans, log_prior_ans: ``[N, K]`` log answer distributions of the policy and the reference.
      correct: ``[N, K]`` 0/1; root_logq: ``[N, b]`` log distribution at the root.
    """
    out = {}
    if wanted(metrics, "correct_entropy") or wanted(metrics, "filtered_kl"):
        right = correct > 0
        log_pc = jax.nn.logsumexp(jnp.where(right, logq_ans, -jnp.inf), axis=-1, keepdims=True)
        log_qc = jnp.where(right, logq_ans - log_pc, -jnp.inf)
        qc = jnp.exp(log_qc)  # 0 off the correct answers
        if wanted(metrics, "correct_entropy"):
            out["correct_entropy"] = entr(qc).sum(-1)
        if wanted(metrics, "filtered_kl"):
            log_p0c = jnp.where(right, log_prior_ans, -jnp.inf)
            p0c = jnp.exp(log_p0c - jax.nn.logsumexp(log_p0c, axis=-1, keepdims=True))
            out["filtered_kl"] = rel_entr(qc, p0c).sum(-1)
        bad = ~jnp.isfinite(log_pc[:, 0])
        out = {k: jnp.where(bad, jnp.nan, v) for k, v in out.items()}
    if wanted(metrics, "root_mass"):
        root = jnp.exp(root_logq)
        out.update({f"root{a}_mass": root[:, a] for a in range(root.shape[-1])})
    return out


MAJ_KEY = 0x6D616A  # the sampled maj@k's draws: one fixed stream, the same at every evaluation point


def sampled_majority(q, correct, k: int, draws: int, tie: str) -> tuple:
    """A Monte-Carlo maj@k per prompt, for a k whose exact enumeration is refused (``MAX_COMPOSITIONS``):
    ``(estimate [N], squared standard error [N])`` from ``draws`` groups of ``k`` answers drawn from ``q [N, K]``.

    Each group scores the correct share of its plurality answers (``tie = "random"``: the expected credit of a
    random tie-break, as the exact maj@k splits it) or the correctness of the lowest-index one (``"lowest"``). The
    draws come from one fixed stream (``MAJ_KEY`` folded with ``k``): every evaluation point reuses the same
    uniforms (common random numbers along a run), so the estimate is a smooth function of the policy.
    """
    N, K = q.shape
    u = jax.random.uniform(jax.random.fold_in(jax.random.key(MAJ_KEY), k), (N, draws, k), q.dtype)
    cdf = jnp.cumsum(q, axis=-1)[:, None, None, : K - 1]
    answers = (u[..., None] >= cdf).sum(-1)  # [N, draws, k] inverse-CDF draws
    counts = jax.nn.one_hot(answers, K, dtype=q.dtype).sum(-2)  # [N, draws, K]
    if tie == "random":
        top = counts == counts.max(-1, keepdims=True)
        credit = (top * correct[:, None, :]).sum(-1) / top.sum(-1)
    else:
        credit = jnp.take_along_axis(correct, jnp.argmax(counts, -1), axis=1)
    return credit.mean(-1), credit.var(-1, ddof=1) / draws


def sampled_majority_metrics(env, q, correct) -> tuple[dict, dict]:
    """``({f"maj@{k}": [N]}, {f"maj@{k}": squared standard errors [N]})`` of ``env``'s sampled maj@k."""
    est, var = {}, {}
    for k in env.maj_sampled:
        est[f"maj@{k}"], var[f"maj@{k}"] = sampled_majority(q, correct, k, env.maj_draws, env.tie)
    return est, var


def with_standard_errors(means: dict, var: dict) -> dict:
    """``means`` plus ``{name}_se`` for each sampled metric: the standard error of its mean over the N prompts,
    ``sqrt(sum_i se_i^2) / N`` (the prompts' draws are independent)."""
    out = dict(means)
    for name, v in var.items():
        out[f"{name}_se"] = jnp.sqrt(v.sum()) / v.shape[0]
    return out


def split_majority(maj_k, n_answers: int, draws) -> tuple[tuple, tuple]:
    """``(exact, sampled)``: the k of maj@k enumerated exactly, and those above ``MAX_COMPOSITIONS`` estimated from
    ``draws`` sampled groups (``train.maj_draws``; ``None``: none are sampled)."""
    sampled = tuple(k for k in maj_k if draws and n_compositions(k, n_answers) > MAX_COMPOSITIONS)
    return tuple(k for k in maj_k if k not in sampled), sampled


def prompt_means(per_prompt: dict) -> dict:
    """Means over prompts of ``[N]`` per-prompt metrics, taken as one reduction (less to compile)."""
    means = jnp.stack(list(per_prompt.values()), axis=-1).mean(-2)
    return {k: means[..., i] for i, k in enumerate(per_prompt)}


PROMPT_PREFIX = "prompt:"  # history keys of the per-prompt values train.prompt_metrics asks for: [..., N]
PROMPT_STRENGTH = "prompt_strength"  # each prompt's own p_s, recorded beside them on a heterogeneous task


def prompt_values(per_prompt: dict, names, strength=None) -> dict:
    """``{PROMPT_PREFIX + key: [N]}``: the per-prompt values (before their mean over prompts) of the metrics
    ``names`` (``train.prompt_metrics``) selects, and ``strength`` (each prompt's ``p_s``; None: not recorded).

    A name matches its key, or for the families ``pass@k``, ``maj@k`` and ``root_mass`` every key of the family
    (``pass@2``, ``maj@4``, ``root0_mass``, ...). The values are the very arrays whose means the run records."""
    def chosen(key: str) -> bool:
        return (key in names or ("pass@k" in names and key.startswith("pass@"))
                or ("maj@k" in names and key.startswith("maj@") and not key.endswith("_se"))
                or ("root_mass" in names and key.startswith("root") and key.endswith("_mass")))

    out = {PROMPT_PREFIX + k: v for k, v in per_prompt.items() if chosen(k)}
    if strength is not None:
        dtype = next(iter(per_prompt.values())).dtype if per_prompt else None
        out[PROMPT_PREFIX + PROMPT_STRENGTH] = jnp.asarray(strength, dtype)
    return out
