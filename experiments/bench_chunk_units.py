"""CPU seconds a unit for chunks of several sizes, and the two ways of ranking a prompt's answers.

    python experiments/bench_chunk_units.py [--seeds 4096] [--steps 2] [--sizes 128,256,512,1024,2048,4096]

Plans the reference study (``tabsim reproduce``'s five studies) with ``--seeds`` seeds and ``--steps``
steps, then runs chunks of each size in this process, in turns (three rounds, the sizes interleaved, the
minimum kept: a busy machine's pauses move it least), and prints the process CPU microseconds a unit
(one condition x seed, every arm) and the ratio to the best size, beside the size the planner picks
(:func:`tabsim.runtime.planning.units_per_chunk`) and its estimated arrays in MiB. Then it times the answer
ranks of a task (``argsort(argsort(u))`` against :func:`tabsim.sim.ops.ranks`) over one chunk's runs.
"""
from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp

from tabsim.sim.ops import ranks
from tabsim.runtime import planning
from tabsim.runtime.programs import run_chunk
from tabsim.studies.factorial import plan_units
from tabsim.studies.reference.design import build_designs, settings


def per_unit(plans: dict, rounds: int = 3, units: int = 8192) -> dict:
    """Minimum over ``rounds`` of the CPU microseconds a unit of each size's chunks (after one warm-up call)."""
    for chunks in plans.values():
        run_chunk(chunks[0][1])
    best = {u: float("inf") for u in plans}
    for _ in range(rounds):
        for u, chunks in plans.items():
            todo = chunks[1:1 + max(1, units // u)] or chunks[:1]
            c = time.process_time()
            for _, ch in todo:
                run_chunk(ch)
            best[u] = min(best[u], (time.process_time() - c) / (len(todo) * u) * 1e6)
    return best


def rank_seconds(runs: int, n_prompts: int, n_answers: int, reps: int = 5) -> tuple[float, float]:
    u = jax.random.uniform(jax.random.PRNGKey(0), (runs, n_prompts, n_answers))
    sort = jax.jit(lambda x: jnp.argsort(jnp.argsort(x, axis=-1), axis=-1))
    count = jax.jit(ranks)
    out = []
    for f in (sort, count):
        jax.block_until_ready(f(u))
        t = []
        for _ in range(reps):
            c = time.process_time()
            jax.block_until_ready(f(u))
            t.append(time.process_time() - c)
        out.append(min(t))
    return out[0], out[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--sizes", default="128,256,512,1024,2048,4096")
    args = ap.parse_args()
    designs = list(build_designs(settings(seeds=args.seeds, steps=args.steps)).values())
    (cfg,) = plan_units(designs)[0].configs
    picked = planning.units_per_chunk(cfg, 1 << 30)
    print(f"reference study, {args.seeds} seeds, {args.steps} steps; the planner picks {picked} units a chunk "
          f"({planning.estimate_bytes(cfg, picked, 1) / 2**20:.1f} MiB of arrays)")
    sizes = [int(x) for x in args.sizes.split(",")]
    best = per_unit({u: planning.plan(plan_units(designs, units_per_chunk=u)[0]).parts for u in sizes})
    low = min(best.values())
    for u in sizes:
        print(f"  {u:5d} units a chunk ({planning.estimate_bytes(cfg, u, 1) / 2**20:6.1f} MiB): "
              f"{best[u]:6.1f} us CPU a unit, {best[u] / low:.2f}x the best")
    runs = picked * len(cfg.arms.arms)
    s, c = rank_seconds(runs, cfg.task.n_prompts, cfg.task.n_answers)
    print(f"answer ranks of {runs} runs ({cfg.task.n_prompts} x {cfg.task.n_answers}): two argsorts "
          f"{s / runs * 1e6:.2f} us a run, counted {c / runs * 1e6:.2f} us a run ({s / c:.0f}x)")


if __name__ == "__main__":
    main()
