"""Named presets: each is the composition its recipe defines, runs end to end, and is documented."""
from __future__ import annotations

import re
from pathlib import Path

import jax
import numpy as np
import pytest

import tabsim as ts
from tabsim.runtime.run import algo_spec, static_key
from tabsim.runtime.executables import count


def n_programs(cfg) -> int:
    """Compiled executables of ``cfg``'s training program in this process (one per argument signature)."""
    return count(("conditions", static_key(cfg)))
from tabsim.config import ConfigError, resolve
from tabsim.config.presets import PRESETS

from eager_step import eager_step

DOCS = Path(__file__).resolve().parents[2] / "docs" / "presets.md"

# The defining settings of each recipe (docs/science.md and docs/presets.md), written independently of presets.py.
EXPECTED = {
    "grpo": dict(estimator="grpo", ratio="token", surrogate="clip", eps_low=0.2, eps_high=0.2, std_ddof=1,
                 aggregation="seq-mean-token-mean", kl="k3", kl_placement="loss"),
    "dr_grpo": dict(estimator="dr_grpo", surrogate="clip", aggregation="seq-mean-token-sum-norm",
                    kl_placement="none"),
    "dapo": dict(estimator="grpo", surrogate="clip", eps_low=0.2, eps_high=0.28, aggregation="token-mean",
                 filter=True, kl_placement="none"),
    "gspo": dict(ratio="sequence", surrogate="clip", eps_low=3e-4, eps_high=4e-4,
                 aggregation="seq-mean-token-mean", kl_placement="none"),
    "rloo": dict(estimator="rloo", kl_placement="reward"),
    "reinforce_pp": dict(estimator="reinforce_pp", surrogate="clip"),
    "cispo": dict(surrogate="cispo"),
    "sapo": dict(surrogate="sapo", sapo_tau_pos=1.0, sapo_tau_neg=1.05, aggregation="seq-mean-token-mean"),
    "gpg": dict(estimator="gpg", surrogate="reinforce", kl_placement="none"),
    "gmpo": dict(estimator="grpo", ratio="token", surrogate="gmpo", eps_low=0.4, eps_high=0.4,
                 aggregation="seq-mean-token-mean", kl_placement="none"),
    "lite_ppo": dict(estimator="batch_std", std_ddof=1, std_eps=1e-4, surrogate="clip", eps_low=0.2, eps_high=0.2,
                     aggregation="token-mean", kl_placement="none", filter=False),
    "mapo": dict(estimator="mapo", std_ddof=1, std_eps=1e-6, surrogate="dual_clip", eps_low=0.2, eps_high=0.3,
                 dual_clip_c=3.0, aggregation="token-mean", kl="low_var_kl", kl_placement="loss", beta=0.01),
    "2_grpo": dict(estimator="grpo", std_ddof=1, std_eps=1e-4, surrogate="clip", eps_low=0.2, eps_high=0.2,
                   aggregation="seq-mean-token-mean", kl="k3", kl_placement="loss", beta=0.04),
    "spo": dict(estimator="grpo", surrogate="spo", eps_low=0.2, eps_high=0.2, aggregation="token-mean",
                kl_placement="none"),
    "luspo": dict(estimator="grpo", std_eps=1e-4, ratio="sequence", surrogate="clip", eps_low=2e-3, eps_high=2.5e-3,
                  aggregation="seq-mean-token-sum", kl_placement="none"),
    "intellect_2": dict(estimator="grpo", std_eps=1e-4, surrogate="dual_clip", dual_clip_c=4.0, eps_low=0.2,
                        eps_high=0.2, aggregation="token-mean", kl="k3", kl_placement="loss", beta=0.001),
    "ngrpo": dict(estimator="ngrpo", std_ddof=1, std_eps=1e-6, surrogate="clip", eps_low=0.16, eps_high=0.24,
                  aggregation="token-mean", kl_placement="none", filter=False),
    "raft": dict(estimator="raft", surrogate="clip", eps_low=0.2, eps_high=0.2, aggregation="token-mean",
                 kl="low_var_kl", kl_placement="loss", beta=0.001),
    "reinforce_rej": dict(estimator="sign", filter=True, surrogate="dual_clip", dual_clip_c=3.0, eps_low=0.2,
                          eps_high=0.2, aggregation="token-mean", kl="low_var_kl", kl_placement="loss", beta=0.001),
    "asymre": dict(estimator="asymre", baseline_shift=-0.1, surrogate="reinforce", aggregation="token-mean",
                   kl_placement="none"),
    "pvpo": dict(estimator="pvpo", surrogate="clip", eps_low=0.2, eps_high=0.2, aggregation="token-mean",
                 kl_placement="none"),
    "grpo_lead": dict(estimator="grpo_lead", std_ddof=1, std_eps=1e-6, surrogate="clip", eps_low=0.2, eps_high=0.2,
                      aggregation="token-mean", kl_placement="none"),
    "edge_grpo": dict(estimator="edge", std_ddof=1, std_eps=1e-4, surrogate="clip", eps_low=0.2, eps_high=0.2,
                      aggregation="seq-mean-token-mean", kl_placement="none"),
    "s_grpo": dict(estimator="s_grpo", std_ddof=1, std_eps=1e-8, sgrpo_noise=0.1, surrogate="clip", eps_low=0.2,
                   eps_high=0.2, aggregation="seq-mean-token-sum-norm", kl_placement="none"),
    "gvpo": dict(estimator="dr_grpo", surrogate="gvpo", gvpo_beta=0.1, aggregation="seq-mean-token-mean",
                 kl_placement="none"),
    "kl_cov": dict(estimator="grpo", std_ddof=1, surrogate="kl_cov", kl_cov_ratio=0.002, kl_cov_coef=1.0,
                   aggregation="token-mean", filter=True, kl_placement="none"),
    "gfpo": dict(estimator="grpo", std_ddof=1, std_eps=1e-4, surrogate="clip", eps_low=0.2, eps_high=0.2,
                 aggregation="token-mean", kl_placement="none"),
    "cppo": dict(estimator="grpo", std_ddof=1, std_eps=1e-4, surrogate="clip", eps_low=0.2, eps_high=0.2,
                 aggregation="token-mean", kl="k3", kl_placement="loss", beta=0.04),
    "bnpo": dict(estimator="bnpo", surrogate="dual_clip", eps_low=0.2, eps_high=0.28, dual_clip_c=10.0,
                 aggregation="seq-mean-token-sum", kl_placement="none", filter=False),
    "spo_stream": dict(tracker="spo_stream", tracker_rho=0.875, surrogate="dual_clip", eps_low=0.2, eps_high=0.28,
                       dual_clip_c=10.0, aggregation="token-mean", kl_placement="none", filter=False),
    "disco": dict(estimator="grpo", surrogate="disco", disco_tau=10.0, disco_delta=1e-4, disco_beta=1e3,
                  aggregation="token-mean", kl_placement="none", filter=False),
    "dapo_overlong": dict(estimator="grpo", std_ddof=1, surrogate="clip", eps_low=0.2, eps_high=0.28,
                          aggregation="token-mean", filter=True, kl_placement="none", reward_terms=["overlong"],
                          overlong_max=4.0, overlong_cache=2.0, overlong_factor=1.0),
    "unlikeliness": dict(estimator="grpo", std_ddof=1, std_eps=1e-6, surrogate="clip", eps_low=0.2, eps_high=0.2,
                         aggregation="token-mean", kl="low_var_kl", kl_placement="loss", beta=0.1, epochs=2,
                         filter=True, reward_terms=["unlikeliness"], rank_penalty=0.25),
    "intuitor": dict(estimator="grpo", std_ddof=1, std_eps=1e-6, surrogate="clip", eps_low=0.2, eps_high=0.2,
                     aggregation="token-mean", kl="low_var_kl", kl_placement="loss", beta=0.005, reward_terms=[]),
    "top_entropy": dict(estimator="grpo", surrogate="clip", eps_low=0.2, eps_high=0.28, aggregation="token-mean",
                        filter=True, kl_placement="none", token_weight="top_entropy", top_entropy_quantile=0.2),
    "balanced_aggregation": dict(estimator="grpo", surrogate="clip", eps_low=0.2, eps_high=0.2, aggregation="balanced",
                                 kl_placement="none"),
    "dcpo": dict(estimator="grpo", surrogate="dcpo", eps_low=0.2, eps_high=0.28, dual_clip_c=10.0,
                 aggregation="seq-mean-token-mean", kl_placement="none", filter=False),
    "real": dict(estimator="grpo", surrogate="real", real_tau=0.5, aggregation="token-mean", kl_placement="none",
                 filter=False),
    "gigpo": dict(estimator="gigpo_std", surrogate="clip", eps_low=0.2, eps_high=0.2, aggregation="token-mean",
                  kl="low_var_kl", kl_placement="loss", beta=0.01, filter=False),
    "ctpo": dict(estimator="grpo", ratio="cumulative", surrogate="ctpo", ctpo_clip_low=0.025, ctpo_clip_high=0.05,
                 ctpo_clip_c=0.05, ctpo_power=0.5, aggregation="token-mean", kl_placement="none"),
    "holderpo": dict(estimator="grpo", std_ddof=1, std_eps=1e-8, ratio="holder", holder_p=1.0, surrogate="clip",
                     eps_low=0.2, eps_high=0.2, aggregation="seq-mean-token-mean", kl_placement="none", filter=False),
    "clip_cov": dict(estimator="grpo", std_ddof=1, std_eps=1e-6, surrogate="clip_cov", eps_low=1.0, eps_high=1.0,
                     clip_cov_ratio=2e-4, clip_cov_lb=1.0, clip_cov_ub=5.0, aggregation="token-mean",
                     kl_placement="none", filter=True),
    "tempo": dict(estimator="tempo", std_ddof=1, std_eps=1e-6, surrogate="clip", eps_low=0.2, eps_high=0.28,
                  aggregation="token-mean", kl_placement="none", filter=False),
    "lambda_grpo": dict(estimator="grpo", std_ddof=1, std_eps=1e-4, surrogate="clip", eps_low=0.2, eps_high=0.2,
                        aggregation="seq-mean-token-mean", kl_placement="none", token_weight="lambda_grpo"),
    "greso": dict(estimator="grpo", std_ddof=1, std_eps=1e-6, surrogate="clip", eps_low=0.2, eps_high=0.2,
                  aggregation="token-mean", kl_placement="none", filter=True, ent_coef=0.001, prompt_skip="greso",
                  skip_p_easy=0.5, skip_p_hard=0.5, skip_target=0.25),
    "drpo": dict(estimator="grpo", surrogate="drpo", drpo_lambda=0.1, disco_tau=10.0, disco_delta=1e-4, disco_beta=1e3,
                 aggregation="token-mean", kl_placement="none", filter=False),
    "rec_oneside_nois": dict(estimator="dr_grpo", surrogate="rec_oneside_nois", eps_low=0.2, eps_high=0.2,
                             aggregation="token-mean", kl_placement="none", filter=False),
    "rec_oneside_is": dict(estimator="dr_grpo", surrogate="clip", eps_low=0.2, eps_high=0.2, aggregation="token-mean",
                           kl_placement="none", filter=False),
    "knapsack_rl": dict(estimator="grpo", std_ddof=1, std_eps=1e-6, surrogate="clip", eps_low=0.2, eps_high=0.28,
                        aggregation="token-mean", kl_placement="none", filter=False, allocation="knapsack",
                        allocation_max=128),
    "vas": dict(estimator="grpo", std_ddof=1, std_eps=1e-6, surrogate="clip", eps_low=0.2, eps_high=0.2,
                aggregation="token-mean", kl="low_var_kl", kl_placement="loss", beta=0.01, filter=False,
                curriculum="vas", vas_ratio=0.5, vas_momentum=0.0, vas_every=4, vas_rollouts=8),
    "ppo": dict(surrogate="clip", eps_low=0.2, eps_high=0.2, aggregation="token-mean", kl_placement="none",
                filter=False, epochs=1, tracker="value", value_lr=0.1),
    "opmd": dict(estimator="dr_grpo", surrogate="opmd", opmd_coef=0.1, aggregation="token-mean", kl_placement="none",
                 filter=False),
    "dcpo_sas": dict(estimator="grpo", surrogate="dcpo", eps_low=0.2, eps_high=0.28, dual_clip_c=10.0,
                     aggregation="seq-mean-token-mean", kl_placement="none", filter=False, tracker="dcpo_sas"),
    "spurious_rewards": dict(estimator="grpo", std_ddof=1, surrogate="clip", eps_low=0.2, eps_high=0.2,
                             kl_placement="none", filter=False),
}
ALL = sorted(PRESETS)


