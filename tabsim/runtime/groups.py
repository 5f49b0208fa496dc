"""A sweep over any field: groups of one compiled shape, run one after another, one tidy frame out.

A sweep's numeric fields (:data:`tabsim.config.SWEEPABLE`) are traced values of one compiled program,
vmapped together. A static field (``task.n_prompts``, ``algo.estimator``, ``train.steps``, ``preset``,
``task.tree.depth``, ...) fixes array shapes or the code path, so each of its levels needs a program of
its own. :func:`plan` splits such a sweep into groups, one per combination of static levels, each with
the traced part of the sweep; :func:`run` runs every group as :func:`tabsim.runtime.run.run` runs a
config (vmapped, chunked, resumable) and returns one frame with a column per varied field.

Every group runs the same seeds. Where two groups' programs draw arrays of the same shapes (another
estimator, surrogate, ratio, KL or aggregation; a preset that changes only those), a seed gives them the
same task and the same draws, so the groups are paired as the arms are. Where a shape differs
(``task.n_prompts``, ``task.n_answers``, ``train.group_size``, ``train.batch_size``, ``train.steps``, ...)
the same seed addresses other draws, and the groups are independent samples.

    import tabsim as ts
    res = ts.run({"preset": "paper", "sweep": {"algo.estimator": ["grpo", "rloo"], "prior_strength": [0.35, 0.8]}})
    res.frame  # columns algo.estimator, prior_strength, seed, arm, step, pass1, ...
"""
from __future__ import annotations

import time
from typing import Callable

import pandas as pd

from tabsim.base import defaults
from tabsim.config import Config
from tabsim.runtime import run as run_mod
from tabsim.runtime import trackers
# the split into groups lives without JAX (a bad sweep is refused before the engine loads)
from tabsim.runtime.grouping import NOT_SWEPT, Group, Plan, plan, static_name  # noqa: F401

def _column(levels: list, n: int, value) -> pd.Series | list:
    if all(isinstance(x, str) for x in levels):
        return pd.Categorical([value] * n, categories=levels)
    if all(isinstance(x, bool) for x in levels):
        return [bool(value)] * n
    if all(isinstance(x, int) and not isinstance(x, bool) for x in levels):
        return pd.array([value] * n, dtype="int64")
    return pd.array([float(value)] * n, dtype="float64")


def group_frame(p: Plan, group: Group, frame: pd.DataFrame) -> pd.DataFrame:
    """A group's frame with a column per static field in front (strings as ordered categories)."""
    static = pd.DataFrame({f: _column(p.static[f], len(frame), v) for f, v in group.values.items()},
                          index=frame.index)
    out = pd.concat([static, frame], axis=1)
    return out[[c for c in p.factors if c in out] + [c for c in out if c not in p.factors]]


def run(config: Config | dict | None = None, *, progress: bool | None = None, executor=None, store=None,
        desc: str = "tabsim run", device: str | None = None, tracker=None, tracker_dir=None,
        run_name: str | None = None, announce: Callable[[str], None] | None = None, precision: str | None = None,
        **overrides) -> run_mod.Result:
    """Train every arm x seed x condition of ``config``, whatever fields its sweep varies.

    A sweep of traced fields only is :func:`tabsim.runtime.run.run` itself; one that varies static fields
    runs each group (:func:`plan`) in turn, with the same seeds, and concatenates their frames in group
    order. The other arguments are :func:`tabsim.runtime.run.run`'s, plus:

    Args:
      tracker: ``"mlflow"``, ``"tensorboard"``, a list of them, or a tracker object
        (:mod:`tabsim.runtime.trackers`): each group's per-step metrics, the config and the partition are
        streamed to it after the group has run (nothing when None).
      tracker_dir: where named trackers write (``mlruns``/``runs`` inside it; default their own defaults).
      run_name: the tracker's name for the run.
      announce: called with one line as each group starts (the command line's phase lines).
    """
    device = defaults.device_choice(device)  # resolved once: every group's run takes the same value
    p = config if isinstance(config, Plan) else plan(config, **overrides)
    with trackers.session(tracker, tracker_dir, run_name=run_name, terms=run_mod.TERM_ARMS) as track:
        if p is None:
            res = run_mod.run(config, progress=progress, executor=executor, store=store, desc=desc, device=device,
                              precision=precision, **overrides)
            if track is not None:
                track.log_config(res.config)
                track.log_frame(res.frame, res.factors)
            return res
        if track is not None:
            track.log_config(p.data)
        return _run_groups(p, track, announce, progress=progress, executor=executor, store=store, desc=desc,
                           device=device, precision=precision)


def _run_groups(p: Plan, track, announce, *, desc: str, **kw) -> run_mod.Result:
    """Run the groups of ``p`` one after another, feeding ``track`` after each; one :class:`Result`."""
    t0 = time.perf_counter()
    frames, provs, prompts = [], [], []
    for i, g in enumerate(p.groups):
        where = f"group {i + 1}/{len(p.groups)} ({g.label})"
        if announce is not None:
            announce(f"{where}: {len(g.config.grid())} condition(s), one compiled program")
        res = run_mod.run(g.config, desc=f"{desc} {where}", **kw)
        frames.append(group_frame(p, g, res.frame))
        if res.prompts is not None:  # train.prompt_metrics: the per-prompt frame, with the same static columns
            prompts.append(group_frame(p, g, res.prompts))
        provs.append({"values": g.values, "config_hash": g.config.digest(), **{
            k: res.provenance[k] for k in ("n_conditions", "n_chunks", "wall_seconds", "plan") if k in res.provenance}})
        if track is not None:
            track.log_frame(frames[-1], p.factors)
    frame = pd.concat(frames, ignore_index=True)
    prov = {**res.provenance, "config_hash": p.digest(), "wall_seconds": round(time.perf_counter() - t0, 3),
            "n_conditions": p.n_conditions, "n_chunks": sum(g.get("n_chunks", 0) for g in provs), "groups": provs}
    return run_mod.Result(frame=frame, config=p.data, provenance=prov,
                          prompts=pd.concat(prompts, ignore_index=True) if prompts else None)
