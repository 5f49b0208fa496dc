"""Per-prompt metrics (``train.prompt_metrics``): the values behind the recorded means, per prompt, as
``Result.prompts`` and ``prompts.parquet`` (tabsim.runtime.prompts)."""
from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

import tabsim as ts
from tabsim.config import ConfigError
from tabsim.config.static import make_env, static_key
from tabsim.runtime.loading import ResultFolderError
from tabsim.runtime.prompts import check_prompt_history, prompt_frame, prompt_history_bytes, split_prompts
from tabsim.runtime.run import Result
from tabsim.sim.envs.bandit import BanditTask

TINY = {"preset": "paper", "task": {"n_prompts": 6}, "train": {"steps": 4, "eval_every": 2, "seeds": 2,
                                                              "batch_size": 4}}


def cfg_with(**train):
    return ts.resolve(TINY, train={**TINY["train"], **train})


# -- the option at the edge ---------------------------------------------------------------------------------

def test_default_off_leaves_the_config_and_program_as_they_were():
    cfg = cfg_with()
    assert "prompt_metrics" not in cfg.model_dump(mode="json")["train"]  # the written config and its digest
    assert make_env(cfg).prompt_metrics is None
    on = cfg_with(prompt_metrics=["pass1"])
    assert on.model_dump(mode="json")["train"]["prompt_metrics"] == ["pass1"]
    assert static_key(on) != static_key(cfg) and on.digest() != cfg.digest()


@pytest.mark.parametrize("train, says", [
    ({"prompt_metrics": ["bogus"]}, "'bogus' is not among the metrics this run records"),
    ({"prompt_metrics": []}, "list at least one of"),
    ({"prompt_metrics": ["pass@k"]}, "'pass@k' is not among"),  # no train.pass_k
    ({"prompt_metrics": ["root_mass"]}, "'root_mass' is not among"),  # optional, not named in train.metrics
    ({"prompt_metrics": ["entropy"], "metrics": ["pass1"]}, "'entropy' is not among"),  # not recorded
])
def test_a_metric_the_run_does_not_record_is_refused_in_one_line(train, says):
    with pytest.raises(ConfigError) as err:
        cfg_with(**train)
    lines = [line for line in str(err.value).splitlines() if "train.prompt_metrics" in line]
    assert len(lines) == 1 and says in lines[0]  # one line names the field, the value and what is allowed


def test_families_and_optional_metrics_are_accepted_when_recorded():
    cfg = cfg_with(prompt_metrics=["pass@k", "maj@k", "root_mass"], pass_k=[2], maj_k=[3],
                   metrics=["pass1", "root_mass"])
    assert cfg.train.prompt_metrics == ["pass@k", "maj@k", "root_mass"]


# -- the values: a tiny bandit by hand, and the means they average to ----------------------------------------

def tiny_bandit(**kw):
    env = ts.make_env(ts.resolve({"preset": "paper", "task": {"n_prompts": 2, "n_answers": 3, "n_correct": 1},
                                  "train": {"batch_size": 2, "pass_k": [2], "prompt_metrics": ["pass1", "pass@k"],
                                            **kw}}))
    task = BanditTask(prior_logits=jnp.log(jnp.full((2, 3), 1 / 3)), correct=jnp.asarray([[1., 0, 0], [0, 1, 0]]),
                      format_answer=jnp.asarray([1, 2]), offline_label=jnp.asarray([-1, -1]),
                      prompt_strength=jnp.asarray([0.3, 0.6]))
    return env, task


def test_a_hand_checked_prompt_on_a_tiny_bandit():
    env, task = tiny_bandit()
    logits = jnp.asarray([[math.log(2.0), 0.0, 0.0], [0.0, 0.0, 0.0]])  # prompt 0: q = (1/2, 1/4, 1/4)
    out = jax.jit(lambda lg, t: env.evaluate(lg, t, None))(logits, task)
    np.testing.assert_allclose(np.asarray(out["prompt:pass1"]), [1 / 2, 1 / 3], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(out["prompt:pass@2"]), [1 - 1 / 4, 1 - 4 / 9], rtol=1e-6)
    assert "prompt:entropy" not in out and "prompt:prompt_strength" not in out  # only what was asked
    # the recorded means are those of the same float32 values
    assert float(out["pass1"]) == float(jnp.mean(out["prompt:pass1"]))
    assert float(out["pass@2"]) == float(jnp.mean(out["prompt:pass@2"]))
    default = ts.make_env(ts.resolve({"preset": "paper", "task": {"n_prompts": 2, "n_answers": 3, "n_correct": 1},
                                      "train": {"batch_size": 2, "pass_k": [2]}}))
    plain = jax.jit(lambda lg, t: default.evaluate(lg, t, None))(logits, task)
    assert set(plain) == {k for k in out if not k.startswith("prompt:")}  # default: the means only
    assert all(float(plain[k]) == float(out[k]) for k in plain)


