"""The expected flow's programs: which configurations have one (:func:`check`), the one-step
:func:`expected_update` and the whole run :func:`make_expected_train` (the package's docstring says how).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from tabsim.sim import arms as arms_mod
from tabsim.base.precision import full, real, scope
from tabsim.sim.algos import AlgoSpec
from tabsim.sim.engine import DIAG_KEYS, Schedule, check_schedule, compiler_options
from tabsim.sim.expected import batch
from tabsim.sim.algos import AGGREGATIONS, ESTIMATORS, RATIOS, SURROGATES
from tabsim.sim.algos.batch import context_reads
from tabsim.sim.expected.batch import batch_level
from tabsim.sim.expected.general import general_step, outcome_table, symbol_table
from tabsim.sim.expected.linear import level_tables, linear_step, linear_tables
from tabsim.sim.envs.bandit import compositions, majority_tables, n_compositions
from tabsim.sim.envs.base import wanted
from tabsim.sim.expected.direction import grad_cosine
from tabsim.sim.expected.difficulty import difficulty_tilt
from tabsim.sim.params import Hyper


EXPECTED_SEED = -1  # the ``seed`` of an expected-dynamics row in a run's frame
MAX_OUTCOMES = 200_000  # group outcomes enumerated per prompt
MAX_BATCH_WORK = 2e9  # operations per step of the distribution of the rest of the batch (batch.work)
CHUNK_BYTES = 512 * 2**20  # the expected flow's conditions per compiled call hold at most this in tables
NOISE_ARMS = arms_mod.NOISE_ARMS
COSINE = "grad_cosine"  # optional metric: each step's cosine with the true gradient of pass@1 (expected.direction)
TILT = "difficulty_tilt"  # optional metric: each step's weighting of the prompts by success rate (expected.difficulty)


def _refuse(msg: str):
    raise ValueError(f"train.dynamics = 'expected': {msg}")


def n_outcomes(env, algo: AlgoSpec, schedule: Schedule, arms) -> int:
    """Group outcomes enumerated per prompt and step (the largest over ``arms``)."""
    G, K = schedule.group_size, env.n_answers
    if linear_path(algo, schedule):
        return n_compositions(G, K)
    symbols = 2 * K if any(a in NOISE_ARMS for a in arms) else K
    return n_compositions(G, symbols) * (K if "majority" in arms and env.tie == "random" else 1)


def expected_bytes(env, algo: AlgoSpec, schedule: Schedule, arms) -> int:
    """Bytes one condition's flow holds at its peak: the per-prompt outcome tables and probabilities of
    every arm (linear path: about six ``[N, O]`` float32 arrays per arm; general: the outcomes' gradients)."""
    per_arm = 6 if linear_path(algo, schedule) else 4 * env.n_answers * max(1, algo.epochs)
    return max(1, len(arms) * env.n_prompts * n_outcomes(env, algo, schedule, arms) * per_arm * 4)


def linear_path(algo: AlgoSpec, schedule: Schedule) -> bool:
    """Every prompt updated once, on policy, with rewards that do not read the policy: one pass
    (minibatches update disjoint prompts, whose rows nothing else moves; with replacement a prompt
    may sit in two minibatches, so only one minibatch) and no KL in the reward."""
    once = algo.epochs == 1 and (algo.minibatches == 1 or not schedule.replacement)
    return once and algo.kl_placement != "reward"


def check(env, algo: AlgoSpec, schedule: Schedule, arms) -> None:
    """Raise ``ValueError`` (naming the setting and what to change) when the exact flow is not available."""
    if getattr(env, "name", None) != "bandit":
        _refuse(f"only the bandit (task.env = 'bandit') has exact expected dynamics, got {env.name!r}; for "
                "a small tree, tabsim.sim.expected.expected_update gives the exact expected one-step update")
    if algo.optimizer != "sgd":
        _refuse(f"algo.optimizer = {algo.optimizer!r}: Adam's moments depend on the whole history of sampled "
                "gradients, so the expected update is not a function of the logits; use 'sgd'")
    if algo.grad_clip:
        _refuse("algo.max_grad_norm: the global-norm clip couples every prompt's random gradient; leave it unset")
    if algo.token_weight != "none":
        _refuse(f"algo.token_weight = {algo.token_weight!r} weighs each sampled token by what the whole batch or "
                "the group's sampled paths hold, which the exact flow does not enumerate; use dynamics = 'sampled'")
    if why := ESTIMATORS.meta(algo.estimator).get("no_expected"):  # declared at the estimator's registration
        _refuse(f"algo.estimator = {algo.estimator!r} has no exact flow: {why}; use dynamics = 'sampled'")
    for field, registry in (("ratio", RATIOS), ("surrogate", SURROGATES), ("aggregation", AGGREGATIONS)):
        name = getattr(algo, field)  # a loss-side component declares it at its registration too (disco, real)
        if why := registry.meta(name).get("no_expected"):
            _refuse(f"algo.{field} = {name!r} has no exact flow: {why}; use dynamics = 'sampled'")
    if reads := context_reads(algo.estimator):  # the flow's tables are functions of a group's rewards alone
        _refuse(f"algo.estimator = {algo.estimator!r} reads {', '.join(reads)} besides the rewards, which the exact "
                "flow's tables (one advantage per count of rewards in a group) do not carry; use dynamics = 'sampled'")
    if batch_level(algo.estimator) and not linear_path(algo, schedule):
        why = ("off-policy reuse (algo.epochs or algo.minibatches) makes each outcome's updates depend on the "
               "others' rewards through the batch totals" if algo.kl_placement != "reward" else
               "the KL in the reward makes every reward a real number, so the batch totals are sums of "
               "real numbers over all B groups")
        _refuse(f"algo.estimator = {algo.estimator!r} reads totals over the whole batch, and {why}: about "
                f"{n_compositions(schedule.group_size, env.n_answers)}^{schedule.batch_size} joint outcomes; "
                "use algo.epochs = 1 with algo.kl_placement 'loss' or 'none', a group-level estimator "
                f"({', '.join(n for n in ESTIMATORS if not batch_level(n))}), or dynamics = 'sampled'")
    if algo.epochs * algo.minibatches > 1 and schedule.replacement:
        _refuse("off-policy reuse with train.replacement = true: a prompt drawn twice is updated by both groups "
                "in turn, which the exact flow does not enumerate; set train.replacement = false or algo.epochs = 1")
    n = n_outcomes(env, algo, schedule, arms)
    if n > MAX_OUTCOMES:
        what = "answers" if linear_path(algo, schedule) else "(answer, reward) symbols"
        _refuse(f"a group of G = {schedule.group_size} over K = {env.n_answers} {what} has {n:,} outcomes per "
                f"prompt (at most {MAX_OUTCOMES:,}); reduce train.group_size or task.n_answers (merge symmetric "
                "answers into classes), or use dynamics = 'sampled'")
    b, s_max = batch_members(env, algo, schedule)
    if b and (w := batch.work(env.n_prompts, b, s_max, schedule.replacement)) > MAX_BATCH_WORK:
        _refuse(f"the exact distribution of the rest of the batch needs about {w:.3g} operations per step (at "
                f"most {MAX_BATCH_WORK:.3g}); reduce task.n_prompts or train.batch_size")


def batch_members(env, algo: AlgoSpec, schedule: Schedule) -> tuple[int, int]:
    """``(b, s_max)``: how many other members of a prompt's batch its update reads (0: none), and the
    largest per-group statistic the batch-level estimators sum over them (0 for the normaliser alone)."""
    if batch_level(algo.estimator):
        return schedule.batch_size - 1, int(batch.statistic(algo.estimator, schedule.group_size).max())
    if algo.aggregation == "group-sum":
        return 0, 0
    return schedule.batch_size // algo.minibatches - 1, 0


def expected_update(env, algo: AlgoSpec, schedule: Schedule, arm: str, task, logits, hp: Hyper, *,
                    precision: str = "float32"):
    """The exact expected table after one step from ``logits``: ``E[logits after the step]``.

    Compiled once per ``(env, algo, schedule, arm, precision)``. A bandit takes the path
    :func:`make_expected_train` takes (:func:`check` first). A small tree (or any
    environment with :func:`symbol_table`) enumerates every group of G leaves by its counts
    (``C(G + L - 1, L - 1)`` for L leaves) and applies the engine's loss to each (the general path; long
    tree runs are not offered); the tests compare both with the sampled engine. ``precision="float64"``
    traces and runs the step in double precision (:func:`tabsim.base.precision.scope`; numpy inputs and
    Python floats enter as float64, and the result is a float64 array).
    """
    with scope(precision):
        return _expected_update(env, algo, schedule, arm, task, logits, hp)


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3))
@full  # every product at full float32 precision, on every backend
def _expected_update(env, algo: AlgoSpec, schedule: Schedule, arm: str, task, logits, hp: Hyper):
    logits = jnp.asarray(logits, real())
    task = task.__class__(**{**task.__dict__, "prior_logits": jnp.asarray(task.prior_logits, real())})
    if arm == "frozen":
        return logits
    if getattr(env, "name", None) == "bandit":
        check(env, algo, schedule, (arm,))
    G = schedule.group_size
    if getattr(env, "name", None) == "bandit" and linear_path(algo, schedule):
        counts_np = compositions(G, env.n_answers)
        _, lmc, credit = majority_tables(G, env.n_answers, env.tie)
        maj = (jnp.asarray(credit, real()), jnp.asarray(counts_np.max(1)))
        counts = jnp.asarray(counts_np, real())
        tables = linear_tables(arm, env, task, algo, G, hp, counts, maj)
        return linear_step(algo, schedule, counts, jnp.asarray(lmc, real()), logits, task.prior_logits, tables, hp,
                           env.n_prompts, level_tables(algo, schedule))[0]
    symbols = symbol_table(env, arm in NOISE_ARMS)
    n_out = n_compositions(G, symbols["answer"].shape[0])
    if n_out > MAX_OUTCOMES:
        _refuse(f"{n_out:,} group outcomes per prompt (at most {MAX_OUTCOMES:,}): use a smaller tree or group")
    table = outcome_table(env, arm, G, symbols)
    return general_step(env, algo, schedule, arm, symbols, table, logits, task.prior_logits, task, hp)[0]



