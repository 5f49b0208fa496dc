"""The compiled training engine, in the shape of purejaxrl's ``make_train``.

``make_train(env, algo, schedule, arms)`` fixes everything static (shapes, code paths) and returns
``train(seeds, hypers) -> history``: one jit-compiled program that vmaps over conditions (a stacked
:class:`~tabsim.sim.params.Hyper`), seeds and arms, and runs training as a ``lax.scan``.

Paired randomness: the arm axis is vmapped *inside* the seed axis with the seed held fixed, so every
arm of a seed draws the same prompt batches, the same sampling uniforms and the same reward noise
(common random numbers); arms differ only through their rewards and hence their policies.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tabsim.base import xla
from tabsim.base.precision import full, real
from tabsim.sim.algos import AlgoSpec, closed_form
from tabsim.sim import behaviour, kl_schedule, prompt_skip, ratio_spread, tracker
from tabsim.sim import allocation  # answers per prompt at a budget (algo.allocation)
from tabsim.sim.params import Hyper
from tabsim.sim import vas  # VAS (algo.curriculum)
from tabsim.sim.update import Schedule, TrainState, make_update, optimizer, scan


DIAG_KEYS = ("reward_mean", "kept_frac", "clip_frac")  # per-update diagnostics, averaged per eval chunk
STACKED_EVAL_BYTES = 256 * 2**20  # tables kept for one batched evaluation at the end
# Compile options of the programs (``tabsim.base.xla``: each kept only where the running XLA accepts it;
# ``None`` in a slot: XLA's defaults). The bandit's programs compile about 30% faster with the classic CPU
# emitters; those expand a scatter into a loop over its indices, and the multi-node tree's sparse update
# scatter-adds B G D rows per step, so the tree keeps the fusion emitters (its steps take about 2/3 of
# the CPU time for about 1.3 s more compile time; experiments/bench_tree.py). The options are part of a
# program's key in the executable store (``tabsim.runtime.executables``) and in JAX's cache.
TREE_COMPILER_OPTIONS: dict | None = xla.TREE_TUNING
BANDIT_COMPILER_OPTIONS: dict | None = xla.CPU_TUNING


def compiler_options(sparse: bool) -> dict | None:
    """The compile options of a training program (the tree's sparse update or the rest), less those
    the running XLA does not know."""
    return xla.program_options(TREE_COMPILER_OPTIONS if sparse else BANDIT_COMPILER_OPTIONS)


# multi-node trees whose runs' tables together exceed this go through in groups of runs (a sequential
# map over vmapped groups), so memory holds one group's tables and temporaries, not every run's
RUN_GROUP_BYTES = 64 * 2**20


def check_schedule(algo: AlgoSpec, schedule: Schedule) -> int:
    """The number of evaluation intervals, ``steps / eval_every``; raises ``ValueError`` when ``eval_every``
    does not divide ``steps`` or ``minibatches`` does not divide ``batch_size``."""
    if schedule.steps % schedule.eval_every:
        raise ValueError(f"train.eval_every: must divide steps={schedule.steps}, got {schedule.eval_every}")
    if schedule.batch_size % algo.minibatches:
        raise ValueError(f"algo.minibatches: must divide batch_size={schedule.batch_size}, got {algo.minibatches}")
    return schedule.steps // schedule.eval_every


def is_sparse(env, algo: AlgoSpec) -> bool:
    """Whether the update differentiates the visited logit rows (a multi-node tree, no closed form)."""
    return getattr(env, "sparse_rows", False) and not (getattr(env, "single_node", False)
                                                       and closed_form.supports(algo))


def run_group(env, n_runs: int) -> int:
    """Runs vmapped together: all of them, or for a multi-node tree whose tables exceed
    :data:`RUN_GROUP_BYTES`, as many as fit in it (at least one)."""
    table = math.prod(env.table_shape) * 4
    if not getattr(env, "sparse_rows", False) or n_runs * table <= RUN_GROUP_BYTES:
        return n_runs
    return max(1, min(n_runs, RUN_GROUP_BYTES // table))


def stacked_eval(env, n_evals: int, group: int) -> bool:
    """Keep the ``E + 1`` tables and evaluate them in one vmapped call when they fit in
    :data:`STACKED_EVAL_BYTES`: half the evaluation code to compile."""
    return (n_evals + 1) * math.prod(env.table_shape) * group * 4 <= STACKED_EVAL_BYTES


def over_runs(env, n_evals: int, arm_ids, fn, seeds, hypers, *carry):
    """``fn(seed, hp, arm, stacked, *carry_of_the_run)`` over every run of the flat (condition, seed, arm)
    layout: one vmap (cheaper to trace than three nested ones), or for a multi-node tree whose tables exceed
    :data:`RUN_GROUP_BYTES`, a sequential map over vmapped groups of runs (the last group may be smaller)."""
    s, a, per_run, axes, treedef = _run_layout(seeds, hypers, len(arm_ids), arm_ids)
    n_runs = s.shape[0]
    group = run_group(env, n_runs)
    stacked = stacked_eval(env, n_evals, group)
    if group == n_runs:
        return jax.vmap(lambda s_, hp, a_, *c: fn(s_, hp, a_, stacked, *c),
                        in_axes=(0, axes, 0) + (0,) * len(carry))(
            s, jax.tree_util.tree_unflatten(treedef, per_run), a, *carry)
    swept_at = [i for i, x in enumerate(per_run) if jnp.ndim(x)]

    def one(xs):
        s_, a_, sw, c = xs
        vals = list(per_run)
        for i, v in zip(swept_at, sw):
            vals[i] = v
        return fn(s_, jax.tree_util.tree_unflatten(treedef, vals), a_, stacked, *c)

    return jax.lax.map(one, (s, a, [per_run[i] for i in swept_at], carry), batch_size=group)


def init_state(env, algo: AlgoSpec, seed, hp: Hyper):
    """``(task, state)``: the seed's task and the training state at its prior."""
    task = env.init_task(seed, hp)
    logits = task.prior_logits
    return task, TrainState(logits=logits, opt_state=optimizer(algo, hp).init(logits), seed=seed,
                            step=jnp.zeros((), jnp.int32), behaviour=behaviour.init(algo, logits),
                            kl_state=kl_schedule.init(algo, task, hp), tracker=tracker.init(algo, env),
                            prompt_skip=prompt_skip.init(algo, env, hp),
                            vas=vas.init(algo, env), allocation=allocation.init(algo, env))


def run_steps(update, task, arm, hp: Hyper, state: TrainState, sums: dict, length: int):
    """``length`` updates as one ``lax.scan``: ``(state, sums)``, the diagnostics summed in the carry (not
    stacked per step)."""
    def step(carry, _):
        s, acc = carry
        s, d = update(s, task, arm, hp)
        return (s, {k: acc[k] + d[k] for k in acc}), None

    return jax.lax.scan(step, (state, sums), None, length=length)[0]


def diag_keys(env) -> tuple[str, ...]:
    """The per-update diagnostics of a run: :data:`DIAG_KEYS`, and ``log_ratio_range`` when ``train.metrics``
    names it (:mod:`tabsim.sim.ratio_spread`)."""
    return DIAG_KEYS + ratio_spread.diag_keys(env) + allocation.diag_keys(env)  # and effective_ratio


def zero_sums(keys: tuple[str, ...] = DIAG_KEYS) -> dict:
    """The diagnostics' sums at the start of an evaluation interval."""
    return {k: jnp.zeros((), real()) for k in keys}


def _train_one(env, algo: AlgoSpec, schedule: Schedule, update, n_evals: int):
    """One run of ``train``: ``(seed, hp, arm, stacked) -> {metric: [E + 1]}``."""
    E, keys = schedule.eval_every, diag_keys(env)

    def train_one(seed, hp: Hyper, arm, stacked: bool):
        task, state = init_state(env, algo, seed, hp)
        logits = task.prior_logits
        evaluate = lambda lg: env.evaluate(lg, task, hp)  # noqa: E731
        nan = jnp.full((1,), jnp.nan, real())

        def chunk(state, _):
            state, sums = run_steps(update, task, arm, hp, state, zero_sums(keys), E)
            diag = {k: v / E for k, v in sums.items()}
            if stacked:  # keep the table; every eval point is evaluated together afterwards
                return state, (state.logits, diag)
            return state, (None, {**evaluate(state.logits), **diag})

        _, (tables, hist) = scan(chunk, state, n_evals)
        diag = {k: jnp.concatenate([nan, hist.pop(k)]) for k in keys}
        if stacked:  # one copy of the evaluation in the program, vmapped over the E + 1 tables
            metrics = jax.vmap(evaluate)(jnp.concatenate([logits[None], tables]))
        else:
            first = evaluate(logits)
            metrics = {k: jnp.concatenate([jnp.asarray(first[k], real())[None], v]) for k, v in hist.items()}
        return {**metrics, **diag}

    return train_one


def make_train(env, algo: AlgoSpec, schedule: Schedule, arms: tuple[str, ...]):
    """Build ``train(seeds [S, 2], hypers [C]) -> history`` for a static configuration.

    ``history`` maps each metric to an array ``[C, S, A, E + 1]`` (conditions, seeds, arms, eval
    points at steps ``0, eval_every, ..., steps``).
    """
    n_evals = check_schedule(algo, schedule)
    train_one = _train_one(env, algo, schedule, make_update(env, algo, schedule, tuple(arms)), n_evals)
    arm_ids = np.arange(len(arms), dtype=np.int32)
    n_arms = len(arms)
    options = compiler_options(is_sparse(env, algo))

    @functools.partial(jax.jit, compiler_options=options)
    @full  # every product at full float32 precision, on every backend
    def train(seeds, hypers):
        """``seeds``: ``uint32[S, 2]`` seed words; ``hypers``: Hyper of ``[C]`` arrays, or of scalars for
        the fields shared by every condition (see :func:`tabsim.sim.params.stack_hypers`)."""
        # every arm of a seed gets the same seed words, hence the same draws (paired randomness); a
        # shared field stays one scalar (no per-run copy); swept fields are laid out per run
        out = over_runs(env, n_evals, arm_ids, train_one, seeds, hypers)
        n_seeds = seeds.shape[0]
        return jax.tree_util.tree_map(
            lambda x: x.reshape((x.shape[0] // (n_seeds * n_arms), n_seeds, n_arms) + x.shape[1:]), out)

    train.xla_options = options  # read by tabsim.runtime.executables (and by programs that wrap this one)
    return train


def _run_layout(seeds, hypers, n_arms: int, arm_ids):
    """The flat (condition, seed, arm) layout of :func:`make_train`'s ``train``: per-run seed words, arm ids,
    hyperparameter leaves (a shared field stays one scalar) and their vmap axes."""
    leaves, treedef = jax.tree_util.tree_flatten(hypers)
    swept = [x for x in leaves if jnp.ndim(x) > 0]
    n_cond, n_seeds = (swept[0].shape[0] if swept else 1), seeds.shape[0]
    s = jnp.repeat(jnp.tile(seeds, (n_cond, 1)), n_arms, axis=0)
    a = jnp.tile(jnp.asarray(arm_ids), n_cond * n_seeds)
    per_run = [jnp.repeat(jnp.asarray(x, real()), n_seeds * n_arms) if jnp.ndim(x) else x for x in leaves]
    axes = jax.tree_util.tree_unflatten(treedef, [0 if jnp.ndim(x) else None for x in leaves])
    return s, a, per_run, axes, treedef


def _segment_bodies(env, algo: AlgoSpec, schedule: Schedule, update) -> dict:
    """The per-run bodies of :func:`make_segments`'s programs, ``(seed, hp, arm, stacked, *carry)``:
    ``init``, ``point``, ``final``, and the builders ``advance(length)`` and ``intervals(length)``."""
    E, keys = schedule.eval_every, diag_keys(env)

    def at_point(task, hp, logits, stacked):
        return logits if stacked else env.evaluate(logits, task, hp)

    def init_one(seed, hp, arm, stacked):
        task, state = init_state(env, algo, seed, hp)
        logits = task.prior_logits
        first = logits if stacked else {k: jnp.asarray(v, real()) for k, v in env.evaluate(logits, task, hp).items()}
        return task, state, zero_sums(keys), first

    def point_one(seed, hp, arm, stacked, task, state, sums):
        return zero_sums(keys), (at_point(task, hp, state.logits, stacked), {k: v / E for k, v in sums.items()})

    def final_one(seed, hp, arm, stacked, tables):
        task = env.init_task(seed, hp)  # drawn here, beside the evaluation, as in ``train``: the same fused code
        return jax.vmap(lambda lg: env.evaluate(lg, task, hp))(tables)

    def advance(length):  # ``length`` steps inside an evaluation interval
        return lambda s_, hp, a_, st, t, x, y: run_steps(update, t, a_, hp, x, y, length)

    def intervals(length):  # ``length`` whole intervals, each closed by its evaluation point
        def run_one(s_, hp, a_, stacked, t, st):
            def chunk(st, _):
                st, sums = run_steps(update, t, a_, hp, st, zero_sums(keys), E)
                return st, (at_point(t, hp, st.logits, stacked), {k: v / E for k, v in sums.items()})
            return scan(chunk, st, length)
        return run_one

    return {"init": init_one, "point": point_one, "final": final_one, "advance": advance, "intervals": intervals}


def make_segments(env, algo: AlgoSpec, schedule: Schedule, arms: tuple[str, ...]):
    """:func:`make_train`'s training cut in time: programs that advance a carried state by a number of steps,
    so that a long run can stop between two calls and continue from the carried state.

    Returns :class:`Segments`. Run for run and step for step they compute the numbers of ``make_train``'s
    ``train``: the same update, the same draws (addressed by ``(seed, step, tag)``, not by the call), the
    same sums of the diagnostics in the same order, the evaluation compiled beside the task's draw as in
    ``train`` (``tests/runtime/test_segments.py`` checks the bits).
    """
    E, steps = schedule.eval_every, schedule.steps
    if steps % E:
        raise ValueError(f"train.eval_every: must divide steps={steps}, got {E}")
    n_evals = steps // E
    bodies = _segment_bodies(env, algo, schedule, make_update(env, algo, schedule, tuple(arms)))
    arm_ids = np.arange(len(arms), dtype=np.int32)
    options = compiler_options(is_sparse(env, algo))
    jit = functools.partial(jax.jit, compiler_options=options)
    programs: dict = {}

    def program(name: str, length: int = 0):
        if (name, length) in programs:
            return programs[(name, length)]
        body = bodies[name](length) if name in ("advance", "intervals") else bodies[name]
        if name == "advance":
            def fn(seeds, hypers, task, state, sums):
                return over_runs(env, n_evals, arm_ids, body, seeds, hypers, task, state, sums)
        elif name == "intervals":
            def fn(seeds, hypers, task, state):
                return over_runs(env, n_evals, arm_ids, body, seeds, hypers, task, state)
        else:
            def fn(seeds, hypers, *carry):
                return over_runs(env, n_evals, arm_ids, body, seeds, hypers, *carry)
        fn.__name__ = f"segments_{name}{length or ''}"
        compiled = jit(full(fn))
        compiled.xla_options = options  # read by tabsim.runtime.executables
        return programs.setdefault((name, length), compiled)

    return Segments(steps=steps, eval_every=E, program=program)


@dataclasses.dataclass(frozen=True)
class Segments:
    """The programs of :func:`make_segments`, built on first use: ``program("init")(seeds, hypers) -> (task,
    state, sums, first)``; inside an interval ``program("advance", n)(seeds, hypers, task, state, sums) ->
    (state, sums)`` and at its end ``program("point")(..., task, state, sums) -> (sums, (metrics or table,
    diagnostics))``; whole intervals ``program("intervals", m)(..., task, state) -> (state, (metrics or tables
    [R, m, ...], diagnostics [R, m]))``; with stacked evaluation ``program("final")(seeds, hypers, tables
    [R, E + 1, ...])`` evaluates every point at the end, as ``train`` does. ``R`` = runs (conditions x seeds
    x arms, in ``train``'s order)."""

    steps: int
    eval_every: int
    program: Any
