"""The one-cell plan the pre-registration tests lock, sign, run and tamper with: it runs in a second or two."""
from __future__ import annotations

import copy

_PLAN = {
    "schema": "tabsim.prereg/1",
    "title": "",
    "authors": ["tabsim tests"],
    "rationale": "A one-cell design that runs in a second or two.",
    "design": {
        "preset": "paper",
        "config": {"task": {"n_prompts": 4, "n_answers": 4, "n_correct": 1},
                   "train": {"batch_size": 4, "group_size": 4}},
        "arms": ["frozen", "true"],
        "seeds": 3,
        "first_seed": 100,
        "steps": 5,
        "factors": [{"name": "prior_strength", "field": "prior_strength", "levels": [0.8]}],
    },
    "analysis": {"ci_method": "t"},
    "stopping_rule": {"kind": "fixed", "description": "every seed runs once"},
    "hypotheses": [{"id": "H1", "statement": "TRUE beats FROZEN", "estimand": "d_total",
                    "condition": {"prior_strength": 0.8}, "prediction": "greater", "rule": {"ci_lower_gt": 0}}],
}


def tiny_plan(title: str, *, seeds: int = 3, steps: int = 5) -> dict:
    """A fresh copy of the plan, titled ``title``, with ``seeds`` seeds of ``steps`` steps."""
    plan = copy.deepcopy(_PLAN)
    plan["title"] = title
    plan["design"].update(seeds=seeds, steps=steps)
    return plan
