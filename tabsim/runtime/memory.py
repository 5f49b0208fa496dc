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

From the estimate follows how large a chunk may be: :func:`conditions_per_chunk` for ``ts.run``'s grid
(conditions x seeds) and :func:`units_per_chunk` for a factorial job (condition x seed units), each
capped to what fits this machine (:func:`check_memory`), an accelerator (:func:`device_bytes`) or a
worker's memory limit (:func:`cap_chunk`). The planner (:func:`tabsim.runtime.planning.plan`) asks them.
"""
from __future__ import annotations

import math
from typing import Callable

import psutil

from tabsim.sim.arms import OFFLINE_ARMS
from tabsim.config import Config, ConfigError
from tabsim.sim.engine import STACKED_EVAL_BYTES
from tabsim.sim.envs.bandit import MAX_COMPOSITIONS, n_compositions
from tabsim.runtime.executors import LocalExecutor

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
    """Memory this process can still take: ``psutil.virtual_memory().available`` (on Linux the kernel's
    ``MemAvailable``)."""
    return int(psutil.virtual_memory().available)


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


# ------------------------------------------------------------------------------------------------
# How large a chunk may be: what fits the machine, an accelerator or a worker

def check_run(cfg: Config, available: int | None = None) -> None:
    """:func:`check_memory` for ``cfg`` run locally with the chunk size :func:`tabsim.runtime.run.run` picks
    (the command line calls it before opening the output folder)."""

    n_cond, n_seeds = len(cfg.grid()), cfg.train.seeds
    per = min(cfg.train.chunk_conditions or _auto_chunk(cfg, n_cond, n_seeds), n_cond)
    check_memory(cfg, per, n_seeds, available)


def conditions_per_chunk(cfg: Config, n_cond: int, n_seeds: int, executor=None, device=None) -> int:
    """Conditions per chunk of a run of ``n_cond`` conditions x ``n_seeds`` seeds: ``train.chunk_conditions``
    or about 2e8 sampled answers on the CPU, as many as fit an accelerator ``device`` (:func:`_auto_chunk`),
    refused before compiling when a chunk cannot fit, capped to a worker's memory limit (:func:`fit_chunk`)."""
    per = min(cfg.train.chunk_conditions or _auto_chunk(cfg, n_cond, n_seeds, device), n_cond)
    return fit_chunk(executor, cfg, per, n_seeds, device)


def units_per_chunk(cfg: Config, n_units: int, executor=None, requested: int | None = None, device=None) -> int:
    """Condition x seed units per chunk of a factorial program: ``requested``, or about 4e6 sampled answers on
    the CPU and as many as fit an accelerator ``device`` (:func:`_auto_units`), checked and capped like
    :func:`conditions_per_chunk`."""
    return fit_chunk(executor, cfg, requested or _auto_units(cfg, n_units, device), 1, device)


# An accelerator runs a whole grid at once for about the cost of a small part of it (one H200: 7.6e9-1.65e10
# sampled answers/s, against 2e7-4e7 per CPU core), and each chunk costs a dispatch, a sync, a hash and a save
# on the host: there a chunk is as large as its device's memory holds, up to about a second of work.
ACCELERATOR_ANSWERS = 1e10  # sampled answers per chunk at most
ACCELERATOR_DEFAULT_BYTES = 8 << 30  # an accelerator that reports no memory figure


def device_bytes(device) -> int | None:
    """Memory free on the accelerator ``device`` (a ``jax.Device``): ``bytes_limit - bytes_in_use`` of its
    ``memory_stats()``; None for the CPU (chunks there are sized for speed and the host's memory) or no device."""
    if device is None or getattr(device, "platform", "cpu") == "cpu":
        return None
    try:
        stats = device.memory_stats() or {}
    except Exception:  # noqa: BLE001 - a backend without memory statistics
        stats = {}
    limit = stats.get("bytes_limit")
    if not limit:
        return ACCELERATOR_DEFAULT_BYTES
    return max(0, int(limit) - int(stats.get("bytes_in_use", 0)))


