"""Per-prompt metrics (``train.prompt_metrics``): the values whose means over prompts a run records, kept per
prompt as a second tidy frame, :attr:`tabsim.runtime.run.Result.prompts`, saved as ``prompts.parquet``.

The environments return them beside the means under :data:`tabsim.sim.envs.base.PROMPT_PREFIX` keys, each
``[C, S, A, E + 1, N]`` in the history (conditions, seeds, arms, eval points, prompts); :func:`split_prompts`
takes them out before the means become the run's frame, so ``Result.frame`` is the one a run without the
option records. The means are taken in float32 from the same arrays, so a prompt-frame mean over prompts equals
the frame's value to float32 rounding.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tabsim.config import Config, ConfigError
from tabsim.runtime.memory import RUNTIME_BYTES, available_bytes, estimate_bytes
from tabsim.sim.envs.base import PROMPT_PREFIX, PROMPT_STRENGTH

F32, F64 = 4, 8


def size(n: float) -> str:
    """``n`` bytes in MiB, or GiB from 256 MiB on."""
    return f"{n / 2**30:.3g} GiB" if n >= 2**28 else f"{n / 2**20:.3g} MiB"


def split_prompts(hist: dict) -> dict:
    """The per-prompt entries of ``hist``, removed from it: ``{metric: [C, S, A, E + 1, N]}`` (empty: none)."""
    keys = [k for k in hist if k.startswith(PROMPT_PREFIX)]
    return {k[len(PROMPT_PREFIX):]: hist.pop(k) for k in keys}


def prompt_frame(per_prompt: dict, grid: list[dict], seeds: list[int], arms: list[str],
                 steps: list[int]) -> pd.DataFrame:
    """One row per condition x seed x arm x eval step x prompt: the swept fields, ``seed``, ``arm``, ``step``,
    ``prompt`` (its index in the task), ``prompt_strength`` (each prompt's own p_s, on a heterogeneous task),
    then the metrics in name order, as :func:`tabsim.runtime.run._tidy` lays out the means."""
    per_prompt = dict(per_prompt)
    strength = per_prompt.pop(PROMPT_STRENGTH, None)
    shape = next(iter(per_prompt.values())).shape
    idx = np.indices(shape).reshape(len(shape), -1)
    ci, si, ai, ei, ni = idx
    cols = run_columns(grid, seeds, arms, steps, ci, si, ai, ei)
    cols["prompt"] = ni.astype(np.int64)
    if strength is not None:
        cols[PROMPT_STRENGTH] = np.asarray(strength, dtype=np.float64).reshape(-1)
    for k in sorted(per_prompt):
        cols[k] = np.asarray(per_prompt[k], dtype=np.float64).reshape(-1)
    return pd.DataFrame(cols)


def prompt_columns(cfg: Config) -> int:
    """The number of per-prompt value columns ``cfg`` records (0: none)."""
    tr, t = cfg.train, cfg.task
    if tr.prompt_metrics is None:
        return 0
    root = t.tree.branching if t.env == "tree" else t.n_answers
    width = {"pass@k": len(tr.pass_k), "maj@k": len(tr.maj_k), "root_mass": root}
    return sum(width.get(m, 1) for m in tr.prompt_metrics) + (t.heterogeneity is not None)


def prompt_history_bytes(cfg: Config, n_conditions: int, n_seeds: int) -> int:
    """Bytes the per-prompt history of a run holds at its peak: each value as the chunks' float32 arrays and
    their concatenation, then as the frame's float64 column, and the frame's key columns (0: none asked)."""
    cols = prompt_columns(cfg)
    if not cols:
        return 0
    tr = cfg.train
    rows = n_conditions * n_seeds * len(cfg.arms.arms) * (tr.steps // (tr.eval_every or tr.steps) + 1) \
        * cfg.task.n_prompts
    keys = F64 * (len(cfg.sweep) + 3) + 1  # swept fields, seed, step, prompt; the arm's category code
    return rows * (cols * (2 * F32 + F64) + keys)


def check_prompt_history(cfg: Config, n_conditions: int, n_seeds: int, available: int | None = None) -> None:
    """Refuse, in one line, a ``train.prompt_metrics`` run whose per-prompt history would not fit in memory
    beside the runtime and one condition's chunk (:mod:`tabsim.runtime.memory`)."""
    need = prompt_history_bytes(cfg, n_conditions, n_seeds)
    if not need:
        return
    avail = available_bytes() if available is None else available
    beside = estimate_bytes(cfg, 1, n_seeds) + RUNTIME_BYTES
    if need + beside <= avail:
        return
    rows = need // max(1, prompt_history_bytes(cfg, 1, 1))
    raise ConfigError(f"train.prompt_metrics: {prompt_columns(cfg)} value(s) per prompt over {rows} condition x "
                      f"seed x arm x eval point(s) of {cfg.task.n_prompts} prompts need about {size(need)} beside "
                      f"the run's {size(beside)}, and {size(avail)} is available; name fewer metrics, record fewer "
                      "eval points (train.eval_every), seeds, conditions or prompts, or leave it unset")


def run_columns(grid: list[dict], seeds, arms, steps, ci, si, ai, ei) -> dict:
    """The index columns of a tidy frame, each row's swept values, seed, arm and evaluation step, from its
    positions ``ci, si, ai, ei`` in the (condition, seed, arm, step) grid (shared by the means' frame)."""
    cols: dict = {}
    for name in (grid[0] if grid else {}):
        cols[name] = np.asarray([g[name] for g in grid], dtype=float)[ci]
    cols["seed"] = np.asarray(seeds, dtype=np.int64)[si]
    cols["arm"] = pd.Categorical(np.asarray(arms, dtype=object)[ai], categories=arms)
    cols["step"] = np.asarray(steps, dtype=np.int64)[ei]
    return cols
