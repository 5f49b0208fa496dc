"""Core engine: the tabular update, paired arms, expected behaviour of each arm, determinism."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tabsim as ts
from tabsim.runtime.run import schedule
from tabsim.sim import arms as arms_mod
from tabsim.sim.algos import AlgoSpec, advantages, policy_loss, take_logp, zero_variance
from tabsim.sim.engine import TrainState, make_update
from tabsim.sim.params import Hyper
from tabsim.sim.rng import seed_array, seed_words

from f32_tolerance import EPS32, f32_bound, f64_bound  # tests/core: the float32 error bounds
from jit_task import init_task  # tests/core: the task from one compiled program

PAPER_ALGO = AlgoSpec(estimator="grpo", surrogate="reinforce", aggregation="group-sum", kl="ref_ce",
                      kl_placement="loss")


def np_tabular_update(logits, ref, answers, rewards, *, lr, beta, eps, filt):
    """The reference simulator's update (docs/science.md, the reference simulator), written with plain loops."""
    new = logits.copy()
    B, G = answers.shape
    for b in range(B):
        r = rewards[b]
        if filt and r.max() == r.min():
            continue
        adv = (r - r.mean()) / (r.std() + eps)  # population std
        z = logits[b] - logits[b].max()
        pi = np.exp(z) / np.exp(z).sum()
        pi_ref = np.exp(ref[b]) / np.exp(ref[b]).sum()
        grad = np.zeros_like(pi)
        for g in range(G):
            onehot = np.zeros_like(pi)
            onehot[answers[b, g]] = 1.0
            grad += adv[g] * (onehot - pi) / G
        grad -= beta * (pi - pi_ref)
        new[b] += lr * grad
    return new


def update_tolerance(G, lr, beta):
    """Float32 update ``z + lr g`` against the float64 loops, on float32 inputs: ``g`` sums G answers'
    ``A_g (onehot - pi) / G``, terms of size <= lr max|A| / G with max|A| <= sqrt(G - 1) (population std),
    plus the KL's ``beta (pi - pi_ref)`` (<= 2 beta); each advantage takes 2G + 4 roundings (mean, std,
    quotient): about 3G operations in all. The rounding of ``z + lr g`` is ``rtol = EPS32`` (u, doubled)."""
    return f32_bound(3 * G, lr * (np.sqrt(G - 1) + 2 * beta))


def _batch(seed=0, B=6, G=8, K=5):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(B, K)).astype(np.float32)
    ref = rng.normal(size=(B, K)).astype(np.float32)
    answers = rng.integers(0, K, size=(B, G)).astype(np.int32)
    rewards = rng.integers(0, 2, size=(B, G)).astype(np.float32)
    rewards[0] = 1.0  # one zero-variance group
    return logits, ref, answers, rewards


def _jax_update(logits, ref, answers, rewards, hp):
    B, G = answers.shape
    tokens = jnp.asarray(answers)[..., None]
    mask = jnp.ones(tokens.shape, jnp.float32)
    r = jnp.asarray(rewards)
    valid = 1.0 - hp.filter * zero_variance(r)
    adv = advantages(PAPER_ALGO, r, lengths=mask[..., 0], valid=valid, hp=hp)
    K = logits.shape[-1]
    logq_ref = jnp.broadcast_to(jax.nn.log_softmax(jnp.asarray(ref))[:, None, None, :], (B, G, 1, K))
    logp_old = take_logp(jnp.broadcast_to(jax.nn.log_softmax(jnp.asarray(logits))[:, None, None, :], (B, G, 1, K)),
                         tokens)

    def loss(lg):
        logq = jnp.broadcast_to(jax.nn.log_softmax(lg)[:, None, None, :], (B, G, 1, K))
        return policy_loss(PAPER_ALGO, logq, tokens, mask * valid[:, None, None], adv, logp_old, logq_ref, hp)[0]

    # compiled: run eagerly, each operation of the loss and its gradient is compiled on its own
    return jax.jit(loss), jnp.asarray(logits) - hp.lr * jax.jit(jax.grad(loss))(jnp.asarray(logits))


