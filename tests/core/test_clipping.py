"""Clipping bias: RANDOM reward moves pass@1 only when a rollout batch is reused under a clipped ratio.

Bandit: N = 16 prompts, K = 8 answers, k = 2 correct, p_s = 0.8. The mode is correct when the mass of
one correct answer, p_s / k = 0.4, beats the format answer's ``(1 - p_s) / (K - k) (1 + f K)``
(both before normalisation): f = 0.2 gives 0.087 (mode correct); f = 4.0 gives 1.1, i.e. after
normalisation 0.53 on the format answer against 0.19 on each correct one (mode wrong). Near the
boundary the sign is not the mode's: at f = 2.0 (0.37 against 0.26 + 0.26) the drift is about 0,
because two correct answers share p_s (the experiment's README has the numbers).

Statistic: the paired drift of each seed, ``d_s = pass1(random) - pass1(frozen)`` after training
(the FROZEN arm is the prior, same task draw), over S = 32 seeds with fixed seeds. Its standard error
is ``SE = sd(d) / sqrt(S)``; "no drift" means ``|mean d| < 3 SE`` and a significant drift means
``|mean d| > 3 SE`` with the stated sign (a two-sided z test at about 0.3%; with 31 degrees of
freedom the t quantile for that level is about 3.2). Observed with these seeds: on-policy +0.0015
(0.7 SE); reuse + clip, mode correct +0.116 (22 SE); mode wrong -0.063 (-5.2 SE); reuse without
the clip -0.080 (-8.8 SE); paired clip - no clip +0.196 (26 SE).

The random arm uses gamma = 0.2. With gamma = 0.2 the advantages are skewed (rare large positive,
frequent small negative ones), and the clip cuts the large positive pushes of the low-probability
answers while the mode, whose ratio moves slowly, keeps them: the drift goes to the mode. With
gamma = 0.5 the advantages are symmetric and in this tabular setting the importance weights of
the reused batch dominate, drifting pass@1 *down* even when the mode is correct; see
``experiments/clipping_null`` for both.
"""
from __future__ import annotations

import numpy as np
import pytest

import tabsim as ts

SEEDS = 32
STEPS = 100
LR = 4.0  # token-mean over 16 x 8 answers: 0.25 per prompt per update, enough for the clip to fire


def drift(epochs: int, surrogate: str = "clip", format_boost=(0.2,)):
    """Per-seed paired drift ``[F, S]`` (one row per format_boost level) and the mean clip fraction."""
    cfg = {
        "preset": "dapo",
        "task": {"n_prompts": 16, "n_answers": 8, "n_correct": 2, "prior_strength": 0.8},
        "arms": {"arms": ["frozen", "random"], "gamma": 0.2},
        "algo": {"epochs": epochs, "minibatches": 1, "surrogate": surrogate, "eps_low": 0.2, "eps_high": 0.2,
                 "filter": False, "lr": LR},
        "train": {"steps": STEPS, "batch_size": 16, "group_size": 8, "seeds": SEEDS},
        "sweep": {"format_boost": list(format_boost)},
    }
    fin = ts.run(cfg, progress=False).final()
    out = []
    for f in format_boost:
        sub = fin[fin["format_boost"] == f]
        wide = sub.pivot(index="seed", columns="arm", values="pass1")
        out.append((wide["random"] - wide["frozen"]).to_numpy())
    clip = fin.loc[fin["arm"] == "random", "clip_frac"].mean()
    return np.stack(out), float(clip)


def se(d):
    return d.std(ddof=1) / np.sqrt(d.size)


@pytest.fixture(scope="module")
def runs():
    on_policy, clip_on = drift(epochs=1)
    reuse, clip_reuse = drift(epochs=4, format_boost=(0.2, 4.0))
    noclip, _ = drift(epochs=4, surrogate="importance")
    return {"on_policy": on_policy[0], "reuse_correct": reuse[0], "reuse_wrong": reuse[1],
            "noclip": noclip[0], "clip_on": clip_on, "clip_reuse": clip_reuse}


def test_on_policy_update_gives_no_drift(runs):
    d = runs["on_policy"]
    assert runs["clip_on"] == 0.0  # ratio exactly 1: the clip never fires
    assert abs(d.mean()) < 3 * se(d), (d.mean(), se(d))
    assert se(d) > 0  # the random arm did move (the test is not 0 < 0)


def test_reuse_with_clip_drifts_up_when_the_mode_is_correct(runs):
    d = runs["reuse_correct"]
    assert runs["clip_reuse"] > 0.0
    assert d.mean() > 3 * se(d), (d.mean(), se(d))


def test_reuse_with_clip_drifts_down_when_the_mode_is_wrong(runs):
    d = runs["reuse_wrong"]
    assert d.mean() < -3 * se(d), (d.mean(), se(d))


def test_the_clip_causes_the_upward_drift(runs):
    """Same reuse with an unclipped ratio: the paired difference clip - no clip is significantly > 0
    (SE of the per-seed difference, same 3 SE threshold)."""
    diff = runs["reuse_correct"] - runs["noclip"]
    assert diff.mean() > 3 * se(diff), (diff.mean(), se(diff))
    assert runs["noclip"].mean() < 3 * se(runs["noclip"])  # no upward drift without the clip
