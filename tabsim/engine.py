"""The compiled training engine, in the shape of purejaxrl's ``make_train``.

``make_train(env, algo, schedule, arms)`` fixes everything static (shapes, code paths) and returns
``train(seeds, hypers) -> history``: one jit-compiled program that vmaps over conditions (a stacked
:class:`~tabsim.params.Hyper`), seeds and arms, and runs training as a ``lax.scan``.

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
import optax

from tabsim import arms as arms_mod
from tabsim import _xla
from tabsim import rng as R
from tabsim._precision import full, real
from tabsim._ops import log_softmax_last, log_softmax_transpose, onehot_minus_softmax
from tabsim._pytree import pytree_dataclass
from tabsim.algos import AlgoSpec, advantages, policy_loss, reads_logp_only, take_logp, zero_variance
from tabsim.algos import KL_ESTIMATORS, TOKEN_RETURNS, closed_form
from tabsim.params import Hyper


@dataclasses.dataclass(frozen=True)
class Schedule:
    """Static training schedule."""

    steps: int = 200
    batch_size: int = 16  # prompts per rollout batch
    group_size: int = 8  # G answers per prompt
    eval_every: int = 200
    replacement: bool = False  # draw each batch's prompts with replacement


@pytree_dataclass
class TrainState:
    """The scan carry."""

    logits: jax.Array  # policy table
    opt_state: Any  # optimizer state (Adam moments; empty for SGD)
    seed: jax.Array  # uint32[2] seed words
    step: jax.Array  # int32 training step


def _optimizer(algo: AlgoSpec, hp: Hyper):
    if algo.optimizer == "adam":
        return optax.scale_by_adam(b1=hp.adam_b1, b2=hp.adam_b2, eps=hp.adam_eps)
    return optax.identity()


def clip_by_global_norm(g, max_norm):
    """Scale ``g`` so its norm is at most ``max_norm`` (``inf`` disables the clip)."""
    norm = jnp.sqrt((g * g).sum())
    return g * jnp.minimum(1.0, max_norm / jnp.maximum(norm, 1e-12))


DIAG_KEYS = ("reward_mean", "kept_frac", "clip_frac")  # per-update diagnostics, averaged per eval chunk
STACKED_EVAL_BYTES = 256 * 2**20  # tables kept for one batched evaluation at the end
# Compile options of the programs (``tabsim._xla``: each kept only where the running XLA accepts it;
# ``None`` in a slot: XLA's defaults). The bandit's programs compile about 30% faster with the classic CPU
# emitters; those expand a scatter into a loop over its indices, and the multi-node tree's sparse update
# scatter-adds B G D rows per step, so the tree keeps the fusion emitters (its steps take about 2/3 of
# the CPU time for about 1.3 s more compile time; experiments/bench_tree.py). The options are part of a
# program's key in the executable store (``tabsim.runtime.executables``) and in JAX's cache.
TREE_COMPILER_OPTIONS: dict | None = _xla.TREE_TUNING
BANDIT_COMPILER_OPTIONS: dict | None = _xla.CPU_TUNING


def compiler_options(sparse: bool) -> dict | None:
    """The compile options of a training program (the tree's sparse update or the rest), less those
    the running XLA does not know."""
    return _xla.program_options(TREE_COMPILER_OPTIONS if sparse else BANDIT_COMPILER_OPTIONS)


# multi-node trees whose runs' tables together exceed this go through in groups of runs (a sequential
# map over vmapped groups), so memory holds one group's tables and temporaries, not every run's
RUN_GROUP_BYTES = 64 * 2**20


def _scan(body, carry, length: int):
    """``lax.scan`` of ``body(carry, i)`` over ``i = 0..length-1``; a length-1 loop is inlined (less to compile)."""
    if length == 1:
        carry, out = body(carry, jnp.zeros((), jnp.int32))
        return carry, jax.tree_util.tree_map(lambda x: x[None], out)
    return jax.lax.scan(body, carry, jnp.arange(length))


def make_update(env, algo: AlgoSpec, schedule: Schedule, arms: tuple[str, ...] = arms_mod.ARMS, *,
                sparse: bool | None = None):
    """One rollout batch: sample, reward, advantage, then ``epochs x minibatches`` updates.

    Returns ``update(state, task, arm, hp) -> (state, diagnostics)`` where ``arm`` is a position in
    ``arms``.

    ``sparse`` (default: ``env.sparse_rows``, the multi-node tree) differentiates the loss with respect
    to the logit rows of the visited (prompt, node) pairs, ``[B, G, T, b]``, and scatter-adds the row
    gradients into the flattened table ``[N n_nodes, b]``: O(B G T b) per update instead of a dense
    ``[B, n_nodes, b]`` gradient. Every loss term of :func:`~tabsim.algos.policy_loss` reads the
    policy only through ``log_softmax`` of these rows, so the gradient is the same (the dense path is
    the transpose of the same gather). SGD adds the scaled rows to the table directly; Adam and the
    global-norm clip need the summed gradient table, built by one scatter-add into zeros of the table's
    shape. ``sparse=False`` keeps the dense autodiff path (tests compare the two).
    """
    frozen = arms.index("frozen") if "frozen" in arms else -1
    B, G = schedule.batch_size, schedule.group_size
    n_mb = algo.minibatches
    mb = B // n_mb

    every = B == env.n_prompts and not schedule.replacement  # the batch is the table, in order
    full = every and n_mb == 1  # no gather/scatter
    # one node per prompt and a loss linear in log p: the gradient written out, no autodiff
    closed = getattr(env, "single_node", False) and closed_form.supports(algo)
    if sparse is None:
        sparse = getattr(env, "sparse_rows", False) and not closed
    sparse = bool(sparse) and not closed
    dense_grad = algo.optimizer != "sgd" or algo.grad_clip  # the optimizer reads the summed gradient table
    single = algo.epochs * n_mb == 1
    logp_only = reads_logp_only(algo)
    needs_old = not closed or closed_form.needs_old_logp(algo) or algo.kl_placement == "reward"
    # verl's REINFORCE++ with the KL in the reward: each token's return carries the KL still to come
    token_returns = algo.kl_placement == "reward" and algo.estimator in TOKEN_RETURNS and env.max_len > 1

    def closed_grad(logits, idx, batch, hp):
        logits_b = logits if full else logits[idx]
        shape = logits_b.shape
        g, aux = closed_form.gradient(algo, logits_b.reshape(shape[0], -1), batch["rollout"].answers,
                                      batch["mask"], batch["adv"], batch["logp_old"], batch["logq_ref"], hp)
        g = g.reshape(shape)
        return (g if full else jnp.zeros_like(logits).at[idx].add(g)), aux

    def loss_fn(logits, idx, batch, hp):
        logits_b = logits if full else logits[idx]
        logq = env.token_logq(logits_b, batch["rollout"])
        return policy_loss(algo, logq, batch["rollout"].tokens, batch["mask"], batch["adv"],
                           batch["logp_old"], batch["logq_ref"], hp)

    grad_fn = closed_grad if closed else jax.grad(loss_fn, has_aux=True)

    def row_grad(logits, batch, hp):
        """Gradient of the loss with respect to the visited logit rows ``[B, G, T, b]`` (not the table):
        the ``log_softmax`` transpose ``G - softmax sum_a G_a`` of the gradient ``G`` with respect to the
        rows' log-probabilities; a loss that reads only the sampled tokens' ``logp`` has
        ``G = c onehot(token)`` with ``c = dL/dlogp`` per token, so ``c (onehot - softmax)``."""
        # one update per batch: the table is still the rollout's, whose rows were read already
        logq = batch["logq_old"] if single else log_softmax_last(env_rows(logits, batch["rows"]))
        tokens = batch["rollout"].tokens

        def loss(x, **kw):
            return policy_loss(algo, x, tokens, batch["mask"], batch["adv"], batch["logp_old"], batch["logq_ref"],
                               hp, **kw)

        if logp_only:
            c, aux = jax.grad(lambda lp: loss(None, logp=lp), has_aux=True)(take_logp(logq, tokens))
            return onehot_minus_softmax(c, tokens, logq), aux
        g, aux = jax.grad(loss, has_aux=True)(logq)
        return log_softmax_transpose(g, logq), aux

    def env_rows(table, rows):
        return table.reshape(-1, table.shape[-1])[rows]

    def update(state: TrainState, task, arm, hp: Hyper):
        seed, step = state.seed, state.step
        n = env.n_prompts
        if schedule.replacement:
            u = R.uniform(seed, (B,), step=step, tag=R.BATCH, rng=env.rng)
            idx = jnp.minimum((u * n).astype(jnp.int32), n - 1)
        elif B == n:
            idx = jnp.arange(n)
        else:
            idx = jax.lax.top_k(R.uniform(seed, (n,), step=step, tag=R.BATCH, rng=env.rng), B)[1]
        if sparse:  # read the visited rows from the whole tables: no [B, n_nodes, b] copies
            rest = dataclasses.replace(task, prior_logits=None)
            task_b = task if every else jax.tree_util.tree_map(lambda x: x[idx], rest)
            # the rollout returns the log-softmax of the rows it read: [B, G, T, b], no second gather
            rollout = env.rollout(seed, step, state.logits, G, prompts=None if every else idx, with_logq=True)
            rows = (idx[:, None, None] * env.n_nodes + rollout.nodes).astype(jnp.int32)
            logq_old = rollout.logq
            logq_ref = (log_softmax_last(env_rows(task.prior_logits, rows))
                        if algo.kl_placement != "none" else None)
        else:
            task_b = task if every else jax.tree_util.tree_map(lambda x: x[idx], task)
            logits_b = state.logits if every else state.logits[idx]
            rollout = env.rollout(seed, step, logits_b, G)
            ref_b = task_b.prior_logits
            logq_old = env.token_logq(logits_b, rollout) if needs_old else None
            # the closed form reads the reference row itself: the prior is a normalised log-distribution
            logq_ref = ref_b.reshape(B, -1) if closed else env.token_logq(ref_b, rollout)
        logp_old = take_logp(logq_old, rollout.tokens) if needs_old else None
        rewards = arms_mod.rewards(arm, seed, step, env, task_b, rollout.answers, hp, arms)
        if algo.kl_placement == "reward":
            ref_tok = logq_ref[:, None, None, :] if closed else logq_ref
            kl_tok = KL_ESTIMATORS[algo.kl](logp_old, take_logp(ref_tok, rollout.tokens), logq_old, ref_tok)
            outcome, rewards = rewards, rewards - hp.beta * (kl_tok * rollout.mask).sum(-1)
        degenerate = zero_variance(rewards)
        valid = 1.0 - hp.filter * degenerate
        if token_returns:
            adv = TOKEN_RETURNS[algo.estimator](outcome, hp.beta * kl_tok * rollout.mask, mask=rollout.mask,
                                                valid=valid)
        else:
            adv = advantages(algo, rewards, lengths=rollout.lengths, valid=valid, hp=hp)
        mask = rollout.mask * valid[:, None, None]
        batch = {"rollout": rollout, "mask": mask, "adv": adv, "logp_old": logp_old, "logq_ref": logq_ref}
        if sparse:
            batch["rows"] = rows
            if single:
                batch["logq_old"] = logq_old
        active = (jnp.asarray(arm) != frozen).astype(real())
        opt = _optimizer(algo, hp)

        def one_update(carry, j):
            logits, opt_state = carry
            if n_mb == 1:
                sl_idx, sl = idx, batch
            else:
                start = (j % n_mb) * mb
                take = lambda x: jax.lax.dynamic_slice_in_dim(x, start, mb, axis=0)  # noqa: E731
                sl_idx, sl = take(idx), jax.tree_util.tree_map(take, batch)
            if sparse:
                dz, aux = row_grad(logits, sl, hp)
                flat = logits.reshape(-1, logits.shape[-1])
                if not dense_grad:  # SGD: add the scaled rows into the table (opt_state is empty)
                    logits = flat.at[sl["rows"]].add(-(active * hp.lr) * dz).reshape(logits.shape)
                    return (logits, opt_state), aux["clip_frac"]
                g = jnp.zeros_like(flat).at[sl["rows"]].add(dz).reshape(logits.shape)
            else:
                g, aux = grad_fn(logits, sl_idx, sl, hp)
            if algo.grad_clip:
                g = clip_by_global_norm(g, hp.max_grad_norm)
            step, opt_state = opt.update(g, opt_state)
            logits = logits - active * hp.lr * step
            return (logits, opt_state), aux["clip_frac"]

        (logits, opt_state), clip_frac = _scan(one_update, (state.logits, state.opt_state), algo.epochs * n_mb)
        diag = {"reward_mean": rewards.mean(), "kept_frac": valid.mean(), "clip_frac": clip_frac.mean()}
        return TrainState(logits=logits, opt_state=opt_state, seed=seed, step=step + 1), diag

    return update


def make_train(env, algo: AlgoSpec, schedule: Schedule, arms: tuple[str, ...]):
    """Build ``train(seeds [S, 2], hypers [C]) -> history`` for a static configuration.

    ``history`` maps each metric to an array ``[C, S, A, E + 1]`` (conditions, seeds, arms, eval
    points at steps ``0, eval_every, ..., steps``).
    """
    if schedule.steps % schedule.eval_every:
        raise ValueError(f"train.eval_every: must divide steps={schedule.steps}, got {schedule.eval_every}")
    if schedule.batch_size % algo.minibatches:
        raise ValueError(f"algo.minibatches: must divide batch_size={schedule.batch_size}, got {algo.minibatches}")
    n_evals = schedule.steps // schedule.eval_every
    update = make_update(env, algo, schedule, tuple(arms))
    arm_ids = np.arange(len(arms), dtype=np.int32)

    def train_one(seed, hp: Hyper, arm, stacked: bool):
        task = env.init_task(seed, hp)
        logits = task.prior_logits
        state = TrainState(logits=logits, opt_state=_optimizer(algo, hp).init(logits), seed=seed,
                           step=jnp.zeros((), jnp.int32))
        evaluate = lambda lg: env.evaluate(lg, task, hp)  # noqa: E731
        nan = jnp.full((1,), jnp.nan, real())

        def chunk(state, _):
            def step(carry, _):  # diagnostics summed in the carry, not stacked per step
                s, sums = carry
                s, d = update(s, task, arm, hp)
                return (s, {k: sums[k] + d[k] for k in sums}), None

            zeros = {k: jnp.zeros((), real()) for k in DIAG_KEYS}
            (state, sums), _ = jax.lax.scan(step, (state, zeros), None, length=schedule.eval_every)
            diag = {k: v / schedule.eval_every for k, v in sums.items()}
            if stacked:  # keep the table; every eval point is evaluated together afterwards
                return state, (state.logits, diag)
            return state, (None, {**evaluate(state.logits), **diag})

        _, (tables, hist) = _scan(chunk, state, n_evals)
        diag = {k: jnp.concatenate([nan, hist.pop(k)]) for k in DIAG_KEYS}
        if stacked:  # one copy of the evaluation in the program, vmapped over the E + 1 tables
            metrics = jax.vmap(evaluate)(jnp.concatenate([logits[None], tables]))
        else:
            first = evaluate(logits)
            metrics = {k: jnp.concatenate([jnp.asarray(first[k], real())[None], v]) for k, v in hist.items()}
        return {**metrics, **diag}

    n_arms = len(arms)
    sparse = getattr(env, "sparse_rows", False) and not (getattr(env, "single_node", False)
                                                         and closed_form.supports(algo))

    options = compiler_options(sparse)

    @functools.partial(jax.jit, compiler_options=options)
    @full  # every product at full float32 precision, on every backend
    def train(seeds, hypers):
        """``seeds``: ``uint32[S, 2]`` seed words; ``hypers``: Hyper of ``[C]`` arrays, or of scalars for
        the fields shared by every condition (see :func:`tabsim.params.stack_hypers`)."""
        # one flat vmap over (condition, seed, arm): cheaper to trace than three nested ones; every
        # arm of a seed gets the same seed words, hence the same draws (paired randomness)
        # a shared field stays one scalar (no per-run copy); swept fields are laid out per run
        s, a, per_run, axes, treedef = _run_layout(seeds, hypers, n_arms, arm_ids)
        n_seeds, n_runs = seeds.shape[0], s.shape[0]
        n_cond = n_runs // (n_seeds * n_arms)
        group = run_group(n_runs)
        # keep the E + 1 tables and evaluate them in one vmapped call when they fit in memory: half
        # the evaluation code to compile
        stacked = (n_evals + 1) * math.prod(env.table_shape) * group * 4 <= STACKED_EVAL_BYTES
        if group == n_runs:
            out = jax.vmap(lambda s_, hp, a_: train_one(s_, hp, a_, stacked), in_axes=(0, axes, 0))(
                s, jax.tree_util.tree_unflatten(treedef, per_run), a)
        else:  # a scan over groups of `group` vmapped runs (the last group may be smaller)
            swept_at = [i for i, x in enumerate(per_run) if jnp.ndim(x)]

            def one(xs):
                s_, a_, sw = xs
                vals = list(per_run)
                for i, v in zip(swept_at, sw):
                    vals[i] = v
                return train_one(s_, jax.tree_util.tree_unflatten(treedef, vals), a_, stacked)

            out = jax.lax.map(one, (s, a, [per_run[i] for i in swept_at]), batch_size=group)
        return jax.tree_util.tree_map(lambda x: x.reshape((n_cond, n_seeds, n_arms) + x.shape[1:]), out)

    def run_group(n_runs: int) -> int:
        """Runs vmapped together: all of them, or for a multi-node tree whose tables exceed
        :data:`RUN_GROUP_BYTES`, as many as fit in it (at least one)."""
        table = math.prod(env.table_shape) * 4
        if not getattr(env, "sparse_rows", False) or n_runs * table <= RUN_GROUP_BYTES:
            return n_runs
        return max(1, min(n_runs, RUN_GROUP_BYTES // table))

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
    update = make_update(env, algo, schedule, tuple(arms))
    arm_ids = np.arange(len(arms), dtype=np.int32)
    n_arms = len(arms)
    sparse = getattr(env, "sparse_rows", False) and not (getattr(env, "single_node", False)
                                                         and closed_form.supports(algo))
    options = compiler_options(sparse)
    table = math.prod(env.table_shape) * 4

    def group_of(n_runs: int) -> int:
        if not getattr(env, "sparse_rows", False) or n_runs * table <= RUN_GROUP_BYTES:
            return n_runs
        return max(1, min(n_runs, RUN_GROUP_BYTES // table))

    def stacked_for(n_runs: int) -> bool:
        return (n_evals + 1) * math.prod(env.table_shape) * group_of(n_runs) * 4 <= STACKED_EVAL_BYTES

    def over_runs(fn, seeds, hypers, *carry):
        """``fn(seed, hp, arm, stacked, *carry_of_the_run)`` over every run, laid out as ``train`` lays them."""
        s, a, per_run, axes, treedef = _run_layout(seeds, hypers, n_arms, arm_ids)
        n_runs = s.shape[0]
        group, stacked = group_of(n_runs), stacked_for(n_runs)
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

    def zeros():
        return {k: jnp.zeros((), real()) for k in DIAG_KEYS}

    def at_point(task, hp, logits, stacked):
        return logits if stacked else env.evaluate(logits, task, hp)

    def steps_of(task, arm, hp, state, sums, length):
        def step(carry, _):  # diagnostics summed in the carry, as in ``train``
            s, acc = carry
            s, d = update(s, task, arm, hp)
            return (s, {k: acc[k] + d[k] for k in acc}), None

        return jax.lax.scan(step, (state, sums), None, length=length)[0]

    def init_one(seed, hp, arm, stacked):
        task = env.init_task(seed, hp)
        logits = task.prior_logits
        state = TrainState(logits=logits, opt_state=_optimizer(algo, hp).init(logits), seed=seed,
                           step=jnp.zeros((), jnp.int32))
        first = logits if stacked else {k: jnp.asarray(v, real()) for k, v in env.evaluate(logits, task, hp).items()}
        return task, state, zeros(), first

    def point_one(seed, hp, arm, stacked, task, state, sums):
        return zeros(), (at_point(task, hp, state.logits, stacked), {k: v / E for k, v in sums.items()})

    def final_one(seed, hp, arm, stacked, tables):
        task = env.init_task(seed, hp)  # drawn here, beside the evaluation, as in ``train``: the same fused code
        return jax.vmap(lambda lg: env.evaluate(lg, task, hp))(tables)

    jit = functools.partial(jax.jit, compiler_options=options)
    programs: dict = {}

    def program(name: str, length: int = 0):
        if (name, length) in programs:
            return programs[(name, length)]
        if name == "advance":  # ``length`` steps inside an evaluation interval
            def fn(seeds, hypers, task, state, sums):
                return over_runs(lambda s_, hp, a_, st, t, x, y: steps_of(t, a_, hp, x, y, length), seeds, hypers,
                                 task, state, sums)
        elif name == "intervals":  # ``length`` whole intervals, each closed by its evaluation point
            def fn(seeds, hypers, task, state):
                def run_one(s_, hp, a_, stacked, t, st):
                    def chunk(st, _):
                        st, sums = steps_of(t, a_, hp, st, zeros(), E)
                        return st, (at_point(t, hp, st.logits, stacked), {k: v / E for k, v in sums.items()})
                    return _scan(chunk, st, length)
                return over_runs(run_one, seeds, hypers, task, state)
        else:
            body = {"init": init_one, "point": point_one, "final": final_one}[name]

            def fn(seeds, hypers, *carry):
                return over_runs(body, seeds, hypers, *carry)
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