def test_every_required_preset_exists():
    assert set(EXPECTED) | {"paper"} <= set(PRESETS)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_preset_is_its_recipe(name):
    a = resolve({"preset": name}).algo
    for field, want in EXPECTED[name].items():
        assert getattr(a, field) == want, (name, field, getattr(a, field), want)
    if a.kl_placement == "none":
        assert a.beta == 0.0


def test_two_grpo_is_grpo_with_two_answers_per_prompt():
    two, grpo = resolve({"preset": "2_grpo"}), resolve({"preset": "grpo"})
    assert two.train.group_size == 2 and two.algo == grpo.algo


def test_spurious_rewards_reuses_each_batch_for_eight_updates():
    cfg = resolve({"preset": "spurious_rewards"})
    assert cfg.algo.epochs * cfg.algo.minibatches == 8
    assert cfg.train.group_size == 16
    assert "random" in cfg.arms.arms and "frozen" in cfg.arms.arms


def test_a_config_overrides_its_preset():
    cfg = resolve({"preset": "dapo", "algo": {"eps_high": 0.3}, "train": {"steps": 10}})
    assert cfg.algo.eps_high == 0.3 and cfg.algo.filter is True and cfg.train.steps == 10
    with pytest.raises(ConfigError, match="preset"):
        resolve({"preset": "no_such_preset"})