def _device_fit(cfg: Config, free: int, n_seeds: int) -> int:
    """Conditions of ``n_seeds`` seeds whose arrays fit :data:`MEMORY_FRACTION` of ``free`` device bytes (>= 1)."""
    return max(1, int(MEMORY_FRACTION * free // max(estimate_bytes(cfg, 1, n_seeds), 1)))


MEMORY_FRACTION = 0.5  # of a worker's memory limit that one chunk may use (JAX, the program and Dask need the rest)


def fit_memory(executor, per: int, nbytes: Callable[[int], float], fraction: float = MEMORY_FRACTION,
               reserve: float = 0) -> int:
    """The largest chunk size ``<= per`` whose ``nbytes(size)`` fits ``fraction`` of the executor's
    worker memory limit less ``reserve`` bytes (``per`` unchanged when the executor reports no limit;
    at least 1: whether one fits is the caller's question)."""
    limit = getattr(executor, "memory_limit", None) if executor is not None else None
    if not limit or per <= 1:
        return per
    budget = fraction * limit - reserve
    if nbytes(per) <= budget:
        return per
    return largest(1, per, lambda n: nbytes(n) <= budget)  # nbytes grows with the size


def fit_chunk(executor, cfg, per: int, n_seeds: int, device=None) -> int:
    """``per`` conditions per chunk, checked against memory before anything compiles: refused when a chunk
    run in this process cannot fit the machine, or the accelerator ``device`` it runs on
    (:func:`tabsim.runtime.planning.check_memory`), capped to a worker's memory limit otherwise (:func:`cap_chunk`)."""

    if executor is None or isinstance(executor, LocalExecutor):
        free = device_bytes(device)
        check_memory(cfg, per, n_seeds, None if free is None else free + RUNTIME_BYTES)
    return cap_chunk(executor, cfg, per, n_seeds)


def cap_chunk(executor, cfg, per: int, n_seeds: int) -> int:
    """``per`` conditions (of ``n_seeds`` seeds) per chunk, reduced so that one chunk fits the executor's
    worker memory limit: the chunk's arrays (:func:`tabsim.runtime.planning.estimate_bytes`: samples, policy
    tables, metric tables) plus the runtime (:data:`tabsim.runtime.planning.RUNTIME_BYTES`) within
    :data:`MEMORY_FRACTION` of the limit (Dask pauses a worker at 80% and restarts it at 95%).

    Raises:
      tabsim.config.ConfigError: not even one condition fits a worker.
    """
    limit = getattr(executor, "memory_limit", None) if executor is not None else None
    if not limit:
        return per

    def nbytes(n: int) -> int:
        return estimate_bytes(cfg, n, n_seeds)

    budget = MEMORY_FRACTION * limit - RUNTIME_BYTES
    if nbytes(1) > budget:
        raise ConfigError(f"memory: one condition x {n_seeds} seed(s) needs about {nbytes(1) / 2**30:.3g} GiB, more "
                          f"than a Dask worker can hold ({MEMORY_FRACTION:g} of its memory limit "
                          f"{limit / 2**30:.3g} GiB, less {RUNTIME_BYTES / 2**20:.0f} MiB for the runtime); use "
                          "workers with more memory (fewer workers per machine), fewer seeds or fewer prompts")
    return fit_memory(executor, per, nbytes, reserve=RUNTIME_BYTES)


MAJ_TABLE_BYTES = 256 * 2**20  # exact maj@k tables of one chunk (its evaluations hold several copies)


def _auto_chunk(cfg: Config, n_cond: int, n_seeds: int, device=None) -> int:
    """About 2e8 sampled answers per chunk on the CPU: large enough to amortise dispatch, small enough for
    progress. On an accelerator ``device``: up to :data:`ACCELERATOR_ANSWERS`, as many as half its free
    memory holds (:func:`device_bytes`).

    Exact maj@k evaluates a ``[prompts, count vectors]`` table per condition x seed x arm x eval point
    (6435 count vectors for maj@8 over 8 answers), so with ``train.maj_k`` a chunk also keeps those
    tables under ``MAJ_TABLE_BYTES``; one chunk of a large grid would otherwise need tens of GB.
    """

    per_cond = n_seeds * len(cfg.arms.arms) * cfg.train.steps * cfg.train.batch_size * cfg.train.group_size
    per_cond *= cfg.algo.epochs
    free = device_bytes(device)
    answers = 2e8 if free is None else ACCELERATOR_ANSWERS
    per = max(1, min(n_cond, int(answers // max(per_cond, 1))))
    tables = sum(n_compositions(k, cfg.task.n_answers) for k in cfg.train.maj_k)
    if tables:
        n_evals = cfg.train.steps // (cfg.train.eval_every or cfg.train.steps) + 1
        table_bytes = 4 * n_seeds * len(cfg.arms.arms) * n_evals * cfg.task.n_prompts * tables
        per = max(1, min(per, int(MAJ_TABLE_BYTES // table_bytes)))
    fit = max_conditions(cfg, n_seeds) if free is None else _device_fit(cfg, free, n_seeds)
    return max(1, min(per, fit))  # and what fits in memory


# A CPU chunk's arrays (estimate_bytes) at most: short runs (a few steps) otherwise take chunks of thousands
# of units by their sampled answers, and each unit costs more as its tables fall out of the caches (the
# reference study at 2 steps, 2-core x86-64: 65 us a unit in chunks of 256-512 units, 88 us in chunks of 4096).
CPU_CHUNK_BYTES = 32 << 20


def _auto_units(cfg: Config, n_units: int, device=None) -> int:
    """About 4e6 sampled answers per chunk on the CPU (where small chunks run fastest), and no more than
    :data:`CPU_CHUNK_BYTES` of arrays; on an accelerator
    ``device`` up to :data:`ACCELERATOR_ANSWERS`, as many units as half its free memory holds. A power of
    two, at most the units needed."""
    per = len(cfg.arms.arms) * cfg.train.steps * cfg.train.batch_size * cfg.train.group_size * cfg.algo.epochs
    free = device_bytes(device)
    if free is None:
        u = max(1, int(4e6 // max(per, 1)))
        u = min(u, max(1, CPU_CHUNK_BYTES // max(estimate_bytes(cfg, 1, 1), 1)))  # tables near the caches
        u = min(u, max(1, max_conditions(cfg, 1)))  # what fits in memory
    else:
        u = min(max(1, int(ACCELERATOR_ANSWERS // max(per, 1))), _device_fit(cfg, free, 1))
    u = 1 << (u.bit_length() - 1)
    return min(u, 1 << max(0, (n_units - 1).bit_length()))
