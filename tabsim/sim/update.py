"""One training update of the engine, as a list of named phases.

:func:`make_update` builds ``update(state, task, arm, hp) -> (state, diagnostics)`` for one rollout batch:

1. **sample**: :func:`sample_prompts` draws the batch's prompts, :func:`roll_out` their groups of G answers;
2. **score**: :func:`score` rewards the answers under the arm (and charges the KL when it sits in the reward);
3. **advantages**: :func:`advantage` turns the rewards into advantages and the filter's keep mask;
4. **loss**: :func:`make_gradient` differentiates the GRPO-family loss (autodiff, closed form or the
   visited logit rows of a multi-node tree);
5. **update**: :func:`apply_updates` applies ``epochs x minibatches`` optimizer steps.

What fixes shapes or picks a code path is decided once, in :class:`UpdatePlan`.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import optax

from tabsim.sim import arms as arms_mod
from tabsim.sim import rewards as rewards_mod
from tabsim.sim import rng as R
from tabsim.sim.ops import log_softmax_last, log_softmax_transpose, onehot_minus_softmax
from tabsim.base.precision import real
from tabsim.sim.pytree import pytree_dataclass
from tabsim.sim.algos import AlgoSpec, advantages, policy_loss, reads_logp_only, take_logp, zero_variance
from tabsim.sim.algos import KL_ESTIMATORS, TOKEN_RETURNS, closed_form
from tabsim.sim.algos.batch import context_reads
from tabsim.sim.algos.context import estimator_context
from tabsim.sim.algos.clip_cov import reads_uniforms, step_uniforms
from tabsim.sim.algos.tree_credit import check_group_stage
from tabsim.sim.params import Hyper
from tabsim.sim.groups import GroupStage, at_advantage, at_score, refill, runs_at
from tabsim.sim import tracker as tracker_mod
from tabsim.sim import prompt_skip as skip_mod  # GRESO (algo.prompt_skip)
from tabsim.sim import vas as vas_mod  # VAS (algo.curriculum)
from tabsim.sim import allocation as alloc_mod  # answers per prompt at a budget (algo.allocation)
from tabsim.sim import behaviour as behaviour_mod
from tabsim.sim import ratio_spread  # the optional metric log_ratio_range
from tabsim.sim import kl_schedule


@dataclasses.dataclass(frozen=True)
class Schedule:
    """Static training schedule."""

    steps: int = 200
    batch_size: int = 16  # prompts per rollout batch
    group_size: int = 8  # G answers per prompt
    eval_every: int = 200
    replacement: bool = False  # draw each batch's prompts with replacement
    groups: GroupStage = GroupStage()  # what the groups keep before their advantages (tabsim.sim.groups)
    refill: int = 0  # candidate prompts drawn beyond batch_size, the first informative B kept (tabsim.sim.groups)


@pytree_dataclass
class TrainState:
    """The scan carry."""

    logits: jax.Array  # policy table
    opt_state: Any  # optimizer state (Adam moments; empty for SGD)
    seed: jax.Array  # uint32[2] seed words
    step: jax.Array  # int32 training step
    behaviour: Any = None  # the behaviour sampler's state (tabsim.sim.behaviour: the stale ring), or None
    kl_state: Any = None  # the KL and reference schedules' state (tabsim.sim.kl_schedule.KLState), or None
    tracker: Any = None  # the per-prompt tracker (tabsim.sim.tracker, algo.tracker), or None
    prompt_skip: Any = None  # the prompt skip's reward history (tabsim.sim.prompt_skip, algo.prompt_skip), or None
    vas: Any = None  # VAS's per-prompt sampling weights (tabsim.sim.vas, algo.curriculum), or None
    allocation: Any = None  # the allocation's per-prompt estimates (tabsim.sim.allocation, algo.allocation), or None


def optimizer(algo: AlgoSpec, hp: Hyper):
    """The optax transformation of ``algo.optimizer`` (Adam's moments, or the identity for SGD)."""
    if algo.optimizer == "adam":
        return optax.scale_by_adam(b1=hp.adam_b1, b2=hp.adam_b2, eps=hp.adam_eps)
    return optax.identity()


def clip_by_global_norm(g, max_norm):
    """Scale ``g`` so its norm is at most ``max_norm`` (``inf`` disables the clip)."""
    norm = jnp.sqrt((g * g).sum())
    return g * jnp.minimum(1.0, max_norm / jnp.maximum(norm, 1e-12))


def scan(body, carry, length: int):
    """``lax.scan`` of ``body(carry, i)`` over ``i = 0..length-1``; a length-1 loop is inlined (less to compile)."""
    if length == 1:
        carry, out = body(carry, jnp.zeros((), jnp.int32))
        return carry, jax.tree_util.tree_map(lambda x: x[None], out)
    return jax.lax.scan(body, carry, jnp.arange(length))


@dataclasses.dataclass(frozen=True)
class UpdatePlan:
    """The static choices of one update, fixed when the program is built."""

    B: int  # prompts per batch
    G: int  # answers per prompt
    n_mb: int  # minibatches per pass
    mb: int  # prompts per minibatch
    frozen: int  # position of the frozen arm (-1: none)
    every: bool  # the batch is the table, in order
    full: bool  # ... and one minibatch: no gather/scatter
    closed: bool  # one node per prompt and a loss linear in log p: the gradient written out, no autodiff
    sparse: bool  # gradient with respect to the visited logit rows (multi-node tree)
    dense_grad: bool  # the optimizer reads the summed gradient table
    single: bool  # one update per batch
    logp_only: bool  # the loss reads the policy only through the sampled tokens' logp
    needs_old: bool  # the rollout's log-probabilities are read
    token_returns: bool  # verl's REINFORCE++ with the KL in the reward: per-token returns
    rng: str = "fast"  # the run's generator (tabsim.sim.rng), for a loss's own draws (clip_cov)


def update_plan(env, algo: AlgoSpec, schedule: Schedule, arms: tuple[str, ...], sparse: bool | None) -> UpdatePlan:
    """The :class:`UpdatePlan` of ``(env, algo, schedule, arms)`` (``sparse``: see :func:`make_update`)."""
    B, n_mb = schedule.batch_size, algo.minibatches
    # the batch is the table in order (a curriculum's draw may repeat prompts: never the table)
    every = B == env.n_prompts and not schedule.replacement and getattr(algo, "curriculum", "none") == "none"
    closed = getattr(env, "single_node", False) and closed_form.supports(algo)
    if sparse is None:
        sparse = getattr(env, "sparse_rows", False) and not closed
    return UpdatePlan(
        B=B, G=schedule.group_size, n_mb=n_mb, mb=B // n_mb, frozen=arms.index("frozen") if "frozen" in arms else -1,
        every=every, full=every and n_mb == 1, closed=closed, sparse=bool(sparse) and not closed,
        dense_grad=algo.optimizer != "sgd" or algo.grad_clip, single=algo.epochs * n_mb == 1,
        logp_only=reads_logp_only(algo), rng=env.rng,
        needs_old=not closed or closed_form.needs_old_logp(algo) or algo.kl_placement == "reward"
        or rewards_mod.reads_policy(algo.reward) or any(a in arms_mod.POLICY_ARMS for a in arms),
        # each token's return carries the KL still to come
        token_returns=algo.kl_placement == "reward" and algo.estimator in TOKEN_RETURNS and env.max_len > 1)


def env_rows(table, rows):
    """Rows ``rows`` of ``table`` flattened to ``[N n_nodes, b]``."""
    return table.reshape(-1, table.shape[-1])[rows]


# -- sample ---------------------------------------------------------------------------------------
def sample_prompts(env, schedule: Schedule, seed, step, weights=None):
    """``[B]`` the prompts of the step's batch: drawn with replacement, all of them in order, or ``B``
    without replacement (the top ``B`` of ``n`` uniforms). With ``schedule.refill`` the ``B + refill``
    candidates of which :func:`tabsim.sim.groups.refill` keeps ``B``. ``weights [n]`` (a tracker's,
    :mod:`tabsim.sim.tracker`): each prompt drawn with probability proportional to its weight."""
    B, n = schedule.batch_size + schedule.refill, env.n_prompts
    if schedule.replacement:
        u = R.uniform(seed, (B,), step=step, tag=R.BATCH, rng=env.rng)
        if weights is not None:
            return tracker_mod.weighted_draw(u, weights, B, True)
        return jnp.minimum((u * n).astype(jnp.int32), n - 1)
    if B == n:
        return jnp.arange(n)
    if weights is not None:
        return tracker_mod.weighted_draw(R.uniform(seed, (n,), step=step, tag=R.BATCH, rng=env.rng), weights, B, False)
    return jax.lax.top_k(R.uniform(seed, (n,), step=step, tag=R.BATCH, rng=env.rng), B)[1]


def roll_out(env, algo: AlgoSpec, plan: UpdatePlan, logits, task, idx, seed, step, mu=None):
    """The batch's groups: ``(task_b, rollout, logq_old, logq_ref, rows)``, the rollout's and the reference's
    log-distributions at the visited nodes (``rows``: the visited table rows, sparse path only).

    ``mu`` (a table of the policy's shape, :mod:`tabsim.sim.behaviour`): the answers are drawn from it instead of
    the policy, and ``logq_old`` is still the policy's (:func:`behaviour_logq` gives the sampler's)."""
    if plan.sparse:  # read the visited rows from the whole tables: no [B, n_nodes, b] copies
        rest = dataclasses.replace(task, prior_logits=None)
        task_b = task if plan.every else jax.tree_util.tree_map(lambda x: x[idx], rest)
        # the rollout returns the log-softmax of the rows it read: [B, G, T, b], no second gather
        rollout = env.rollout(seed, step, logits if mu is None else mu, plan.G, prompts=None if plan.every else idx,
                              with_logq=True)
        rows = (idx[:, None, None] * env.n_nodes + rollout.nodes).astype(jnp.int32)
        logq_ref = (log_softmax_last(env_rows(task.prior_logits, rows))
                    if algo.kl_placement != "none" else None)
        logq_old = rollout.logq if mu is None else log_softmax_last(env_rows(logits, rows))
        return task_b, rollout, logq_old, logq_ref, rows
    task_b = task if plan.every else jax.tree_util.tree_map(lambda x: x[idx], task)
    logits_b = logits if plan.every else logits[idx]
    rollout = env.rollout(seed, step, logits_b if mu is None else (mu if plan.every else mu[idx]), plan.G)
    ref_b = task_b.prior_logits
    logq_old = env.token_logq(logits_b, rollout) if plan.needs_old or mu is not None else None
    # the closed form reads the reference row itself: the prior is a normalised log-distribution
    logq_ref = ref_b.reshape(ref_b.shape[0], -1) if plan.closed else env.token_logq(ref_b, rollout)
    return task_b, rollout, logq_old, logq_ref, None


def behaviour_logq(env, plan: UpdatePlan, mu, idx, rollout):
    """The behaviour table ``mu``'s log-distributions at the visited nodes of a rollout drawn from it (sparse path:
    the rows the rollout read)."""
    if plan.sparse:
        return rollout.logq
    return env.token_logq(mu if plan.every else mu[idx], rollout)


HINT_STREAM = 0x40000000  # the hinted redraw's step address, step + this: beyond every training step


def behaviour_roll_out(env, algo: AlgoSpec, plan: UpdatePlan, logits, mu, task, idx, seed, step):
    """:func:`roll_out` with the behaviour sampler ``mu`` (None: the policy), and ``mu``'s log-distributions at the
    visited nodes (None without a sampler) as a sixth part.

    With ``algo.hint_when = "all_wrong"`` (a one-node task) the groups are drawn from the policy first, and only
    those whose answers are all wrong by the verifier are drawn again from ``mu`` (Guide, arXiv 2506.13923: hints
    for the problems on which all rollouts were incorrect), from the stream at ``step + HINT_STREAM``; the other
    groups' sampler is the policy (their weight is 1)."""
    if mu is None:
        return (*roll_out(env, algo, plan, logits, task, idx, seed, step), None)
    if getattr(algo, "hint_when", "always") != "all_wrong":
        task_b, rollout, logq_old, logq_ref, rows = roll_out(env, algo, plan, logits, task, idx, seed, step, mu=mu)
        return task_b, rollout, logq_old, logq_ref, rows, behaviour_logq(env, plan, mu, idx, rollout)
    task_b, first, logq_old, logq_ref, rows = roll_out(env, algo, plan, logits, task, idx, seed, step, mu=logits)
    second = roll_out(env, algo, plan, logits, task, idx, seed, step + HINT_STREAM, mu=mu)[1]
    hinted = env.answer_correct(task_b, first.answers).max(-1) == 0  # [B]

    def pick(a, b):
        return jnp.where(hinted.reshape(hinted.shape + (1,) * (a.ndim - 1)), b, a)

    rollout = jax.tree_util.tree_map(pick, first, second)
    # one node per prompt: the policy's and the reference's rows do not depend on the answers drawn
    logq_mu = pick(logq_old, behaviour_logq(env, plan, mu, idx, rollout))
    return task_b, rollout, logq_old, logq_ref, rows, logq_mu


# -- score ----------------------------------------------------------------------------------------
def score(env, algo: AlgoSpec, plan: UpdatePlan, arms, arm, seed, step, task_b, rollout, logp_old, logq_old,
          logq_ref, hp: Hyper):
    """``(rewards [B, G], outcome rewards, kl_tok)``: the arm's rewards composed with the terms of
    ``algo.reward`` (:mod:`tabsim.sim.rewards`; none: the arm's rewards), less ``beta`` times the sequence KL
    when the KL sits in the reward (``outcome`` and ``kl_tok`` are then the parts; else None)."""
    policy = (logq_old, rollout.mask) if any(a in arms_mod.POLICY_ARMS for a in arms) else None
    rewards = arms_mod.rewards(arm, seed, step, env, task_b, rollout.answers, hp, arms, policy)
    rewards = rewards_mod.compose(algo.reward, rewards, env=env, task_b=task_b, rollout=rollout, logp_old=logp_old,
                                  hp=hp)
    if algo.kl_placement != "reward":
        return rewards, None, None
    ref_tok = logq_ref[:, None, None, :] if plan.closed else logq_ref
    kl_tok = KL_ESTIMATORS[algo.kl](logp_old, take_logp(ref_tok, rollout.tokens), logq_old, ref_tok)
    return rewards - hp.beta * (kl_tok * rollout.mask).sum(-1), rewards, kl_tok


# -- advantages -----------------------------------------------------------------------------------
def advantage(algo: AlgoSpec, plan: UpdatePlan, rewards, outcome, kl_tok, rollout, hp: Hyper, context=None,
              keep=None, alloc=None):
    """``(adv, valid [B], mask [B, G, T])``: the estimator's advantages, the filter's keep indicator and the
    token mask of the kept groups. ``context``: ``reads -> {field: array}`` (a callable, called only when the
    estimator declared ``reads=``; see :func:`tabsim.sim.algos.context.estimator_context`). ``keep [B]``: a group
    stage's keep indicator (:mod:`tabsim.sim.groups`), multiplying the filter's. ``alloc [B]``: the answers each group
    was allotted (:mod:`tabsim.sim.allocation`): the estimator's statistics over them, the others masked."""
    if alloc is not None:
        adv, degenerate = alloc_mod.advantages(algo.estimator, rewards, alloc, hp)
        valid = 1.0 - hp.filter * degenerate
        return adv, valid, rollout.mask * (valid[:, None] * alloc_mod.answer_mask(alloc, plan.G))[..., None]
    degenerate = zero_variance(rewards)
    valid = 1.0 - hp.filter * degenerate
    if keep is not None:
        valid = valid * keep
    if plan.token_returns:
        adv = TOKEN_RETURNS[algo.estimator](outcome, hp.beta * kl_tok * rollout.mask, mask=rollout.mask,
                                            valid=valid)
    else:
        reads = context_reads(algo.estimator)
        adv = advantages(algo, rewards, lengths=rollout.lengths, valid=valid, hp=hp,
                         context=context(reads) if reads and context is not None else None)
    return adv, valid, rollout.mask * valid[:, None, None]


# -- loss -----------------------------------------------------------------------------------------
def make_gradient(env, algo: AlgoSpec, plan: UpdatePlan):
    """The gradient of the loss: ``grad(logits, idx, batch, hp) -> (g [table], aux)`` on the dense and
    closed-form paths, ``grad(logits, batch, hp) -> (dz [B, G, T, b], aux)`` on the sparse one."""
    if plan.sparse:
        return _row_gradient(env, algo, plan)
    if plan.closed:
        def closed_grad(logits, idx, batch, hp):
            logits_b = logits if plan.full else logits[idx]
            shape = logits_b.shape
            g, aux = closed_form.gradient(algo, logits_b.reshape(shape[0], -1), batch["rollout"].answers,
                                          batch["mask"], batch["adv"], batch["logp_old"], batch["logq_ref"], hp)
            g = g.reshape(shape)
            return (g if plan.full else jnp.zeros_like(logits).at[idx].add(g)), aux

        return closed_grad

    def loss_fn(logits, idx, batch, hp):
        logits_b = logits if plan.full else logits[idx]
        logq = env.token_logq(logits_b, batch["rollout"])
        return policy_loss(algo, logq, batch["rollout"].tokens, batch["mask"], batch["adv"],
                           batch["logp_old"], batch["logq_ref"], hp, uniforms=batch.get("uniforms"))

    return jax.grad(loss_fn, has_aux=True)


def _row_gradient(env, algo: AlgoSpec, plan: UpdatePlan):
    def row_grad(logits, batch, hp):
        """Gradient of the loss with respect to the visited logit rows ``[B, G, T, b]`` (not the table):
        the ``log_softmax`` transpose ``G - softmax sum_a G_a`` of the gradient ``G`` with respect to the
        rows' log-probabilities; a loss that reads only the sampled tokens' ``logp`` has
        ``G = c onehot(token)`` with ``c = dL/dlogp`` per token, so ``c (onehot - softmax)``."""
        # one update per batch: the table is still the rollout's, whose rows were read already
        logq = batch["logq_old"] if plan.single else log_softmax_last(env_rows(logits, batch["rows"]))
        tokens = batch["rollout"].tokens

        def loss(x, **kw):
            return policy_loss(algo, x, tokens, batch["mask"], batch["adv"], batch["logp_old"], batch["logq_ref"],
                               hp, uniforms=batch.get("uniforms"), **kw)

        if plan.logp_only:
            c, aux = jax.grad(lambda lp: loss(None, logp=lp), has_aux=True)(take_logp(logq, tokens))
            return onehot_minus_softmax(c, tokens, logq), aux
        g, aux = jax.grad(loss, has_aux=True)(logq)
        return log_softmax_transpose(g, logq), aux

    return row_grad


# -- update ---------------------------------------------------------------------------------------
def restarted(reset, opt, logits, opt_state):
    """``opt_state``, or ``opt``'s fresh state at ``logits`` where ``reset`` (a KL schedule's reference reset; None:
    no reset)."""
    if reset is None:
        return opt_state
    return jax.tree_util.tree_map(lambda new, old: jnp.where(reset, new, old), opt.init(logits), opt_state)


def apply_updates(algo: AlgoSpec, plan: UpdatePlan, grad, state: TrainState, idx, batch, active, hp: Hyper):
    """``epochs x minibatches`` optimizer steps on the batch: ``(logits, opt_state, diag)``, ``diag`` the step's
    diagnostics of the updates (``clip_frac``, their mean, and what :mod:`tabsim.sim.ratio_spread` adds)."""
    opt = optimizer(algo, hp)
    n_mb, mb = plan.n_mb, plan.mb
    if reads_uniforms(algo.surrogate):  # a surrogate that draws tokens at random (clip_cov): the step's uniforms
        batch = {**batch, "uniforms": step_uniforms(state.seed, state.step, batch["mask"].shape, plan.rng)}

    def one_update(carry, j):
        logits, opt_state = carry
        if n_mb == 1:
            sl_idx, sl = idx, batch
        else:
            start = (j % n_mb) * mb
            take = lambda x: jax.lax.dynamic_slice_in_dim(x, start, mb, axis=0)  # noqa: E731
            sl_idx, sl = take(idx), jax.tree_util.tree_map(take, batch)
        if plan.sparse:
            dz, aux = grad(logits, sl, hp)
            flat = logits.reshape(-1, logits.shape[-1])
            if not plan.dense_grad:  # SGD: add the scaled rows into the table (opt_state is empty)
                logits = flat.at[sl["rows"]].add(-(active * hp.lr) * dz).reshape(logits.shape)
                return (logits, opt_state), aux
            g = jnp.zeros_like(flat).at[sl["rows"]].add(dz).reshape(logits.shape)
        else:
            g, aux = grad(logits, sl_idx, sl, hp)
        if algo.grad_clip:
            g = clip_by_global_norm(g, hp.max_grad_norm)
        step, opt_state = opt.update(g, opt_state)
        logits = logits - active * hp.lr * step
        return (logits, opt_state), aux

    (logits, opt_state), aux = scan(one_update, (state.logits, state.opt_state), algo.epochs * n_mb)
    return logits, opt_state, {"clip_frac": aux["clip_frac"].mean(), **ratio_spread.step_diag(aux)}


def make_update(env, algo: AlgoSpec, schedule: Schedule, arms: tuple[str, ...] = arms_mod.ARMS, *,
                sparse: bool | None = None):
    """One rollout batch: sample, score, advantages, then ``epochs x minibatches`` updates.

    Returns ``update(state, task, arm, hp) -> (state, diagnostics)`` where ``arm`` is a position in
    ``arms``.

    ``sparse`` (default: ``env.sparse_rows``, the multi-node tree) differentiates the loss with respect
    to the logit rows of the visited (prompt, node) pairs, ``[B, G, T, b]``, and scatter-adds the row
    gradients into the flattened table ``[N n_nodes, b]``: O(B G T b) per update instead of a dense
    ``[B, n_nodes, b]`` gradient. Every loss term of :func:`~tabsim.sim.algos.policy_loss` reads the
    policy only through ``log_softmax`` of these rows, so the gradient is the same (the dense path is
    the transpose of the same gather). SGD adds the scaled rows to the table directly; Adam and the
    global-norm clip need the summed gradient table, built by one scatter-add into zeros of the table's
    shape. ``sparse=False`` keeps the dense autodiff path (tests compare the two).
    """
    plan = update_plan(env, algo, schedule, arms, sparse)
    stage = check_group_stage(algo.estimator, schedule.groups, env.max_len)  # per-token advantages rank no answers
    stage.check(plan.G, token_returns=plan.token_returns)
    grad = ratio_spread.wrap(env, plan, make_gradient(env, algo, plan))  # log_ratio_range: the ratios' extremes

    def update(state: TrainState, task, arm, hp: Hyper):
        seed, step = state.seed, state.step
        vas, idx = vas_mod.draw_batch(algo, state, sample_prompts, env, schedule, task, arm, arms, hp)  # prompts
        hp = kl_schedule.hyper(state.kl_state, hp)  # an adaptive beta (tabsim.sim.kl_schedule), else hp itself
        # the answers' sampler (tabsim.sim.behaviour; None: the policy) and the KL's reference (the task's prior,
        # or a schedule's)
        mu = behaviour_mod.table(algo, state.logits, task, state.behaviour, seed, step, hp, env.rng)
        task_b, rollout, logq_old, logq_ref, rows, logq_mu = behaviour_roll_out(
            env, algo, plan, state.logits, mu, kl_schedule.with_reference(state.kl_state, task), idx, seed, step)
        logp_old = take_logp(logq_old, rollout.tokens) if plan.needs_old or mu is not None else None
        is_w = None
        if mu is not None:  # TRL's / verl's importance weights pi_old / mu, and logp_old as the trainer takes it
            logp_mu = take_logp(logq_mu, rollout.tokens)
            is_w, _ = behaviour_mod.weights(algo.is_correction, logp_old, logp_mu, rollout.mask, hp.is_cap)
            if algo.behaviour_old == "behaviour":
                logp_old = logp_mu
        rewards, outcome, kl_tok = score(env, algo, plan, arms, arm, seed, step, task_b, rollout, logp_old,
                                         logq_old, logq_ref, hp)
        keep, reward_mean, drawn = None, rewards.mean(), (idx, rewards if outcome is None else outcome)  # all drawn
        if schedule.refill:  # DAPO's refill: the first B informative of the B + refill candidates
            parts = (idx, task_b, rewards, outcome, kl_tok, rollout, logp_old, logq_old, logq_ref, rows, is_w)
            idx, task_b, rewards, outcome, kl_tok, rollout, logp_old, logq_old, logq_ref, rows, is_w = refill(
                plan.B, rewards, parts)
        if runs_at(stage, "score"):  # the group stage (tabsim.sim.groups): cut answers or mark groups
            ref = None if plan.closed else logq_ref  # the closed form's reference row [B, b] has no answer axis
            parts = (rewards, outcome, kl_tok, rollout, logp_old, logq_old, ref, rows, is_w)
            parts, keep = at_score(stage, plan.G, rewards, outcome, rollout.lengths, parts)
            rewards, outcome, kl_tok, rollout, logp_old, logq_old, ref, rows, is_w = parts
            logq_ref = logq_ref if plan.closed else ref
        context = functools.partial(estimator_context, env, task=task, idx=idx, every=plan.every, logits=state.logits,
                                    rollout=rollout, logq_old=logq_old, logp_old=logp_old, rows=rows)
        alloc = alloc_mod.budgets(algo, state.allocation, idx, plan.G)  # answers per prompt (None: all G)
        adv, valid, mask = advantage(algo, plan, rewards, outcome, kl_tok, rollout, hp, context, keep, alloc)
        adv = adv if state.tracker is None else tracker_mod.advantages(state.tracker, idx, rewards, rollout)  # its baseline
        adv = behaviour_mod.weigh(adv, is_w)  # each token's policy loss times its importance weight
        if runs_at(stage, "advantage"):
            ref = None if plan.closed else logq_ref
            parts = (adv, mask, rollout, logp_old, logq_old, ref, rows)
            adv, mask, rollout, logp_old, logq_old, ref, rows = at_advantage(
                stage, plan.G, rewards if outcome is None else outcome, rollout.lengths, adv, parts)
            logq_ref = logq_ref if plan.closed else ref
        batch = {"rollout": rollout, "mask": mask, "adv": adv, "logp_old": logp_old, "logq_ref": logq_ref}
        if plan.sparse:
            batch["rows"] = rows
            if plan.single:
                batch["logq_old"] = logq_old
        active = (jnp.asarray(arm) != plan.frozen).astype(real())
        logits, opt_state, diag = apply_updates(algo, plan, grad, state, idx, batch, active, hp)
        diag = {"reward_mean": reward_mean, "kept_frac": valid.mean(), **diag, **alloc_mod.useful(env, rewards, alloc)}
        kl_state, reset = kl_schedule.advance(algo, state.kl_state, kl_tok, rollout.mask, logits, step, hp)
        opt_state = restarted(reset, optimizer(algo, hp), logits, opt_state)  # ProRL: restarts with the reference
        return dataclasses.replace(state, logits=logits, opt_state=opt_state, step=step + 1, vas=vas,
                                   behaviour=behaviour_mod.advance(algo, state.behaviour, state.logits, step),
                                   kl_state=kl_state, tracker=tracker_mod.advance(
                                       state.tracker, idx, rewards if outcome is None else outcome, hp.tracker_rho, rollout, hp),
                                   prompt_skip=skip_mod.advance(state.prompt_skip, *drawn, step, hp),
                                   allocation=alloc_mod.record(state.allocation, *drawn, alloc)), diag

    return update