@pytest.mark.parametrize("filt", [0.0, 1.0])
def test_tabular_update_equals_grad_of_surrogate(filt):
    logits, ref, answers, rewards = _batch()
    hp = Hyper(lr=0.05, beta=0.01, filter=filt)
    _, new = _jax_update(logits, ref, answers, rewards, hp)
    expect = np_tabular_update(logits, ref, answers, rewards, lr=0.05, beta=0.01, eps=1e-8, filt=bool(filt))
    np.testing.assert_allclose(np.asarray(new), expect, rtol=EPS32, atol=update_tolerance(8, 0.05, 0.01))


def test_gradient_matches_finite_differences():
    logits, ref, answers, rewards = _batch(1)
    hp = Hyper(lr=1.0, beta=0.01, filter=1.0)
    with jax.enable_x64(True):
        lg = jnp.asarray(logits, jnp.float64)
        loss, _ = _jax_update(lg, ref.astype(np.float64), answers, rewards.astype(np.float64), hp)
        g = np.asarray(jax.grad(loss)(lg))
        h = 1e-4  # near the h that balances the two errors below, (3 roundoff / |L'''|)^(1/3)
        fd = np.zeros_like(g)
        for i in range(lg.shape[0]):
            for j in range(lg.shape[1]):
                e = np.zeros(lg.shape)
                e[i, j] = h
                fd[i, j] = (float(loss(lg + e)) - float(loss(lg - e))) / (2 * h)
    # central differences err by h^2/6 |L'''| plus the loss's roundoff over h: d^3 log pi_a / dz_j^3 =
    # -pi_j (1 - pi_j)(1 - 2 pi_j), |.| <= 1/(6 sqrt 3), on a row's weights mean|A| <= 1 and beta; the
    # float64 loss sums B G answers and B K reference terms (<= (1 + beta) max|log pi| a row), z +- h rounds
    B, K = logits.shape
    log_pi = logits - np.log(np.exp(logits.astype(np.float64)).sum(-1, keepdims=True))
    roundoff = f64_bound(B * (answers.shape[1] + 3 * K) + 10, B * (1 + hp.beta) * np.abs(log_pi).max())
    step_error = f64_bound(1, np.abs(logits).max() + h) * np.abs(g).max()  # z + h - (z - h) is not 2h exactly
    tol = h ** 2 / 6 * (1 + hp.beta) / (6 * np.sqrt(3)) + (roundoff + step_error) / h
    np.testing.assert_allclose(g, fd, rtol=0, atol=tol)


def test_engine_step_matches_reference_update():
    """One engine step (the paper preset) equals the loop reference applied to the same rollout."""
    cfg = ts.resolve({"preset": "paper", "train": {"steps": 1}})
    env = ts.make_env(cfg)
    hp = Hyper(**cfg.hyper_values({"prior_strength": 0.5}))
    hp = jax.tree_util.tree_map(jnp.asarray, hp)
    seed = seed_words(3)
    task = init_task(env, seed, hp)
    update = jax.jit(make_update(env, PAPER_ALGO, schedule(cfg)), static_argnums=2)
    state = TrainState(logits=task.prior_logits, opt_state=(), seed=seed, step=jnp.zeros((), jnp.int32))
    arm = arms_mod.arm_id("true")
    new_state, _ = update(state, task, arm, hp)
    # replay the same draws outside the engine
    from tabsim.sim import rng as R
    idx = np.asarray(jax.lax.top_k(R.uniform(seed, (env.n_prompts,), step=0, tag=R.BATCH), 16)[1])
    lb = np.asarray(task.prior_logits)[idx]
    roll = jax.jit(env.rollout, static_argnums=3)(seed, 0, jnp.asarray(lb), 8)
    task_b = jax.tree_util.tree_map(lambda x: x[idx], task)
    rew = np.asarray(jax.jit(lambda *a: arms_mod.rewards(arm, *a[:2], env, *a[2:]))(seed, 0, task_b, roll.answers, hp))
    ref_new = np.asarray(task.prior_logits).copy()
    ref_new[idx] = np_tabular_update(lb, lb, np.asarray(roll.answers), rew, lr=0.05, beta=0.01, eps=1e-8, filt=True)
    np.testing.assert_allclose(np.asarray(new_state.logits), ref_new, rtol=EPS32, atol=update_tolerance(8, 0.05, 0.01))


