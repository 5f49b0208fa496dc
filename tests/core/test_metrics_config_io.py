"""Exact metrics against Monte Carlo, config validation at the edge, results round trip, CLI."""
import json

import jax
import jax.numpy as jnp
import numpy as np
import pandas.testing as pdt
import pytest
from click.testing import CliRunner

import tabsim as ts
from tabsim.cli import main
from tabsim.sim.envs.bandit import BanditEnv, compositions
from tabsim.sim.params import Hyper
from tabsim.sim.rng import seed_words

from f32_tolerance import f32_bound  # tests/core: the float32 error bounds
from jit_task import init_task  # tests/core: the task from one compiled program


def test_compositions_count_and_sum():
    c = compositions(4, 5)
    assert c.shape == (70, 5) and (c.sum(1) == 4).all() and len({tuple(r) for r in c}) == 70


@pytest.mark.parametrize("tie", ["random", "lowest"])
def test_exact_pass_and_maj_match_monte_carlo(tie):
    env = BanditEnv(n_prompts=6, n_answers=5, n_correct=2, tie=tie, pass_k=(3,), maj_k=(4,))
    hp = Hyper(prior_strength=0.45, format_boost=0.5)
    task = init_task(env, seed_words(1), hp)
    noise = jax.jit(jax.random.normal, static_argnums=1)(jax.random.key(0), task.prior_logits.shape)
    logits = task.prior_logits + noise
    exact = {k: float(v) for k, v in jax.jit(env.evaluate)(logits, task, hp).items()}
    rng = np.random.default_rng(0)
    p = np.asarray(jax.nn.softmax(logits))
    corr = np.asarray(task.correct)
    M = 40000
    maj, pk = np.zeros(6), np.zeros(6)
    for n in range(6):
        draws = np.stack([rng.choice(5, size=M, p=p[n] / p[n].sum()) for _ in range(4)], 1)
        counts = np.stack([(draws == a).sum(1) for a in range(5)], 1)
        top = counts == counts.max(1, keepdims=True)
        if tie == "random":
            credit = (top * corr[n]).sum(1) / top.sum(1)
        else:
            credit = corr[n][top.argmax(1)]
        maj[n] = credit.mean()
        pk[n] = corr[n][draws[:, :3]].max(1).mean()
    # Monte Carlo s.e. of a mean of M bounded draws <= 0.5/sqrt(M) per prompt, /sqrt(6) for the average;
    # 4 s.e. tolerance
    tol = 4 * 0.5 / np.sqrt(M * 6)
    assert abs(exact["maj@4"] - maj.mean()) < tol
    assert abs(exact["pass@3"] - pk.mean()) < tol
    # float32 on both sides: the softmax (~A + 2 = 7 roundings), the sum over A = 5 answers and the mean over
    # 6 prompts: 16 operations; the terms are >= 0, so sum|terms| is pass@1 itself
    assert abs(exact["pass1"] - (p * corr).sum(1).mean()) < f32_bound(16, exact["pass1"])


def test_heterogeneous_prior_has_requested_mean_and_spread():
    env = BanditEnv(n_prompts=4000, n_answers=8, n_correct=2, heterogeneous=True)
    hp = Hyper(prior_strength=0.3, heterogeneity=10.0)
    task = init_task(env, seed_words(0), hp)
    p = np.asarray(task.prompt_strength)
    # Beta(3, 7): mean 0.3, var = 0.21 / 11; s.e. of the mean = sqrt(var / 4000) ~ 0.0022
    assert abs(p.mean() - 0.3) < 4 * np.sqrt(0.21 / 11 / 4000)
    assert abs(p.var() - 0.21 / 11) < 0.003


@pytest.mark.parametrize("bad, field", [
    ({"task": {"prior_strength": 1.2}}, "task.prior_strength"),
    ({"task": {"prior_strength": 0.0}}, "task.prior_strength"),
    ({"task": {"n_correct": 8, "n_answers": 8}}, "n_correct must be < n_answers"),
    ({"train": {"group_size": 1}}, "train.group_size"),
    ({"train": {"batch_size": 50}}, "train.batch_size must be <= task.n_prompts"),
    ({"algo": {"lr": 0.0}}, "algo.lr"),
    ({"algo": {"lr": -1}}, "algo.lr"),
    ({"arms": {"arms": ["frozen", "oracle"]}}, "unknown arm 'oracle'"),
    ({"algo": {"estimator": "ppo"}}, "unknown estimator 'ppo'"),
    ({"preset": "nope"}, "preset: unknown preset 'nope'"),
    ({"sweep": {"prior_strength": [0.2, 1.5]}}, "sweep.prior_strength[1]"),
    ({"sweep": {"n_prompts": [10, 20]}}, "sweep.n_prompts: task.n_prompts is a static field"),
    ({"sweep": {"heterogeneity": [1.0, 50.0]}}, "sweep.heterogeneity: the prior is homogeneous"),
    ({"task": {"nprompts": 3}}, "task.nprompts"),
])
def test_bad_config_is_refused_naming_the_field(bad, field):
    with pytest.raises(ts.ConfigError) as err:
        ts.resolve({"preset": "paper", **bad} if "preset" not in bad else bad)
    assert field in str(err.value)


