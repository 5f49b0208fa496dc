"""How much memory a chunk needs, estimated before anything is compiled, and what fits this machine.

A compiled chunk vmaps ``conditions x seeds x arms`` runs, and each run holds its own copies of the
big arrays (see :mod:`tabsim.sim.engine` and :mod:`tabsim.sim.envs`):

* the policy table ``[prompts, answers]`` (tree: ``[prompts, nodes, branching]``) in float32, with
  the reference table, the correctness table, the gradient, the new table and the evaluation's
  softmax / log-softmax; Adam adds its two moments and their updates;
* the evaluation points kept for one batched evaluation when they fit (``STACKED_EVAL_BYTES``);
* exact maj@k: ``[prompts, count vectors]`` tables, a few per evaluation;
* the offline majority label: ``[prompts, m]`` base samples and their one-hot counts
  ``[prompts, m, answers]``;
* the tree: per-pair prior weights and the dynamic program's leaf probabilities, a few more copies
  of the table; the rollout's ``[batch, group, depth, branching]`` log-probabilities;
* the sampled answers of one update: ``[batch, group]`` (tree: ``x depth``) per run.

The coefficients (live copies of each array at the peak) were fitted to the peak resident memory of
``tabsim.run`` measured with ``resource.getrusage`` in a fresh process, less the peak of the same
program at 8 prompts (imports, compilation, the runtime: about 330 MB, :data:`RUNTIME_BYTES` keeps
400 MB for it), on a 2-core x86-64 CPU with JAX's CPU backend. ``paper`` preset, 8 seeds x 4 arms,
4 steps evaluated every 2:

=========================================================  ==========  ==========
config                                                     measured     estimate
=========================================================  ==========  ==========
200k prompts, SGD                                             1899 MiB     1856 MiB
100k prompts, Adam                                            1140 MiB     1123 MiB
50k prompts, majority_offline arm (m = 64)                    3655 MiB     3735 MiB
200k prompts, Adam, majority_offline arm                     14449 MiB    14746 MiB
20k prompts, maj@4 (330 count vectors)                        5022 MiB     5078 MiB
tree depth 4 x branching 3, 20k prompts                        923 MiB     1045 MiB
=========================================================  ==========  ==========

The estimate is within -2% to +13% of the measurement: a guard against runs
that cannot fit, not a precise prediction.
"""
from __future__ import annotations

import math
import os
from typing import Callable

from tabsim.sim.arms import OFFLINE_ARMS
from tabsim.config import Config, ConfigError
from tabsim.sim.engine import STACKED_EVAL_BYTES
from tabsim.sim.envs.bandit import MAX_COMPOSITIONS, n_compositions

F32 = 4
RUNTIME_BYTES = 400 * 2**20  # imports, compiled programs and the runtime, beside the arrays of a chunk
# live copies of each array at the peak (fitted; see the module docstring)
TABLE_COPIES = {"sgd": 9.5, "adam": 11.5}
MAJ_COPIES = 2.0  # per evaluation point kept together
OFFLINE_COPIES = 8.0  # of the [prompts, m] base samples


def table_entries(cfg: Config) -> tuple[int, int, int]:
    """``(entries of one run's policy table, nodes, branching)``."""
    t = cfg.task
    if t.env == "tree":

        depth, b = t.tree.depth, t.tree.branching
        nodes = sum((b - 1) ** d for d in range(depth))
        return t.n_prompts * nodes * b, nodes, b
    return t.n_prompts * t.n_answers, 1, t.n_answers


def estimate_bytes(cfg: Config, n_conditions_per_chunk: int, n_seeds: int) -> int:
    """Bytes a chunk of ``n_conditions_per_chunk`` conditions x ``n_seeds`` seeds needs at its peak
    (the arrays of the compiled program; add :data:`RUNTIME_BYTES` for the process)."""

    t, tr = cfg.task, cfg.train
    runs = n_conditions_per_chunk * n_seeds * len(cfg.arms.arms)
    table, nodes, b = table_entries(cfg)
    n_evals = tr.steps // (tr.eval_every or tr.steps) + 1
    per_run = TABLE_COPIES.get(cfg.algo.optimizer, TABLE_COPIES["adam"]) * table
    stacked = n_evals * table * runs * F32 <= STACKED_EVAL_BYTES
    if stacked:
        per_run += n_evals * table
    if t.env == "tree" and nodes > 1:  # the rollout's per-token log-probabilities and their gradient
        per_run += tr.batch_size * tr.group_size * (b + 4) * tree_depth(cfg) * 2
    # exact maj@k: its count vectors; one above the cap sampled (train.maj_draws): its draws' one-hot answers
    tables = sum(tr.maj_draws * k * t.n_answers if tr.maj_draws and n_compositions(k, t.n_answers) > MAX_COMPOSITIONS
                 else n_compositions(k, t.n_answers) for k in tr.maj_k)
    per_run += MAJ_COPIES * t.n_prompts * tables * (n_evals if stacked else 1)
    if any(a in OFFLINE_ARMS for a in cfg.arms.arms):
        m = cfg.arms.offline_samples
        per_run += OFFLINE_COPIES * t.n_prompts * m
    per_run += tr.batch_size * tr.group_size * 4 * (cfg.algo.epochs + 1)
    return int(math.ceil(per_run * runs * F32))