def test_grpo_advantages_sum_to_zero_per_group():
    rng = np.random.default_rng(0)
    r = jnp.asarray(rng.integers(0, 2, size=(64, 8)).astype(np.float32))
    for ddof in (0.0, 1.0):
        adv = advantages(AlgoSpec(), r, lengths=jnp.ones_like(r), valid=jnp.ones(64), hp=Hyper(std_ddof=ddof))
        # G = 8 terms with sum|A| <= G (their RMS is at most 1): G eps G for the sum, and each A's own
        # roundings plus the shift of the mean (a G-term sum) divided by the std: G (G + 1) eps in all
        np.testing.assert_allclose(np.asarray(adv).sum(-1), 0.0, atol=f32_bound(8 * 9, 1.0))


SMALL = {"preset": "paper", "train": {"seeds": 4, "steps": 60}}


@pytest.fixture(scope="module")
def paired():
    return ts.run(SMALL, arms={"arms": ["frozen", "random", "majority", "true"]},
                  sweep={"prior_strength": [0.2, 0.8]})


def test_frozen_leaves_policy_unchanged(paired):
    f = paired.frame[paired.frame.arm == "frozen"]
    for (_, _), g in f.groupby(["prior_strength", "seed"]):
        assert np.allclose(g.pass1, g.pass1.iloc[0], atol=0)
        assert np.allclose(g.entropy, g.entropy.iloc[0], atol=0)


def test_true_raises_pass1(paired):
    fin = paired.final().pivot_table(index=["prior_strength", "seed"], columns="arm", values="pass1", observed=True)
    assert (fin["true"] > fin["frozen"] + 0.02).all()


def test_majority_follows_the_mode(paired):
    fin = paired.final().pivot_table(index=["prior_strength", "seed"], columns="arm", values="pass1", observed=True)
    # p_s = 0.2: the modal answer is the boosted wrong one -> majority lowers accuracy; 0.8: mode correct
    assert (fin.loc[0.2, "majority"] < fin.loc[0.2, "frozen"]).all()
    assert (fin.loc[0.8, "majority"] > fin.loc[0.8, "frozen"]).all()


def test_arms_share_sampling_randomness():
    """Common random numbers: at step 1 every arm samples from the same policy with the same uniforms,
    so their first rollout answers coincide; only rewards differ."""
    cfg = ts.resolve({"preset": "paper"})
    env = ts.make_env(cfg)
    hp = Hyper(**cfg.hyper_values())
    seed = seed_words(0)
    task = init_task(env, seed, hp)
    rollout = jax.jit(env.rollout, static_argnums=3)
    r1 = rollout(seed, 0, task.prior_logits[:16], 8).answers
    r2 = rollout(seed, 0, task.prior_logits[:16], 8).answers
    assert (np.asarray(r1) == np.asarray(r2)).all()
    all_rewards = jax.jit(lambda seed, step, *a: arms_mod.all_rewards(seed, step, env, *a))
    allr = np.asarray(all_rewards(seed, 0, jax.tree_util.tree_map(lambda x: x[:16], task), r1, hp))
    assert allr.shape == (len(arms_mod.ARMS), 16, 8)


