"""One-line counts of a plan, worded for people: ``1 confirmatory hypothesis, no exploratory
hypotheses, 1 exploratory analysis``."""
from __future__ import annotations

from tabsim.prereg.schema import Plan

PLURALS = {"hypothesis": "hypotheses", "analysis": "analyses"}


def count(n: int, noun: str) -> str:
    """``1 hypothesis``, ``2 hypotheses``, ``no hypotheses``."""
    if n == 1:
        return f"1 {noun}"
    head, _, last = noun.rpartition(" ")
    plural = (head + " " if head else "") + PLURALS.get(last, last + "s")
    return f"{'no' if n == 0 else n} {plural}"


def plan_summary(plan: Plan) -> str:
    """The plan's confirmatory and exploratory hypotheses and its exploratory analyses, counted."""
    n_conf = len(plan.confirmatory)
    return ", ".join([count(n_conf, "confirmatory hypothesis"),
                      count(len(plan.hypotheses) - n_conf, "exploratory hypothesis"),
                      count(len(plan.exploratory), "exploratory analysis")])
