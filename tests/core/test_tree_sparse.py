"""Sparse tree updates: the engine's row-gradient path (differentiate at the visited rows, scatter-add them
into the table) against the dense autodiff path through the table, one update at a time."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tabsim as ts
from tabsim.runtime import run as api
from tabsim.sim.engine import TrainState, make_update, optimizer
from tabsim.sim.params import Hyper
from tabsim.sim.rng import seed_array
from tabsim.sim.update import sample_prompts

from f32_tolerance import f32_bound  # tests/core: the float32 error bounds
from jit_task import init_task  # tests/core: the task from one compiled program
from update_tolerance import engine_update_tolerance

TREE = {"env": "tree", "n_prompts": 12, "n_answers": 6, "n_correct": 2, "heterogeneity": 8.0,
        "tree": {"depth": 3, "branching": 3, "length_slope_wrong": 1.0}}
CONFIGS = {
    "grpo-clip-k3-loss": {"preset": "grpo"},
    # heavy: the clip without a KL runs by default in clip-reuse-sample
    "grpo-clip-nokl": {"preset": "grpo", "algo": {"kl_placement": "none"}},
    # heavy: another aggregation of the same rows; grpo-clip-k3-loss runs the on-policy row path by default
    "dr_grpo": {"preset": "dr_grpo"},
    "gspo-reuse": {"preset": "gspo", "algo": {"epochs": 3}},
    "cispo-exact-kl-entropy-minibatches": {"preset": "cispo", "algo": {"kl_placement": "loss", "kl": "exact",
                                                                       "beta": 0.05, "ent_coef": 0.01,
                                                                       "epochs": 2, "minibatches": 2}},
    # heavy: a KL over each visited row's whole distribution runs by default with the exact KL (cispo-exact-...)
    "cispo-ref_ce-kl": {"preset": "cispo", "algo": {"kl_placement": "loss", "kl": "ref_ce", "beta": 0.1}},
    "rloo-reward-kl": {"preset": "rloo"},
    # lr 3 is enough for reuse to clip; each step's Lipschitz constant (lr D 2.5, see update_tolerance) sets
    # how far float32 noise may grow over the 4 steps, and lr 30 would let it reach the step itself
    "clip-reuse-sample": {"preset": "grpo", "algo": {"kl_placement": "none", "epochs": 2, "minibatches": 2,
                                                             "lr": 3.0},
                          "train": {"batch_size": 8}},
    # Adam and the clip read the summed gradient table; a large eps keeps Adam's g / (|g| + eps) from
    # amplifying float32 noise in gradients that are 0 in exact arithmetic (see test_closed_form) by more
    # than lr / eps = 5
    "adam-gradclip-replacement": {"preset": "grpo", "algo": {"optimizer": "adam", "adam_eps": 1e-1,
                                                             "max_grad_norm": 0.5, "lr": 0.5, "epochs": 2},
                                  "train": {"batch_size": 8, "replacement": True}},
}


def _setup(name):
    cfg = CONFIGS[name]
    c = ts.config.resolve({**cfg, "task": TREE, "arms": {"arms": ["random", "true"]},
                           "train": {"seeds": 1, "steps": 4, "batch_size": 12, "group_size": 6,
                                     **cfg.get("train", {})}})
    env, spec, sched = api.make_env(c), api.algo_spec(c), api.schedule(c)
    hp = Hyper(**c.hyper_values(c.grid()[0]))
    return c, env, spec, sched, hp


HEAVY = {"grpo-clip-nokl", "dr_grpo", "cispo-ref_ce-kl"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.heavy if n in HEAVY else ()) for n in CONFIGS])
def test_sparse_update_equals_dense_update(name):
    """One engine update (rollout, rewards, advantages, epochs x minibatches, optimizer) from the same
    perturbed table through both paths: the same table, optimizer state and clip fraction up to float32
    rounding."""
    c, env, spec, sched, hp = _setup(name)
    assert env.sparse_rows and env.n_nodes == 7
    seed = jnp.asarray(seed_array([3])[0])
    task = init_task(env, seed, hp)
    rng = np.random.default_rng(1)
    logits = task.prior_logits + jnp.asarray(rng.normal(scale=0.7, size=task.prior_logits.shape), jnp.float32)
    results = {}
    for sparse in (True, False):
        update = jax.jit(make_update(env, spec, sched, tuple(c.arms.arms), sparse=sparse))
        outs = []
        for step in range(3):
            state = TrainState(logits=logits, opt_state=optimizer(spec, hp).init(logits), seed=seed,
                               step=jnp.asarray(step, jnp.int32))
            for arm in range(2):
                new, diag = update(state, task, arm, hp)
                outs.append((np.asarray(new.logits), [np.asarray(x) for x in jax.tree_util.tree_leaves(new.opt_state)],
                             float(diag["clip_frac"]), float(diag["reward_mean"])))
        results[sparse] = outs
    # float32 on both paths: the bound of the update's terms (see update_tolerance), with a prompt drawn
    # `repeats` times into one batch at most; the clip fraction counts the same 0/1 indicators (exact
    # sums) and rounds only its means over tokens and over the steps
    repeats = max(np.bincount(np.asarray(sample_prompts(env, sched, seed, jnp.asarray(s)))).max() for s in range(3))
    moved = max(np.abs(b - np.asarray(logits)).max() for b, *_ in results[False])
    tol = engine_update_tolerance(spec, sched, hp, logits, task.prior_logits, repeats, moved)
    clipped = 0.0
    for (a, oa, ca, ra), (b, ob, cb, rb) in zip(results[True], results[False]):
        assert ra == rb  # same rollout and rewards
        np.testing.assert_allclose(a, b, rtol=0, atol=tol["table"])
        for x, y in zip(oa, ob):
            np.testing.assert_allclose(x, y, rtol=0, atol=tol["opt"])
        assert ca == pytest.approx(cb, abs=f32_bound(spec.epochs * spec.minibatches + 1, 1.0))
        clipped = max(clipped, ca)
    assert moved > 1e-3  # the updates do move the table
    if spec.epochs > 1 and spec.surrogate == "clip":
        assert clipped > 0  # reuse makes the ratio (and its clip) matter


# heavy: a property of two compiled programs' memory; the sparse path's results are checked by default
@pytest.mark.heavy
def test_sparse_update_builds_no_dense_gradient():
    """The SGD update of a larger tree has no temporary of the table's size: the dense path's
    ``[B, n_nodes, b]`` gradient (a scatter into zeros) is gone, and the row path is exact."""
    c = ts.config.resolve({"preset": "grpo", "algo": {"kl_placement": "none"},
                           "task": {**TREE, "n_prompts": 64, "tree": {"depth": 5, "branching": 4}},
                           "arms": {"arms": ["true"]}, "train": {"seeds": 1, "batch_size": 8, "group_size": 4}})
    env, spec, sched = api.make_env(c), api.algo_spec(c), api.schedule(c)
    hp = Hyper(**c.hyper_values(c.grid()[0]))
    seed = jnp.asarray(seed_array([0])[0])
    task = env.init_task(seed, hp)
    state = TrainState(logits=task.prior_logits, opt_state=optimizer(spec, hp).init(task.prior_logits),
                       seed=seed, step=jnp.zeros((), jnp.int32))
    table = task.prior_logits.size * 4
    temp = {}
    for sparse in (True, False):
        fn = jax.jit(make_update(env, spec, sched, ("true",), sparse=sparse), static_argnums=2, donate_argnums=0)
        compiled = fn.lower(state, task, 0, hp).compile()
        temp[sparse] = compiled.memory_analysis().temp_size_in_bytes
    assert temp[False] >= table  # the dense gradient
    assert temp[True] < table / 4, temp


# heavy: the path of trees too large to vmap all runs at once, forced on a small one (two tree compilations)
@pytest.mark.heavy
def test_grouped_runs_equal_vmapped_runs(monkeypatch):
    """Trees whose runs' tables exceed ``RUN_GROUP_BYTES`` train in sequential groups of vmapped runs
    (here 4 + 2 of 6): the same history as all runs vmapped together."""
    from tabsim.sim import engine

    c = ts.config.resolve({"preset": "grpo", "task": TREE, "arms": {"arms": ["random", "true"]},
                           "train": {"seeds": 3, "steps": 6, "eval_every": 3, "batch_size": 8, "group_size": 6}})
    env, spec, sched = api.make_env(c), api.algo_spec(c), api.schedule(c)
    seeds = jnp.asarray(seed_array([0, 1, 2]))
    from tabsim.sim.params import stack_hypers

    hp = stack_hypers([c.hyper_values()])
    table = int(np.prod(env.table_shape)) * 4
    out, loops = {}, {}
    for name, limit in (("vmapped", 10**12), ("grouped", 4 * table)):
        monkeypatch.setattr(engine, "RUN_GROUP_BYTES", limit)
        train = engine.make_train(env, spec, sched, tuple(c.arms.arms))
        loops[name] = train.lower(seeds, hp).as_text().count("stablehlo.while")
        out[name] = jax.tree_util.tree_map(np.asarray, train(seeds, hp))
    assert loops["grouped"] > loops["vmapped"], loops  # the map over groups is a loop of its own
    for k in out["vmapped"]:
        np.testing.assert_allclose(out["grouped"][k], out["vmapped"][k], rtol=1e-5, atol=1e-6, err_msg=k)
    assert np.ptp(out["vmapped"]["pass1"][..., -1]) > 0  # runs differ: a mix-up of runs would show