def test_a_heterogeneous_task_records_each_prompts_strength():
    env, task = tiny_bandit(prompt_metrics=["entropy"])
    het = ts.make_env(ts.resolve({"preset": "paper", "task": {"n_prompts": 2, "n_answers": 3, "n_correct": 1,
                                                              "heterogeneity": 4.0},
                                  "train": {"batch_size": 2, "prompt_metrics": ["entropy"]}}))
    out = jax.jit(lambda t: het.evaluate(t.prior_logits, t, None))(task)
    np.testing.assert_allclose(np.asarray(out["prompt:prompt_strength"]), [0.3, 0.6], rtol=1e-7)
    np.testing.assert_allclose(np.asarray(out["prompt:entropy"]), [math.log(3)] * 2, rtol=1e-6)
    assert "prompt:prompt_strength" not in jax.jit(lambda t: env.evaluate(t.prior_logits, t, None))(task)


def test_the_tree_records_its_answer_level_metrics_per_prompt():
    from tabsim.sim.envs.tree import TreeTask
    cfg = ts.resolve({"preset": "paper", "task": {"env": "tree", "n_prompts": 3, "tree": {"depth": 3, "branching": 3}},
                      "train": {"batch_size": 2, "prompt_metrics": ["pass1", "kl_ref"]}})
    env = make_env(cfg)
    shape = env.table_shape  # [N, nodes, b]
    rng = np.random.default_rng(0)
    prior = jax.nn.log_softmax(jnp.asarray(rng.normal(size=shape), jnp.float32), -1)
    correct = np.zeros((3, env.n_answers), np.float32)
    correct[[0, 1, 2], [0, 3, 5]] = 1.0
    task = TreeTask(prior_logits=prior, correct=jnp.asarray(correct), format_answer=jnp.asarray([1, 2, 3]),
                    offline_label=jnp.asarray([-1, -1, -1]), prompt_strength=jnp.full((3,), 0.5))
    logits = prior + jnp.asarray(rng.normal(size=shape), jnp.float32)
    out, q = jax.jit(lambda lg, t: (env.evaluate(lg, t, None), env.answer_distribution(lg)))(logits, task)
    assert out["prompt:pass1"].shape == (3,) and sorted(k for k in out if k.startswith("prompt:")) == [
        "prompt:kl_ref", "prompt:pass1"]
    np.testing.assert_allclose(float(out["pass1"]), float(np.mean(np.asarray(out["prompt:pass1"]))), rtol=1e-6)
    np.testing.assert_allclose(float(out["kl_ref"]), float(np.mean(np.asarray(out["prompt:kl_ref"]))), rtol=1e-6)
    # pass@1 per prompt: the correct answer's probability under the answer distribution
    np.testing.assert_allclose(np.asarray(out["prompt:pass1"]), np.asarray(q)[[0, 1, 2], [0, 3, 5]], rtol=1e-6)


# -- the frame, its file and its memory -------------------------------------------------------------------------

def test_prompt_frame_lays_out_condition_seed_arm_step_prompt():
    hist = {"pass1": np.zeros((1, 2, 1, 2)),
            "prompt:pass1": np.arange(2 * 2 * 3, dtype=np.float32).reshape(1, 2, 1, 2, 3)}
    per = split_prompts(hist)
    assert list(hist) == ["pass1"] and list(per) == ["pass1"]
    f = prompt_frame(per, [{"lr": 0.1}], [7, 8], ["true"], [0, 5])
    assert list(f.columns) == ["lr", "seed", "arm", "step", "prompt", "pass1"]
    row = f[(f.seed == 8) & (f.step == 5) & (f.prompt == 1)]
    assert row.pass1.tolist() == [10.0]  # [0, 1, 0, 1, 1] of the history
    assert len(f) == 12


