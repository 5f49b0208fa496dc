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

import copy
import dataclasses
import hashlib
import itertools
import json
import time
from typing import Callable

import pandas as pd

from tabsim.config import Config, ConfigError, resolve, static_field
from tabsim.envs.tree import TREE_FIELDS
from tabsim.presets import PRESETS
from tabsim.runtime import run as run_mod
from tabsim.runtime import trackers

# static fields a sweep may not vary, and why
NOT_SWEPT = {
    "train.seed": "the seeds are the replication axis of every condition (set train.seed and train.seeds)",
    "train.seeds": "the seeds are the replication axis of every condition (set train.seed and train.seeds)",
    "arms.arms": "the arms are the arm axis of every condition (list them in arms.arms, or --arms)",
    "train.chunk_conditions": "it only cuts the work into chunks; the results are the same at every level",
}


def static_name(name: str) -> str | None:
    """The canonical name of a static sweep field (``preset``, ``task.n_prompts`` for ``n_prompts`` or
    ``task.n_prompts``, ``task.tree.depth``), or None for a traced or unknown field."""
    if name == "preset":
        return "preset"
    parts = name.split(".")
    if len(parts) == 3 and parts[:2] == ["task", "tree"] and parts[2] in TREE_FIELDS:
        return name
    return static_field(name)


@dataclasses.dataclass(frozen=True)
class Group:
    """One combination of static levels: ``values`` (field -> level) and its resolved ``config``, whose
    sweep holds the traced fields only (one compiled program)."""

    values: dict
    config: Config

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.values.items())


@dataclasses.dataclass(frozen=True)
class Plan:
    """A sweep that varies static fields: the config mapping (its ``sweep`` holds every varied field,
    the static ones under their dotted names), the static levels, and the groups in sweep order."""

    data: dict
    static: dict
    groups: tuple

    @property
    def factors(self) -> list[str]:
        return list(self.data["sweep"])

    @property
    def n_conditions(self) -> int:
        return sum(len(g.config.grid()) for g in self.groups)

    def digest(self) -> str:
        """SHA-256 of the mapping and every group's resolved config."""
        blob = json.dumps([self.data, [g.config.digest() for g in self.groups]], sort_keys=True,
                          separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()


def _merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict) and k != "sweep":
            out[k] = _merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _flatten(sweep: dict, prefix: str = "") -> dict:
    """``{"task": {"n_prompts": [..]}}`` (a TOML ``[sweep.task]`` table) as ``{"task.n_prompts": [..]}``."""
    out: dict = {}
    for k, v in sweep.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _set(data: dict, field: str, value) -> None:
    node = data
    *path, last = field.split(".")
    for p in path:
        node[p] = dict(node.get(p) or {})
        node = node[p]
    node[last] = value


def _levels(name: str, levels) -> list:
    if not isinstance(levels, (list, tuple)) or not levels:
        raise ConfigError(f"sweep.{name}: needs a non-empty list of levels, got {levels!r}")
    bad = [x for x in levels if not isinstance(x, (str, int, float, bool))]
    if bad:
        raise ConfigError(f"sweep.{name}: a level must be a name, a number or true/false, got {bad[0]!r}")
    if len(set(map(repr, levels))) != len(levels):
        raise ConfigError(f"sweep.{name}: a level is listed twice in {list(levels)} (each level is one group)")
    return list(levels)


def _check_level(rest: dict, field: str, i: int, level) -> None:
    """One static level on the base config: an error about the field itself is raised naming the level."""
    data = copy.deepcopy(rest)
    _set(data, field, level)
    try:
        resolve(data)
    except ConfigError as err:
        lines = [ln.strip() for ln in str(err).splitlines() if ln.strip().startswith(f"{field}:")]
        if lines:
            msg = lines[0].removeprefix(f"{field}:").strip()
            hint = (f" ({level!r} is a preset: vary it as preset={level})"
                    if isinstance(level, str) and level in PRESETS and field != "preset" else "")
            raise ConfigError(f"sweep.{field}[{i}]: {msg}{hint}") from None


def plan(config: Config | dict | None = None, **overrides) -> Plan | None:
    """Split a config's sweep into groups of one compiled shape; None when it varies no static field.

    Raises:
      ConfigError: a static field that cannot be swept, a malformed or bad level (naming the field and
        the allowed values), or a combination of levels that is not a valid config (naming the group).
    """
    if isinstance(config, Config):
        if not overrides or "sweep" not in overrides:
            return None
        config = config.model_dump(mode="json")
    if config is not None and not isinstance(config, dict):
        return None  # resolve refuses it with its own message
    merged = _merge(dict(config or {}), overrides)
    sweep = merged.get("sweep")
    if not isinstance(sweep, dict):
        return None
    static, order = {}, []
    for name, levels in _flatten(sweep).items():
        canon = static_name(name)
        if canon in NOT_SWEPT:
            raise ConfigError(f"sweep.{name}: not a field a sweep varies: {NOT_SWEPT[canon]}")
        if canon is not None:
            static[canon] = _levels(canon, levels)
        order.append((canon or name, levels))
    if not static:
        return None
    traced = {n: v for n, v in order if n not in static}
    rest = {**merged, "sweep": traced}
    for field, levels in static.items():
        for i, level in enumerate(levels):
            _check_level(rest, field, i, level)
    groups = []
    for combo in itertools.product(*static.values()):
        values = dict(zip(static, combo))
        data = copy.deepcopy(rest)
        for field, level in values.items():
            _set(data, field, level)
        try:
            cfg = resolve(data)
        except ConfigError as err:
            raise ConfigError(f"{err}\n  (in the sweep's group {Group(values, None).label})") from None
        groups.append(Group(values, cfg))
    return Plan(data={**rest, "sweep": {n: list(v) for n, v in order}}, static=static, groups=tuple(groups))


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
        run_name: str | None = None, announce: Callable[[str], None] | None = None, precision: str = "float32",
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
    frames, provs = [], []
    for i, g in enumerate(p.groups):
        where = f"group {i + 1}/{len(p.groups)} ({g.label})"
        if announce is not None:
            announce(f"{where}: {len(g.config.grid())} condition(s), one compiled program")
        res = run_mod.run(g.config, desc=f"{desc} {where}", **kw)
        frames.append(group_frame(p, g, res.frame))
        provs.append({"values": g.values, "config_hash": g.config.digest(), **{
            k: res.provenance[k] for k in ("n_conditions", "n_chunks", "wall_seconds") if k in res.provenance}})
        if track is not None:
            track.log_frame(frames[-1], p.factors)
    frame = pd.concat(frames, ignore_index=True)
    prov = {**res.provenance, "config_hash": p.digest(), "wall_seconds": round(time.perf_counter() - t0, 3),
            "n_conditions": p.n_conditions, "n_chunks": sum(g.get("n_chunks", 0) for g in provs), "groups": provs}
    return run_mod.Result(frame=frame, config=p.data, provenance=prov)