def tree_depth(cfg: Config) -> int:
    """The tree's depth (``task.tree.depth``, default 4)."""
    return cfg.task.tree.depth


def available_bytes() -> int:
    """Memory this process can still take: ``MemAvailable`` of ``/proc/meminfo`` (else physical memory)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError, AttributeError):
        return 1 << 62  # unknown: do not refuse


def _gib(n: float) -> str:
    return f"{n / 2**30:.3g} GiB" if n >= 2**28 else f"{n / 2**20:.3g} MiB"


def fits(cfg: Config, per: int, n_seeds: int, available: int | None = None) -> bool:
    avail = available_bytes() if available is None else available
    return estimate_bytes(cfg, per, n_seeds) + RUNTIME_BYTES <= avail


def max_conditions(cfg: Config, n_seeds: int, available: int | None = None) -> int:
    """The most conditions per chunk that fit (0 if not even one does)."""
    avail = available_bytes() if available is None else available
    one = estimate_bytes(cfg, 1, n_seeds)
    return max(0, int((avail - RUNTIME_BYTES) // max(one, 1)))


def check_memory(cfg: Config, per: int, n_seeds: int, available: int | None = None) -> None:
    """Refuse a chunk of ``per`` conditions x ``n_seeds`` seeds that would not fit in memory.

    Raises:
      ConfigError: naming the estimate, the memory available and the knobs that shrink the run
        (``train.chunk_conditions``, ``train.seeds``, ``task.n_prompts``, the tree's size).
    """
    avail = available_bytes() if available is None else available
    need = estimate_bytes(cfg, per, n_seeds) + RUNTIME_BYTES
    if need <= avail:
        return
    one = estimate_bytes(cfg, 1, n_seeds) + RUNTIME_BYTES
    t = cfg.task
    big = "task.n_prompts" + (" or the tree's size (task.tree.depth, task.tree.branching)" if t.env == "tree" else "")
    if one <= avail:
        fit = max_conditions(cfg, n_seeds, avail)
        raise ConfigError(f"memory: a chunk of {per} conditions x {n_seeds} seeds needs about {_gib(need)}, "
                          f"{_gib(avail)} is available; set train.chunk_conditions = {fit} (or fewer) to run "
                          f"the grid in smaller chunks")
    seeds_fit = max(0, int((avail - RUNTIME_BYTES) // max(estimate_bytes(cfg, 1, 1), 1)))
    if seeds_fit < 1:  # not even one seed: say what would fit
        single = estimate_bytes(cfg, 1, 1) + RUNTIME_BYTES
        n1, n_all = _prompts_that_fit(cfg, 1, avail), _prompts_that_fit(cfg, n_seeds, avail)
        head = (f"memory: one condition x {n_seeds} seeds x {len(cfg.arms.arms)} arms needs about {_gib(one)} "
                f"({t.n_prompts} prompts), {_gib(avail)} is available, and even one seed needs {_gib(single)}")
        if not n1:
            raise ConfigError(f"{head}; not even one prompt of one seed fits (the runtime alone takes "
                              f"{_gib(RUNTIME_BYTES)}): free memory or use a machine with more")
        also = f", <= {n_all} with {n_seeds} seeds" if n_all else ""
        raise ConfigError(f"{head}; use fewer prompts (task.n_prompts <= {n1} fit with one seed{also}), fewer "
                          "arms or fewer eval points" + (f", or a smaller tree ({big})" if t.env == "tree" else ""))
    raise ConfigError(f"memory: one condition x {n_seeds} seeds x {len(cfg.arms.arms)} arms needs about "
                      f"{_gib(one)} ({t.n_prompts} prompts), {_gib(avail)} is available; use fewer seeds "
                      f"(train.seeds <= {seeds_fit} fit), fewer prompts ({big}), fewer arms or fewer eval points; "
                      f"train.chunk_conditions cannot help below one condition")


def largest(lo: int, hi: int, fits: Callable[[int], bool]) -> int:
    """The largest ``n`` in ``[lo, hi]`` with ``fits(n)`` (``fits`` holds up to some size, then fails);
    ``lo`` when none above it fits."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _prompts_that_fit(cfg: Config, n_seeds: int, avail: int) -> int:
    """The most prompts with which one condition x ``n_seeds`` seeds fits ``avail`` bytes (0: not even one)."""
    def need(n: int) -> int:
        return estimate_bytes(cfg.model_copy(update={"task": cfg.task.model_copy(update={"n_prompts": n})}), 1,
                              n_seeds) + RUNTIME_BYTES

    return largest(0, cfg.task.n_prompts, lambda n: need(n) <= avail)