def small_result(prompts=True):
    frame = pd.DataFrame({"seed": [0, 0], "arm": pd.Categorical(["true", "true"]), "step": [0, 2], "pass1": [.5, .6]})
    pf = pd.DataFrame({"seed": [0] * 4, "arm": pd.Categorical(["true"] * 4), "step": [0, 0, 2, 2],
                       "prompt": [0, 1, 0, 1], "pass1": [.4, .6, .5, .7]})
    return Result(frame=frame, config={"train": {"prompt_metrics": ["pass1"]}}, provenance={"config_hash": "x"},
                  prompts=pf if prompts else None)


def test_save_and_load_round_trip_with_verify(tmp_path):
    res = small_result()
    res.save(tmp_path / "run")
    assert (tmp_path / "run" / "prompts.parquet").is_file()
    back = Result.load(tmp_path / "run")  # verify=True: prompts.parquet is in the manifest
    pd.testing.assert_frame_equal(back.prompts, res.prompts)
    none = small_result(prompts=False)
    none.save(tmp_path / "plain")
    assert not (tmp_path / "plain" / "prompts.parquet").exists() and Result.load(tmp_path / "plain").prompts is None


def test_a_changed_or_added_prompts_file_is_refused(tmp_path):
    small_result().save(tmp_path / "run")
    small_result().prompts.iloc[:2].to_parquet(tmp_path / "run" / "prompts.parquet")
    with pytest.raises(ResultFolderError, match="changed prompts.parquet"):
        Result.load(tmp_path / "run")
    small_result(prompts=False).save(tmp_path / "plain")
    small_result().prompts.to_parquet(tmp_path / "plain" / "prompts.parquet")
    with pytest.raises(ResultFolderError, match="added prompts.parquet"):
        Result.load(tmp_path / "plain")


def test_a_per_prompt_history_beyond_memory_is_refused_in_one_line():
    cfg = cfg_with(prompt_metrics=["pass1", "entropy"])
    need = prompt_history_bytes(cfg, 1, 2)
    rows = 1 * 2 * 4 * 3 * 6  # conditions x seeds x arms x eval points x prompts
    assert need == rows * (2 * (4 + 4 + 8) + 8 * 3 + 1)
    assert prompt_history_bytes(cfg_with(), 1, 2) == 0
    check_prompt_history(cfg, 1, 2, available=2**40)  # fits: nothing said
    with pytest.raises(ConfigError) as err:
        check_prompt_history(cfg, 1, 2, available=2**20)
    msg = str(err.value)
    assert msg.startswith("train.prompt_metrics:") and "\n" not in msg and "available" in msg
    check_prompt_history(cfg_with(), 1, 2, available=2**20)  # unset: never refused


# -- end to end (compiles: heavy) ---------------------------------------------------------------------------

def _means_of(res, cols):
    keys = [c for c in res.prompts.columns if c not in cols + ["prompt", "prompt_strength"]]
    m = res.prompts.groupby(keys, observed=True)[cols].mean().reset_index()
    return res.frame.merge(m, on=keys, suffixes=("", "_prompts"))


@pytest.mark.heavy
@pytest.mark.parametrize("task", [{"n_prompts": 6}, {"n_prompts": 6, "env": "tree", "tree": {"depth": 3}}])
def test_a_run_records_prompts_whose_means_are_its_frame(task, tmp_path):
    res = ts.run(TINY, task=task, train={**TINY["train"], "prompt_metrics": ["pass1", "entropy"]}, progress=False)
    plain = ts.run(TINY, task=task, progress=False)
    pd.testing.assert_frame_equal(res.frame, plain.frame)  # the means are as without the option
    assert len(res.prompts) == len(res.frame) * 6
    both = _means_of(res, ["pass1", "entropy"])
    assert len(both) == len(res.frame)
    for c in ("pass1", "entropy"):  # a float32 mean of the same values, up to float32 rounding
        np.testing.assert_allclose(both[c], both[c + "_prompts"], rtol=4e-7 * 6, atol=1e-7)
    res.save(tmp_path / "run")
    pd.testing.assert_frame_equal(Result.load(tmp_path / "run").prompts, res.prompts)