# -- the program ----------------------------------------------------------------------------------
FROZEN = {"reward_mean": 0.0, "kept_frac": None, "clip_frac": 0.0}  # the engine's record of a frozen arm


def _enumeration(env, algo: AlgoSpec, schedule: Schedule, arms) -> dict:
    """What the flow enumerates, built once in NumPy: the compositions and the majority's tables (linear
    path) or every arm's symbols and group outcomes (general path)."""
    G, K = schedule.group_size, env.n_answers
    if linear_path(algo, schedule):
        # numpy here, arrays of the program's floating type where traced (float64 under precision="float64")
        counts_np = compositions(G, K)
        _, lmc_np, credit = majority_tables(G, K, env.tie)
        return {"counts": counts_np, "lmc": lmc_np, "credit": credit}
    symbols = {noise: symbol_table(env, noise) for noise in (False, True)}
    tables = {a: outcome_table(env, a, G, symbols[a in NOISE_ARMS]) for a in arms if a != "frozen"}
    return {"symbols": symbols, "tables": tables}


def _run_tables(env, algo: AlgoSpec, G: int, arms, classed, enum: dict, task, hp: Hyper) -> dict:
    """A run's tables of the linear path (they do not depend on the policy): the compositions, the online
    majority's table and the two-class arms' tables stacked for one vmapped step."""
    counts, lmc = jnp.asarray(enum["counts"], real()), jnp.asarray(enum["lmc"], real())
    maj = (jnp.asarray(enum["credit"], real()), jnp.asarray(enum["counts"].max(1)))
    maj_table = linear_tables("majority", env, task, algo, G, hp, counts, maj) if "majority" in arms else None
    cls_tables = [linear_tables(a, env, task, algo, G, hp, counts, maj) for a in classed]
    cls_stack = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *[t[1:] for t in cls_tables]) if classed else None
    return {"counts": counts, "lmc": lmc, "majority": maj_table, "classed": cls_stack}