def test_random_arm_has_zero_expected_logit_drift():
    """On-policy, unclipped, RANDOM reward: E[update] = 0 exactly (rewards independent of answers, and
    the group advantage is centred). Run many seeds of one step; the mean change of each logit must be
    within 4 standard errors of 0 (|z| > 4 has probability 6e-5 per coordinate under the null)."""
    cfg = ts.resolve({"preset": "paper", "algo": {"beta": 0.0}, "arms": {"arms": ["random"]},
                      "train": {"seeds": 2000, "steps": 1}})
    env = ts.make_env(cfg)
    hp = jax.tree_util.tree_map(jnp.asarray, Hyper(**cfg.hyper_values()))
    update = make_update(env, PAPER_ALGO, schedule(cfg))
    arm = arms_mod.arm_id("random")

    def one(seed):
        task = env.init_task(seed, hp)
        st = TrainState(logits=task.prior_logits, opt_state=(), seed=seed, step=jnp.zeros((), jnp.int32))
        new, _ = update(st, task, arm, hp)
        # drift in the frame of answer identity: sort each prompt's answers by correctness
        d = new.logits - task.prior_logits
        return (d * task.correct).sum(-1) / 2.0 - (d * (1 - task.correct)).sum(-1) / 6.0

    seeds = jnp.asarray(seed_array(range(2000)))  # built on the host: no 2,000-input stack to compile
    drift = np.asarray(jax.jit(jax.vmap(one))(seeds))  # [S, N]
    per_seed = drift.mean(-1)
    z = per_seed.mean() / (per_seed.std(ddof=1) / np.sqrt(len(per_seed)))
    assert abs(z) < 4.0, z
    assert per_seed.std() > 0  # the arm really moved the policy


def test_deterministic():
    a = ts.run(SMALL, train={"seeds": 2, "steps": 20}).frame
    b = ts.run(SMALL, train={"seeds": 2, "steps": 20}).frame
    import pandas.testing as pdt
    pdt.assert_frame_equal(a, b)
    c = ts.run(SMALL, train={"seeds": 2, "steps": 20, "seed": 5}).frame
    assert not np.allclose(a.pass1.values, c.pass1.values)


def test_all_arms_run_and_move_as_expected():
    res = ts.run({"preset": "paper", "arms": {"arms": list(ts.ARMS), "fpr": 0.1, "fnr": 0.1},
                  "task": {"prior_strength": 0.5, "heterogeneity": 10.0}, "train": {"seeds": 3, "steps": 60}})
    fin = res.final().groupby("arm", observed=True).pass1.mean()
    assert np.isfinite(res.frame.select_dtypes("number").drop(columns=["reward_mean", "kept_frac", "clip_frac"]).values).all()
    assert fin["true"] > fin["frozen"] and fin["noisy"] > fin["frozen"]
    assert fin["incorrect"] < fin["frozen"]  # trained toward wrong labels
    fm = res.final().groupby("arm", observed=True).format_mass.mean()
    assert fm["format"] > fm["frozen"]


def test_registry_envs_compile_once_and_are_finite():
    """Every registered environment: jit, vmap over seeds, finite metrics, no recompilation."""
    for name in ts.ENVS:
        cfg = ts.resolve({"task": {"env": name}, "train": {"seeds": 2, "steps": 4, "batch_size": 4}})
        train = ts.compiled_train(cfg)
        from tabsim.sim.params import stack_hypers
        seeds = jnp.asarray(seed_array(range(2)))
        out = train(seeds, stack_hypers([cfg.hyper_values()]))
        assert all(np.isfinite(np.asarray(v)[..., -1]).all() for v in out.values())
        n = train._cache_size()
        train(seeds, stack_hypers([cfg.hyper_values({"lr": 0.1})]))
        assert train._cache_size() == n


