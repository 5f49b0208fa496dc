"""The reward composer's settings (``algo.reward_*`` and the terms' numbers) checked against the rest of a config.

The composer itself is :mod:`tabsim.sim.rewards`; this module refuses, in one line naming the field, what it
could not compute: an unknown or repeated term, an unknown normalisation, a term the exact expected flow does
not enumerate, a backward correction that would divide by ``1 - fpr - fnr <= 0``, a ramp wider than its
``L_max``, a style the task does not have.
"""
from __future__ import annotations

from tabsim.base.choices import REWARD_NORMALIZE, REWARD_TERMS
from tabsim.config.base import one_of

LABEL_FREE_ARMS = ("self_certainty", "entropy", "frequency")  # read the sampled group or the policy, no label


def check_rewards(cfg) -> None:
    """Raise ``ValueError`` (one line naming the field) when ``cfg``'s reward settings cannot run."""
    a, arms, tr = cfg.algo, cfg.arms, cfg.train
    for t in a.reward_terms:
        one_of("algo.reward_terms", t, REWARD_TERMS)
    if len(set(a.reward_terms)) != len(a.reward_terms):
        raise ValueError(f"algo.reward_terms: a term is listed twice in {a.reward_terms}; list each at most once")
    one_of("algo.reward_normalize", a.reward_normalize, REWARD_NORMALIZE)
    label_free = [x for x in arms.arms if x in LABEL_FREE_ARMS]
    if tr.dynamics == "expected" and (a.reward_terms or label_free):
        what = f"algo.reward_terms = {a.reward_terms}" if a.reward_terms else f"arms.arms holds {label_free}"
        raise ValueError(f"train.dynamics = 'expected': {what} reads the sampled group or the policy, which the "
                         "exact expected flow does not enumerate; use train.dynamics = 'sampled'")
    if "backward" in a.reward_terms:
        fpr, fnr = max(cfg.sweep.get("fpr", [arms.fpr])), max(cfg.sweep.get("fnr", [arms.fnr]))
        if fpr + fnr >= 1.0:
            raise ValueError(f"algo.reward_terms: 'backward' divides by 1 - fpr - fnr, which needs fpr + fnr < 1; "
                             f"got fpr = {fpr:g}, fnr = {fnr:g} (arms.fpr, arms.fnr, largest swept levels)")
    if "overlong" in a.reward_terms and a.overlong_cache > a.overlong_max:
        raise ValueError(f"algo.overlong_cache: the ramp L_cache must be <= L_max = algo.overlong_max = "
                         f"{a.overlong_max:g}, got {a.overlong_cache:g}")
    if "style" in a.reward_terms:
        tree = cfg.task.env == "tree"
        n_styles = len(cfg.task.tree.styles or [None]) if tree else 1
        if a.reward_style >= n_styles:
            where = "the styles of task.tree.styles" if tree else "the bandit has one style, its format answer"
            raise ValueError(f"algo.reward_style: must be in [0, {n_styles}) ({where}), got {a.reward_style}")