TINY = {"task": {"n_prompts": 4, "n_answers": 5, "n_correct": 1},
        "train": {"steps": 4, "batch_size": 2, "group_size": 4, "seeds": 2, "eval_every": 2}}


# by default the presets with a path of their own (the reference, TRL's GRPO, verl's token returns, reuse);
# the others, whose components those share, with -m heavy
DEFAULT_PRESETS = {"paper", "grpo", "reinforce_pp", "spurious_rewards"}


@pytest.mark.parametrize("name", [n if n in DEFAULT_PRESETS else pytest.param(n, marks=pytest.mark.heavy) for n in ALL])
def test_preset_runs_end_to_end_and_compiles_once(name):
    """Every preset through ``tabsim.run`` (jit + vmap over seeds, arms, conditions): finite metrics,
    trained arms move, and a second run with other numeric values reuses the compiled program."""
    base = {"preset": name, **TINY}
    res = ts.run(base, progress=False)
    fin = res.final()
    metrics = ["pass1", "entropy", "kl_ref", "reward_mean", "kept_frac", "clip_frac"]
    assert np.isfinite(fin[metrics].to_numpy()).all()
    arms = resolve(base).arms.arms
    assert set(fin["arm"]) == set(arms)
    start = res.frame[res.frame["step"] == 0].set_index(["seed", "arm"])["pass1"]
    moved = (fin.set_index(["seed", "arm"])["pass1"] - start).abs()
    assert (moved.xs("frozen", level="arm") == 0).all()
    assert moved.drop("frozen", level="arm").max() > 1e-6
    ts.run(base, progress=False, algo={"lr": 0.123})  # other numeric values, nothing swept: no recompilation
    assert n_programs(resolve(base)) == 1
    # a swept field is laid out per run (a new program), compiled once for all its chunks
    ts.run(base, progress=False, sweep={"lr": [0.1, 0.3, 0.5]}, train={"chunk_conditions": 2})
    assert n_programs(resolve(base)) == 2


