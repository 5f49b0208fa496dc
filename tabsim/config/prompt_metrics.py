"""``train.prompt_metrics``: which metrics a run may also record per prompt (tabsim.runtime.prompts), checked
where the config is validated."""
from __future__ import annotations

from tabsim.base.choices import ANSWER_METRICS, FLOW_METRICS, OPTIONAL_METRICS, UPDATE_METRICS


PROMPT_FAMILIES = ("pass@k", "maj@k")  # every k of train.pass_k / train.maj_k


def check_prompt_metrics(t, tr) -> None:
    """Refuse a ``train.prompt_metrics`` naming a metric the run does not record, in one line."""
    check_flow_metrics(tr)
    if tr.prompt_metrics is None:
        return
    per_run = FLOW_METRICS + UPDATE_METRICS  # one value per run and step, none per prompt
    recorded = [m for m in ANSWER_METRICS + OPTIONAL_METRICS
                if m not in per_run and (m in tr.metrics if tr.metrics is not None else m in ANSWER_METRICS)]
    recorded += [f for f, ks in zip(PROMPT_FAMILIES, (tr.pass_k, tr.maj_k)) if ks]
    if not tr.prompt_metrics:
        raise ValueError(f"train.prompt_metrics: list at least one of {', '.join(recorded)} (or leave it unset "
                         "to record the means over prompts only)")
    for m in tr.prompt_metrics:
        if m not in recorded:
            raise ValueError(f"train.prompt_metrics: {m!r} is not among the metrics this run records; allowed: "
                             f"{', '.join(recorded)} (train.metrics, train.pass_k and train.maj_k choose them)")


def check_flow_metrics(tr) -> None:
    """Refuse, in one line, a metric of the expected flow alone (``grad_cosine``: the cosine of each step's exact
    expected update with the true gradient) named in ``train.metrics`` of a sampled run, and one of the sampled
    update alone (``log_ratio_range``) named in ``train.metrics`` of an expected flow."""
    for m in FLOW_METRICS:
        if tr.metrics is not None and m in tr.metrics and tr.dynamics != "expected":
            raise ValueError(f"train.metrics: {m!r} is recorded by the exact expected flow only (a measure of each "
                             f"step's expected update against the true gradient of pass@1), not with train.dynamics = "
                             f"{tr.dynamics!r}; set train.dynamics = 'expected' or leave {m!r} out")
    for m in UPDATE_METRICS:
        if tr.metrics is not None and m in tr.metrics and tr.dynamics == "expected":
            raise ValueError(f"train.metrics: {m!r} is recorded by the sampled update only (the spread of each "
                             f"step's token importance ratios), not with train.dynamics = 'expected'; leave it out")
