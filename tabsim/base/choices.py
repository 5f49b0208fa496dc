"""The names a config chooses among, and the static checks of a tree's settings, in plain Python.

:mod:`tabsim.config` validates a config from these alone, so a bad value is refused before JAX loads.
The engine's registries (:mod:`tabsim.sim.algos`, :mod:`tabsim.sim.envs`, :mod:`tabsim.sim.arms`,
:mod:`tabsim.sim.rng`) take their fixed names from here; the built-in components of each registry are
listed here too, and a test checks that they are the registry's.
"""
from __future__ import annotations

import math
from numbers import Integral, Real

from tabsim.base.registry import suggest

# built-in components of tabsim.sim.algos' registries (a component registered at run time is found in the
# registry itself, see tabsim.config)
ESTIMATORS = ("grpo", "dr_grpo", "rloo", "reinforce_pp", "reinforce_pp_baseline", "batch_std", "mapo", "opo", "gpg",
              "passk", "sign", "ngrpo", "raft", "asymre", "pvpo", "grpo_lead", "disco_b", "edge", "s_grpo",
              "bnpo", "gigpo", "gigpo_std", "tempo")
RATIOS = ("token", "sequence", "sequence-sum", "cumulative", "holder")
SURROGATES = ("clip", "dual_clip", "cispo", "sapo", "importance", "reinforce", "spo", "gmpo", "gvpo", "kl_cov", "disco",
              "real", "dcpo", "ctpo", "clip_cov",
              "rec_oneside_nois", "rec_twoside_nois", "rec_twoside_is", "opmd", "drpo")
AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm", "group-sum",
                "balanced")