# Every preset, smoke-run: one update of its composition on a bandit and on a depth-3 tree (multi-token answers),
# eagerly under ``jax.disable_jit()`` (no program per preset: each primitive is compiled once for the file and
# shared by the presets; a few tenths of a second a preset after the first). The list is
# ``sorted(PRESETS)``: a new preset is covered without editing this test.
SMOKE_TASK = {"n_prompts": 2, "n_answers": 4, "n_correct": 1}
SMOKE_TRAIN = {"steps": 1, "batch_size": 2, "group_size": 4, "seeds": 1, "pass_k": [1], "maj_k": [],
               "metrics": ["pass1"], "dynamics": "sampled"}


def smoke_step(name: str, env_kind: str):
    """``(logits before, logits after, diagnostics, metrics)`` of one update of preset ``name``'s composition
    on the trained arm of ``("frozen", "true")``, run op by op (``jax.disable_jit``)."""
    task = SMOKE_TASK if env_kind == "bandit" else {**SMOKE_TASK, "env": "tree", "tree": {"depth": 3}}
    # a preset that keeps k of each group's answers (train.group_keep) keeps 3 of the smoke run's 4
    train = {**SMOKE_TRAIN, "group_keep": 3} if "group_keep" in PRESETS[name].get("train", {}) else SMOKE_TRAIN
    cfg = resolve({"preset": name, "task": task, "train": train, "arms": {"arms": ["frozen", "true"]}})
    env, hp, task_, state, after, diag = eager_step(cfg)
    with jax.disable_jit():
        metrics = env.evaluate(after.logits, task_, hp)
    return np.asarray(state.logits), np.asarray(after.logits), diag, metrics