def _make_step(env, algo: AlgoSpec, schedule: Schedule, arms, classed, enum: dict, level):
    """One expected step of every arm: ``step(zs [A, N, K], task, ref, tabs, hp) -> (zs, diagnostics [A])``."""
    lin, N = "counts" in enum, env.n_prompts

    def step(zs, task, ref, tabs, hp):
        new, diags = [None] * len(arms), [None] * len(arms)
        if classed:
            pos = [arms.index(a) for a in classed]
            z2, d2 = jax.vmap(lambda z, t: linear_step(algo, schedule, tabs["counts"], tabs["lmc"], z, ref,
                                                       ("class", *t), hp, N, level))(zs[jnp.asarray(pos)],
                                                                                     tabs["classed"])
            for j, i in enumerate(pos):
                new[i], diags[i] = z2[j], {k: v[j] for k, v in d2.items()}
        for i, a in enumerate(arms):
            if a == "frozen":
                new[i], diags[i] = zs[i], {**FROZEN, "kept_frac": 1.0 - hp.filter}
            elif a == "majority" and lin:
                new[i], diags[i] = linear_step(algo, schedule, tabs["counts"], tabs["lmc"], zs[i], ref,
                                               tabs["majority"], hp, N, level)
            elif not lin:
                new[i], diags[i] = general_step(env, algo, schedule, a, enum["symbols"][a in NOISE_ARMS],
                                                enum["tables"][a], zs[i], ref, task, hp)
        out = {k: jnp.stack([jnp.asarray(d[k], real()) for d in diags]) for k in DIAG_KEYS}
        new = jnp.stack(new)
        if wanted(getattr(env, "metrics", None), COSINE):  # only when train.metrics names it (programs unchanged)
            out[COSINE] = jax.vmap(lambda z1, z0: grad_cosine(z1 - z0, z0, task.correct))(new, zs)
        if wanted(getattr(env, "metrics", None), TILT):
            out[TILT] = jax.vmap(lambda z1, z0: difficulty_tilt(z1 - z0, z0, task.correct))(new, zs)
        return new, out

    return step