KL_ESTIMATORS = ("k1", "k2", "k3", "low_var_kl", "exact", "ref_ce")
KL_PLACEMENTS = ("loss", "reward", "none")
OPTIMIZERS = ("sgd", "adam")
# built-in group stages of tabsim.sim.groups (train.group_stage; "none" leaves the groups as sampled)
GROUP_STAGES = ("gfpo_length", "gfpo_efficiency", "cppo", "drop_all_wrong", "drop_all_right")
GROUP_SELECTING = ("gfpo_length", "gfpo_efficiency", "cppo")  # those that keep k answers a group (train.group_keep)
TRACKERS = ("spo_stream", "value", "dcpo_sas")  # per-prompt trackers of tabsim.sim.tracker (algo.tracker; "none": no tracker)
PROMPT_SKIPS = ("greso",)  # skipping prompts before the rollout, tabsim.sim.prompt_skip (algo.prompt_skip)
ALLOCATIONS = ("knapsack", "uniform")  # answers per prompt at a fixed budget, tabsim.sim.allocation (algo.allocation)
# behaviour policies and importance-sampling corrections of tabsim.sim.behaviour (algo.behaviour, algo.is_correction)
BEHAVIOURS = ("policy", "hint", "mismatch", "stale")
IS_CORRECTIONS = ("none", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
BEHAVIOUR_OLD = ("policy", "behaviour")  # where logp_old comes from under a behaviour policy
HINT_WHEN = ("always", "all_wrong")  # which groups a hint redraws
KL_SCHEDULES = ("fixed", "adaptive")  # tabsim.sim.kl_schedule (algo.kl_schedule)

ARMS = ("frozen", "random", "majority", "majority_offline", "incorrect", "format", "true", "noisy",
        "self_certainty", "entropy", "frequency")
# the reward composer's terms (tabsim.sim.rewards) and its normalisations (algo.reward_terms, algo.reward_normalize)
REWARD_TERMS = ("overlong", "unlikeliness", "backward", "style")
REWARD_NORMALIZE = ("none", "group")
RNGS = ("fast", "threefry")
# the token-weight stage (tabsim.sim.algos.token_weights): none, or a weight on each token's surrogate loss
TOKEN_WEIGHTS = ("none", "top_entropy", "gtpo_conflict", "lambda_grpo")
# the exact answer-level metrics every environment records; ``train.metrics`` picks a subset (pass@k and
# maj@k are chosen by ``train.pass_k`` / ``train.maj_k``; an environment's own metrics are always kept)
ANSWER_METRICS = ("pass1", "entropy", "mode_correct", "format_mass", "kl_ref")
# answer-level metrics recorded only when train.metrics names them (tabsim.sim.envs.base.optional_metrics): the
# entropy given a correct answer, the KL to the reference restricted to the correct answers, the root's action masses;
# grad_cosine: the expected flow's (train.dynamics = 'expected') step cosine with the true gradient of pass@1
OPTIONAL_METRICS = ("correct_entropy", "filtered_kl", "root_mass", "grad_cosine", "log_ratio_range")
FLOW_METRICS = ("grad_cosine",)  # of those, the ones only the expected flow records (tabsim.sim.expected.direction)
# difficulty_tilt: the expected flow's weighting of the prompts by their success rate (tabsim.sim.expected.difficulty)
OPTIONAL_METRICS += ("difficulty_tilt",)
FLOW_METRICS += ("difficulty_tilt",)
# of those, the ones only a sampled update records, per step (tabsim.sim.ratio_spread: the range of the token
# log importance ratios over the step's updates)
UPDATE_METRICS = ("log_ratio_range",)
# effective_ratio: the share of a step's answers in groups whose rewards are not all equal (tabsim.sim.allocation)
OPTIONAL_METRICS += ("effective_ratio",)
UPDATE_METRICS += ("effective_ratio",)
# the traced fields of tabsim.sim.params.Hyper, in its order (a test checks they are its fields)
HYPER_FIELDS = ("prior_strength", "format_boost", "heterogeneity", "gamma", "fpr", "fnr", "lr", "beta", "std_eps",
                "std_ddof", "eps_low", "eps_high", "dual_clip_c", "sapo_tau_pos", "sapo_tau_neg", "ent_coef",
                "max_grad_norm", "filter", "adam_b1", "adam_b2", "adam_eps",
                "gvpo_beta", "kl_cov_ratio", "kl_cov_coef",
                "baseline_shift",
                "hint_lambda", "mismatch_sigma", "is_cap", "kl_target", "kl_horizon", "ref_mixup_alpha",
                "disco_tau", "disco_delta", "disco_beta",
                "overlong_max", "overlong_cache", "overlong_factor", "rank_penalty", "style_weight",
                "top_entropy_quantile", "gtpo_conflict_weight",
                "sgrpo_noise", "correct_mass_ratio",
                "real_tau",
                "tracker_rho",
                "ctpo_clip_low", "ctpo_clip_high", "ctpo_clip_c", "ctpo_power",
                "holder_p",
                "skip_p_easy", "skip_p_hard", "skip_target",
                "clip_cov_ratio", "clip_cov_lb", "clip_cov_ub",
                "vas_ratio", "vas_momentum", "value_lr",
                "drpo_lambda",
                "opmd_coef")


# -- exact maj@k: the count vectors of k draws over K answers ------------------------------------------
MAX_COMPOSITIONS = 200_000


def n_compositions(k: int, K: int) -> int:
    """The number of count vectors of ``k`` draws over ``K`` answers, C(k + K - 1, K - 1)."""
    return math.comb(k + K - 1, K - 1)


# -- task.tree ---------------------------------------------------------------------------------------
MAX_PAIRS = 4_000_000  # (node, action) pairs: the table of one prompt
TREE_FIELDS = ("depth", "branching", "styles", "length_slope_correct", "length_slope_wrong")
STYLE_FIELDS = ("mass", "accuracy", "actions")


def _fail(field: str, msg: str):
    raise ValueError(f"task.tree.{field}: {msg}")


def int_field(tree: dict, field: str, default: int, lo: int, hi: int) -> int:
    """``tree[field]`` (or ``default``) as an integer in ``[lo, hi]``; raises ``ValueError`` naming it."""
    v = tree.get(field, default)
    if isinstance(v, bool) or not isinstance(v, Integral) or not lo <= int(v) <= hi:
        _fail(field, f"must be an integer in [{lo}, {hi}], got {v!r}")
    return int(v)


def float_field(tree: dict, field: str, default: float) -> float:
    """``tree[field]`` (or ``default``) as a finite float; raises ``ValueError`` naming it."""
    v = tree.get(field, default)
    if isinstance(v, bool) or not isinstance(v, Real) or not math.isfinite(v):
        _fail(field, f"must be a finite number, got {v!r}")
    return float(v)


def tree_styles(raw, b: int) -> tuple[tuple[float, float | None, tuple[int, ...]], ...]:
    """Validate ``task.tree.styles`` -> ``((mass, accuracy or None, root actions), ...)``."""
    if raw is None:
        return ((1.0, None, tuple(range(b))),)
    if not isinstance(raw, (list, tuple)) or not 1 <= len(raw) <= b:
        _fail("styles", f"must be a list of 1 to branching={b} tables, got {raw!r}")
    n = len(raw)
    out, seen = [], {}
    for i, st in enumerate(raw):
        where = f"styles[{i}]"
        if not isinstance(st, dict):
            _fail(where, f"must be a table with keys {', '.join(STYLE_FIELDS)}, got {st!r}")
        for key in st:
            if key not in STYLE_FIELDS:
                _fail(f"{where}.{key}", f"unknown field; allowed: {', '.join(STYLE_FIELDS)}")
        mass = st.get("mass", 1.0)
        if isinstance(mass, bool) or not isinstance(mass, (int, float)) or not (0 < mass < math.inf):
            _fail(f"{where}.mass", f"must be a positive finite number, got {mass!r}")
        acc = st.get("accuracy")
        if acc is not None and (isinstance(acc, bool) or not isinstance(acc, (int, float)) or not 0 < acc < 1):
            _fail(f"{where}.accuracy", f"must be in (0, 1) (omit it to use the traced prior_strength), got {acc!r}")
        actions = st.get("actions", [a for a in range(b) if a % n == i])
        if (not isinstance(actions, (list, tuple)) or not actions
                or any(isinstance(a, bool) or not isinstance(a, int) or not 0 <= a < b for a in actions)):
            _fail(f"{where}.actions", f"must be a non-empty list of root actions in [0, {b}), got {actions!r}")
        for a in actions:
            if a in seen:
                _fail(f"{where}.actions", f"root action {a} already belongs to styles[{seen[a]}]")
            seen[a] = i
        out.append((float(mass), None if acc is None else float(acc), tuple(int(a) for a in actions)))
    missing = sorted(set(range(b)) - set(seen))
    if missing:
        _fail("styles", f"root actions {missing} belong to no style; every action in [0, {b}) needs one")
    return tuple(out)


def check_tree(tree: dict, n_answers: int | None, *, big: float) -> None:
    """Validate ``task.tree`` of a tree-MDP config without building the tree (raises ``ValueError``); the
    length slopes must be in ``[-big, big]``."""
    for key in tree:
        if key not in TREE_FIELDS:
            raise ValueError(f"task.tree.{key}: unknown field{suggest(key, TREE_FIELDS)}; allowed: "
                             f"{', '.join(TREE_FIELDS)}")
    depth = int_field(tree, "depth", 4, 1, 32)
    b = int_field(tree, "branching", 3, 2, 1024)
    tree_styles(tree.get("styles"), b)
    for key in ("length_slope_correct", "length_slope_wrong"):
        v = float_field(tree, key, 0.0)
        if abs(v) > big:
            raise ValueError(f"task.tree.{key}: must be in [-{big:g}, {big:g}], got {v!r}")
    n_nodes = sum((b - 1) ** d for d in range(depth))
    if n_nodes * b > MAX_PAIRS:
        raise ValueError(f"task.tree.depth: depth={depth} with branching={b} gives {n_nodes} nodes x {b} actions "
                         f"= {n_nodes * b} table entries per prompt (max {MAX_PAIRS}); use a smaller depth or branching")
    n_leaves = n_nodes + (b - 1) ** depth  # STOP at every node, every content action at the last level
    if n_answers is not None and n_leaves < n_answers:
        raise ValueError(f"task.tree.depth: depth={depth} with branching={b} has {n_leaves} leaves, fewer than "
                         f"task.n_answers={n_answers}; some answers would be unreachable")

# bootstrap resamples a comparison may draw (tabsim compare --resamples; the default is 2,000)
RESAMPLES_BOUNDS = (100, 100_000)
CURRICULA = ("vas",)  # prompt sampling by weights refreshed from rollouts, tabsim.sim.vas (algo.curriculum)

# what the config refuses before the engine builds a program (tabsim.config.group_edge): the group stages that rank
# answers by their advantage (phase "advantage", tabsim.sim.groups), the estimators that give every token its own
# advantage (registered per_token=True) and those that give per-token returns with the KL in the reward (TOKEN_RETURNS)
GROUP_RANKING = ("cppo",)
PER_TOKEN_ESTIMATORS = ("gigpo", "gigpo_std", "tempo")
TOKEN_RETURN_ESTIMATORS = ("reinforce_pp",)