def test_per_prompt_values_are_range_checked_in_chunks_and_published_frames(tmp_path):
    from tabsim.runtime.storefiles import PER_PROMPT, frame_problem, out_of_range
    from tabsim.sim.envs.base import PROMPT_PREFIX
    assert PER_PROMPT == PROMPT_PREFIX
    assert "pass1" in out_of_range("prompt:pass1", [0.5, 1.3]) and out_of_range("prompt:pass1", [0.5]) is None
    bad = small_result().prompts.assign(pass1=[0.4, 1.6, 0.5, 0.7])
    bad.to_parquet(tmp_path / "prompts.parquet")
    assert "pass1" in frame_problem(tmp_path / "prompts.parquet")
    with pytest.raises(Exception, match="pass1"):  # the store refuses to publish it
        Result(frame=small_result().frame, config={}, provenance={}, prompts=bad).save(tmp_path / "run")
    assert not (tmp_path / "run").exists()


@pytest.mark.heavy
def test_an_interrupted_run_resumes_its_per_prompt_frame_from_its_chunks(tmp_path, monkeypatch):
    """Ctrl-C after one of three chunks; ``--resume`` reuses it, and prompts.parquet is the uninterrupted run's."""
    from click.testing import CliRunner

    from tabsim.cli import main
    from tabsim.runtime.executors import LocalExecutor
    from tabsim.runtime.store import MARKER

    cfg = tmp_path / "three.toml"
    cfg.write_text('preset = "paper"\n[task]\nn_prompts = 6\n[train]\nsteps = 4\neval_every = 2\nseeds = 2\n'
                   'batch_size = 4\nchunk_conditions = 1\nprompt_metrics = ["pass1"]\n[sweep]\nlr = [0.1, 0.2, 0.3]\n')
    cli = lambda *a: CliRunner().invoke(main, [str(x) for x in a])  # noqa: E731
    whole = tmp_path / "whole"
    assert cli("run", cfg, "--out", whole, "-q", "--no-figure").exit_code == 0
    inner = LocalExecutor.map

    def interrupted(self, fn, chunks):
        for n, got in enumerate(inner(self, fn, chunks)):
            if n == 1:
                raise KeyboardInterrupt
            yield got

    out = tmp_path / "resumed"
    monkeypatch.setattr(LocalExecutor, "map", interrupted)
    assert cli("run", cfg, "--out", out, "-q", "--no-figure").exit_code == 130
    monkeypatch.undo()
    res = cli("run", cfg, "--out", out, "-q", "--no-figure", "--resume")
    assert res.exit_code == 0, res.output
    marker = json.loads((out / MARKER).read_text())
    assert (marker["chunks_reused"], marker["chunks_written"]) == (1, 2), (res.output, marker)
    pd.testing.assert_frame_equal(Result.load(out).prompts, Result.load(whole).prompts)


def test_a_chunk_with_per_prompt_arrays_reads_back_whole():
    """The means ``[C, S, A, E]`` are padded to the per-prompt arrays' length in a stored chunk; read back, each
    has its own shape and values (a resumed run reuses the chunk)."""
    from tabsim.runtime.storefiles import decode_chunk, encode_chunk
    arrays = {"pass1": np.arange(24, dtype=np.float32).reshape(1, 2, 4, 3) / 24,
              "prompt:pass1": np.linspace(0, 1, 144, dtype=np.float32).reshape(1, 2, 4, 3, 6)}
    back, why = decode_chunk(encode_chunk(arrays, "k", "j", 0), ("k", "j", 0), {"job": "j", "index": 0})
    assert why is None and set(back) == set(arrays)
    for k, v in arrays.items():
        np.testing.assert_array_equal(back[k], v)


def test_a_factorial_design_refuses_per_prompt_metrics_in_one_line():
    from tabsim.studies.designs import make_design
    with pytest.raises(ConfigError) as err:
        make_design({**TINY, "train": {**TINY["train"], "prompt_metrics": ["pass1"]}}, {"rate": {"lr": [0.1, 0.2]}},
                    seeds=2)
    msg = str(err.value)
    assert msg.startswith("train.prompt_metrics: ['pass1'] is recorded by ts.run") and "\n" not in msg