def smoke_cases() -> list:
    """Every preset on both tasks: by default each preset on one of them (the bandit and the tree in turn, in
    ``sorted(PRESETS)`` order, so both tasks see half the presets and every preset runs), the other with
    ``-m heavy``."""
    cases = []
    for i, name in enumerate(ALL):
        for j, env_kind in enumerate(("bandit", "tree")):
            marks = () if (i + j) % 2 == 0 else (pytest.mark.heavy,)
            cases.append(pytest.param(name, env_kind, marks=marks, id=f"{name}-{env_kind}"))
    return cases


@pytest.mark.parametrize(("name", "env_kind"), smoke_cases())
def test_every_preset_takes_a_finite_step(name, env_kind):
    """Finite diagnostics and metrics, and the trained arm's policy moves (seed words [0, 1] give every
    preset a group with distinct rewards on both tasks)."""
    before, after, diag, metrics = smoke_step(name, env_kind)
    assert all(np.isfinite(np.asarray(v)).all() for v in diag.values()), (name, diag)
    assert all(np.isfinite(np.asarray(v)).all() for v in metrics.values()), (name, metrics)
    assert np.isfinite(after).all() and np.abs(after - before).max() > 1e-6, name


def test_docs_table_has_one_row_per_preset():
    text = DOCS.read_text()
    rows = [ln for ln in text.splitlines() if ln.startswith("| `")]
    names = [re.match(r"\| `([^`]+)`", ln).group(1) for ln in rows]
    assert sorted(names) == ALL
    for ln in rows:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        assert len(cells) >= 4 and all(cells), ln  # preset, composition, TRL, verl


def test_presets_are_distinct_compositions():
    specs = {name: algo_spec(resolve({"preset": name})) for name in ALL}
    seen = {}
    for name, spec in specs.items():
        cfg = resolve({"preset": name})
        key = (spec, tuple(sorted(cfg.hyper_values().items())), cfg.train.group_size)
        assert key not in seen, (name, seen.get(key))
        seen[key] = name