def test_malformed_config_file(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("[task\nprior_strength = 0.3\n")
    with pytest.raises(ts.ConfigError, match="malformed config file"):
        ts.load_config(p)
    q = tmp_path / "bad.yaml"
    q.write_text("task: [1, 2\n")
    with pytest.raises(ts.ConfigError, match="malformed config file"):
        ts.load_config(q)
    r = tmp_path / "x.ini"
    r.write_text("{}")
    with pytest.raises(ts.ConfigError, match="unknown config format"):
        ts.load_config(r)


def test_yaml_is_parsed_safely(tmp_path):
    p = tmp_path / "evil.yaml"
    p.write_text("preset: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(ts.ConfigError):
        ts.load_config(p)


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_results_round_trip(tmp_path, fmt):
    res = ts.run({"preset": "paper", "train": {"seeds": 2, "steps": 10, "eval_every": 5},
                  "sweep": {"prior_strength": [0.3, 0.7]}})
    res.save(tmp_path, fmt=fmt)
    back = ts.Result.load(tmp_path)
    a = res.frame.assign(arm=res.frame.arm.astype(str))
    b = back.frame.assign(arm=back.frame.arm.astype(str))
    pdt.assert_frame_equal(a, b, check_dtype=False)
    assert back.config == res.config
    prov = json.loads((tmp_path / "provenance.json").read_text())
    for key in ("tabsim_version", "git_commit", "config_hash", "seeds", "time_utc"):
        assert key in prov


def test_cli_run_and_errors(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('preset = "paper"\n[train]\nseeds = 2\nsteps = 10\n[sweep]\nprior_strength = [0.3, 0.8]\n')
    r = CliRunner().invoke(main, ["run", str(cfg), "--out", str(tmp_path / "o"), "-q"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "o" / "results.parquet").exists() and (tmp_path / "o" / "pass1.png").exists()
    bad = tmp_path / "b.toml"
    bad.write_text('preset = "paper"\n[task]\nprior_strength = 2.0\n')
    r = CliRunner().invoke(main, ["run", str(bad), "--out", str(tmp_path / "o2")])
    assert r.exit_code != 0 and "task.prior_strength" in r.output
    assert not (tmp_path / "o2").exists()
    r = CliRunner().invoke(main, ["sweep", "--vary", "prior_strength=0.3,0.6", "--seeds", "2", "--steps", "10",
                                  "--out", str(tmp_path / "s"), "-q"])
    assert r.exit_code == 0, r.output
    for cmd in (["--help"], ["run", "--help"], ["sweep", "--help"]):
        assert CliRunner().invoke(main, cmd).exit_code == 0


def test_cli_sweep_keeps_the_config_files_preset_and_sweep(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('preset = "dapo"\n[train]\nseeds = 2\nsteps = 10\n[sweep]\nlr = [0.4, 0.8]\n')
    r = CliRunner().invoke(main, ["sweep", "--config", str(cfg), "--out", str(tmp_path / "a"), "-q"])
    assert r.exit_code == 0, r.output
    saved = json.loads((tmp_path / "a" / "config.json").read_text())
    assert saved["preset"] == "dapo" and saved["sweep"] == {"lr": [0.4, 0.8]} and saved["algo"]["eps_high"] == 0.28
    r = CliRunner().invoke(main, ["sweep", "--config", str(cfg), "--preset", "grpo", "--vary", "gamma=0.2,0.8",
                                  "--out", str(tmp_path / "b"), "-q"])
    assert r.exit_code == 0, r.output
    saved = json.loads((tmp_path / "b" / "config.json").read_text())
    assert saved["preset"] == "grpo" and saved["sweep"] == {"gamma": [0.2, 0.8]} and saved["train"]["seeds"] == 2