def _diag_keys(env) -> tuple:
    return DIAG_KEYS + tuple(m for m in (COSINE, TILT) if wanted(getattr(env, "metrics", None), m))


def _history(env, arms, task, hp: Hyper, z0, tables_e, hist) -> dict:
    """``metric -> [A, E + 1]``: every eval point's tables evaluated together (one copy of the evaluation in
    the program), and the diagnostics (NaN at step 0)."""
    all_tables = jnp.concatenate([z0[None], tables_e])  # [E + 1, A, N, K]
    metrics = jax.vmap(jax.vmap(lambda z: env.evaluate(z, task, hp)))(all_tables)
    out = {k: jnp.swapaxes(v, 0, 1) for k, v in metrics.items()}  # [A, E + 1] (per-prompt ones: [A, E + 1, N])
    nan = jnp.full((len(arms), 1), jnp.nan, real())
    out.update({k: jnp.concatenate([nan, hist[k].T], axis=1) for k in _diag_keys(env)})
    return out


def make_expected_train(env, algo: AlgoSpec, schedule: Schedule, arms: tuple[str, ...]):
    """Build ``train(seeds [S, 2], hypers [C]) -> history`` of the expected flow, like
    :func:`tabsim.sim.engine.make_train` (same metrics, ``[C, S, A, E + 1]``). A seed only draws the task
    (answer positions, offline label); the flow itself has no randomness.

    Raises:
      ValueError: the configuration has no exact expected flow (:func:`check` says why).
    """
    check(env, algo, schedule, arms)
    n_evals = check_schedule(algo, schedule)
    lin = linear_path(algo, schedule)
    enum = _enumeration(env, algo, schedule, arms)
    # the two-class arms of the linear path share one vmapped step (one copy of its code to compile)
    classed = [a for a in arms if a not in ("frozen", "majority")] if lin else []
    step = _make_step(env, algo, schedule, arms, classed, enum, level_tables(algo, schedule))

    def train_one(seed, hp: Hyper):
        task = env.init_task(seed, hp)
        ref = task.prior_logits
        tabs = _run_tables(env, algo, schedule.group_size, arms, classed, enum, task, hp) if lin else None

        def chunk(zs, _):
            zs, diag = jax.lax.scan(lambda z, x: step(z, task, ref, tabs, hp), zs, None, length=schedule.eval_every)
            return zs, (zs, {k: v.mean(0) for k, v in diag.items()})

        z0 = jnp.stack([ref for _ in arms])
        _, (tables_e, hist) = jax.lax.scan(chunk, z0, None, length=n_evals)
        return _history(env, arms, task, hp, z0, tables_e, hist)  # metric -> [A, E + 1]

    options = compiler_options(False)

    @functools.partial(jax.jit, compiler_options=options)
    @full  # every product at full float32 precision, on every backend
    def train(seeds, hypers):
        leaves, treedef = jax.tree_util.tree_flatten(hypers)
        n_cond = next((x.shape[0] for x in leaves if jnp.ndim(x) > 0), 1)
        axes = jax.tree_util.tree_unflatten(treedef, [0 if jnp.ndim(x) else None for x in leaves])
        per_cond = jax.vmap(lambda hp: jax.vmap(lambda s: train_one(s, hp))(seeds), in_axes=(axes,))
        if n_cond == 1 and not any(jnp.ndim(x) for x in leaves):
            return jax.tree_util.tree_map(lambda x: x[None], jax.vmap(lambda s: train_one(s, hypers))(seeds))
        return per_cond(hypers)

    train.xla_options = options  # read by tabsim.runtime.executables
    return train