def test_import_and_a_run_leave_the_environment_alone():
    """``import tabsim`` and a run change no environment variable (no process-wide XLA flags: a
    user's other JAX programs, and an XLA that no longer knows a flag, are not tabsim's to break)."""
    import os
    import subprocess
    import sys

    code = ("import os, json; before = dict(os.environ)\n"
            "import tabsim as ts\n"
            "after_import = dict(os.environ)\n"
            "ts.run({'task': {'n_prompts': 4}, 'train': {'steps': 2, 'batch_size': 2, 'seeds': 1, 'eval_every': 2}},"
            " progress=False)\n"
            "print(json.dumps([after_import == before, dict(os.environ) == before]))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "TABSIM_XLA_DEFAULTS", "TABSIM_DEVICE")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[true, true]"


def test_an_unknown_compile_option_is_dropped_with_one_line(tmp_path, monkeypatch, capfd):
    """A tuning option the running XLA does not know (as ``xla_cpu_use_fusion_emitters`` is unknown from
    jaxlib 0.11) is tried once, dropped with one line on stderr, and remembered on disk; the program
    runs with the options that are left and gives the numbers it gives without the unknown one. A name
    XLA does not know is never asked about again, whatever its value."""
    from tabsim.base import xla
    from tabsim.sim import engine
    from tabsim.sim.params import stack_hypers
    from tabsim.runtime import cache
    from tabsim.runtime.run import algo_spec

    monkeypatch.setattr(cache, "current_folder", lambda: tmp_path)
    monkeypatch.setattr(xla, "_notes", True)  # a command run in this process with -q turns the notes off
    xla.forget()
    monkeypatch.setattr(xla, "_try", counting := _CountingTry(xla._try))
    cfg = ts.resolve({"task": {"n_prompts": 4}, "train": {"steps": 2, "batch_size": 2, "seeds": 1, "eval_every": 2}})
    env = ts.make_env(cfg)
    plain = ts.make_train(env, algo_spec(cfg), schedule(cfg), ("true",))
    seeds = jnp.asarray(seed_array(range(1)))
    hp = stack_hypers([cfg.hyper_values()])
    want = jax.device_get(plain(seeds, hp))
    capfd.readouterr()

    bogus = "xla_tabsim_no_such_option"
    monkeypatch.setattr(engine, "BANDIT_COMPILER_OPTIONS", {**(engine.BANDIT_COMPILER_OPTIONS or {}), bogus: True})
    train = ts.make_train(env, algo_spec(cfg), schedule(cfg), ("true",))
    assert bogus not in (train.xla_options or {})
    got = jax.device_get(train(seeds, hp))
    assert all(np.array_equal(got[k], want[k], equal_nan=True) for k in want)
    err = capfd.readouterr().err
    assert err.count(bogus) == 1 and "does not accept compile option" in err
    assert (tmp_path / xla.FILE).exists()
    assert f"{bogus}=true" in xla.dropped()
    # another value of the unknown name: refused without asking XLA
    asked = counting.names.count(bogus)
    assert not xla.accepts(bogus, False) and counting.names.count(bogus) == asked
    # a new process (the answers of this one forgotten) reads the answer from disk: no second line, no try
    xla.forget()
    ts.make_train(env, algo_spec(cfg), schedule(cfg), ("true",))
    assert bogus not in capfd.readouterr().err and counting.names.count(bogus) == asked
    xla.forget()


class _CountingTry:
    def __init__(self, try_):
        self.try_, self.names = try_, []

    def __call__(self, name, value):
        self.names.append(name)
        return self.try_(name, value)


def test_tuning_off_gives_programs_no_options(monkeypatch):
    from tabsim.base import xla

    monkeypatch.setenv(xla.ENV, "0")
    assert xla.program_options(xla.CPU_TUNING) is None and xla.program_options(xla.TREE_TUNING) is None


def test_compilation_cache_reuses_programs_across_processes(tmp_path):
    """With TABSIM_COMPILATION_CACHE and the executable layer off, a second process loads the compiled
    program from JAX's own cache (a cache hit) and gives the same numbers as the first process and as
    this one. The executable layer across processes: tests/runtime/test_executables.py and
    tests/cli/test_startup.py."""
    import os
    import subprocess
    import sys

    code = ("import logging, io, jax, tabsim as ts\n"
            "jax.config.update('jax_log_compiles', True)\n"
            "buf = io.StringIO(); logging.getLogger('jax').addHandler(logging.StreamHandler(buf))\n"
            "r = ts.run({'task': {'n_prompts': 8}, 'train': {'steps': 4, 'batch_size': 4, 'seeds': 2}},"
            " progress=False)\n"
            "from tabsim.runtime import executables\n"
            "print(r.final().pass1.round(7).tolist()); print('HIT' if 'cache hit' in buf.getvalue() else 'MISS',"
            " executables.stats['loaded'])\n")
    env = dict(os.environ)
    # the numbers compiled in this process, against which the processes reading the caches are compared
    plain = str(ts.run({'task': {'n_prompts': 8}, 'train': {'steps': 4, 'batch_size': 4, 'seeds': 2}},
                       progress=False).final().pass1.round(7).tolist())
    cache = tmp_path / "jax_only"
    env.update(TABSIM_COMPILATION_CACHE=str(cache), TABSIM_EXECUTABLE_CACHE="0")
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert any(cache.iterdir())
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    lines = [p.stdout.strip().splitlines() for p in (first, second)]
    assert plain == lines[0][0] == lines[1][0]
    assert (lines[0][1], lines[1][1]) == ("MISS 0", "HIT 0")


def test_compilation_cache_refuses_a_path_that_is_not_a_folder(tmp_path):
    from click.testing import CliRunner

    from tabsim.cli import main

    f = tmp_path / "file"
    f.write_text("x")
    res = CliRunner().invoke(main, ["--compile-cache", str(f / "sub"), "run", "missing.toml"])
    assert res.exit_code != 0 and "--compile-cache" in res.output
    with pytest.raises(ValueError, match="compilation cache"):
        ts.enable_compilation_cache(f)


@pytest.mark.parametrize("env", ["bandit", "tree"])
def test_train_metrics_selects_answer_level_metrics(env):
    """``train.metrics`` records a subset; what is recorded is unchanged (same numbers as a full run)."""
    base = {"preset": "paper", "task": {"env": env, "n_prompts": 8, "n_answers": 4},
            "train": {"seeds": 2, "steps": 6, "batch_size": 4, "eval_every": 3, "pass_k": [2]}}
    full = ts.run(base, progress=False).frame
    some = ts.run({**base, "train": {**base["train"], "metrics": ["kl_ref", "pass1"]}}, progress=False).frame
    dropped = {"entropy", "mode_correct", "format_mass"}
    assert dropped <= set(full.columns) and not dropped & set(some.columns)
    for col in ("pass1", "kl_ref", "pass@2", "reward_mean"):
        np.testing.assert_array_equal(some[col].values, full[col].values)
    if env == "tree":
        assert "len_mean" in some.columns  # the tree's own metrics stay


@pytest.mark.parametrize("metrics,match", [(["pass1", "accuracy"], "train.metrics.*accuracy.*allowed: .*entropy"),
                                           ([], "train.metrics.*at least one")])
def test_train_metrics_refuses_unknown_names(metrics, match):
    with pytest.raises(ts.ConfigError, match=match):
        ts.resolve({"train": {"metrics": metrics}})


def test_stack_hypers_reads_each_rows_values_whether_rows_share_a_mapping_or_not():
    """A chunk repeats one mapping per seed; the stacked values are each row's own, row for row, as if
    every row were read, for rows that are one object, equal copies or different mappings."""
    from tabsim.sim.params import HYPER_FIELDS, Hyper, stack_hypers

    base = {name: 0.5 for name in HYPER_FIELDS}
    a, b = {**base, "lr": 0.1, "prior_strength": 0.8}, {**base, "lr": 1 / 3, "prior_strength": "0.35"}
    rows = [a, a, b, dict(a), b, a, {**b, "filter": 0}]
    for shared in ((), ("gamma",)):
        got = stack_hypers(rows, shared)
        for name in HYPER_FIELDS:
            value = getattr(got, name)
            if name in shared:
                assert value.shape == () and value == np.float32(rows[0][name])
            else:
                want = np.asarray([float(r[name]) for r in rows], dtype=np.float32)
                assert value.dtype == np.float32 and value.tobytes() == want.tobytes(), name
    assert isinstance(got, Hyper) and stack_hypers([], ()).lr.shape == (0,)
