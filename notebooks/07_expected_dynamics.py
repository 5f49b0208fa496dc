# ---
# jupyter:
#   jupytext:
#     notebook_metadata_filter: kernelspec,jupytext,-jupytext.text_representation.jupytext_version
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 07 · The expected flow: training without seed noise
#
# *Level: intermediate · runs in about 40 s on 2 cores · reference:
# [expected dynamics](../docs/expected.md)*
#
# **The idea.** A training step is random: which prompts are drawn, which G answers each group
# samples, which rewards a noisy arm pays. Each seed follows its own path, and every figure made from
# a few seeds carries their noise. In a bandit every source of that randomness is small enough to
# enumerate: a group of G answers over K is one of `C(G + K - 1, K - 1)` count vectors (6,435 for
# K = G = 8). So tabsim can compute the **exact expected update** `E[update | z]` of the logits `z` and
# iterate it,
#
#     z_{t+1} = z_t + E[update | z_t]        (train.dynamics = "expected")
#
# a deterministic flow with no seeds. It is the path of the *mean update*. The mean of the random
# paths, `E[z_t]`, is close to it but not equal, because the update is not linear in `z` (Jensen's
# inequality); this notebook puts the two side by side and then uses the flow to find the
# self-consistency crossover with no seed noise at all.

# %%
import matplotlib.pyplot as plt
from matplotlib_inline.backend_inline import set_matplotlib_formats
import numpy as np
import pandas as pd

import tabsim as ts
from tabsim.plotting import ARM_COLORS, PAGE_RC, TERM_COLORS
from tabsim.runtime.run import expected_crossover

pd.set_option("display.precision", 4)
plt.rcParams.update(PAGE_RC)  # figures sized for a page column: text at body size
set_matplotlib_formats("retina")  # twice the pixels at the same size: sharp on high-DPI screens

# %% [markdown]
# ## The flow beside a cloud of seeds
#
# The `paper` preset at prior strength 0.5: 16 sampled seeds, and the expected flow. The only change
# between the two configs is `train.dynamics`. A seed also draws its task (which answers are correct,
# in which positions: the majority's tie rule reads them), and the flow of each task differs a little,
# so the flow is run on the task of each of the 16 seeds and averaged: like for like.

# %%
BASE = {"preset": "paper", "task": {"prior_strength": 0.5}, "train": {"steps": 200, "eval_every": 10}}
cloud = ts.run(BASE, train={"seeds": 16, "steps": 200, "eval_every": 10}, progress=False).frame
flows = [ts.run(BASE, train={"dynamics": "expected", "seed": s, "steps": 200, "eval_every": 10}, progress=False).frame
         for s in range(16)]
print("seeds in a flow's frame:", flows[0].seed.unique())  # -1: the expected flow
flow = pd.concat(flows).groupby(["arm", "step"], observed=True).pass1.mean().reset_index()

fig, ax = plt.subplots(figsize=(5.8, 3.6))
for arm in ("random", "majority", "true"):
    c = cloud[cloud.arm == arm].pivot(index="step", columns="seed", values="pass1")
    ax.plot(c.index, c.to_numpy(), color=ARM_COLORS[arm], lw=0.5, alpha=0.25)
    ax.plot(c.index, c.mean(axis=1), color=ARM_COLORS[arm], lw=1.2, ls="--")
    f = flow[flow.arm == arm]
    ax.plot(f.step, f.pass1, color=ARM_COLORS[arm], lw=2.4, label=f"{arm}: flow")
ax.set(xlabel="step", ylabel="pass@1", title="the flow (thick), 16 seeds (thin), the seeds' mean (dashed)")
ax.legend(fontsize=9)
fig.tight_layout()
plt.show()

# %% [markdown]
# The flow runs through the middle of the cloud. Two things to read:
#
# * **RANDOM is exactly flat.** On policy, a reward that ignores the answer gives every answer an
#   expected advantage of zero, and the KL term pulls toward the prior, where the policy already is.
#   The sampled seeds wander around it; their mean returns to it.
# * **The flow and the seeds' mean differ a little.** That is the Jensen gap: the mean of a
#   nonlinear update over random paths is not the update along the mean path. The table below
#   measures it at the last step, with the seeds' standard error beside it: for MAJORITY, whose
#   reward depends most sharply on the group, it is a few thousandths of pass@1 (1,024 seeds pin it
#   at 0.003 on the [expected dynamics](../docs/expected.md#the-jensen-gap) page).
# * **The gap depends on the algorithm.** GPG scales each advantage by `n / m`, the batch's answers
#   over its rewarded ones, which is far from linear in the policy: its MAJORITY arm ends 0.011 to
#   0.021 of pass@1 higher on seeds than on the flow (priors 0.35-0.80), six times the `paper`
#   preset's gap, so its flow's `d_elicit` sits that much below the seeds'. `ts.run` warns when it
#   runs GPG's flow; check such a quantity against seeds.

# %%
last = cloud[cloud.step == 200].groupby("arm", observed=True).pass1.agg(["mean", "sem"])
last["flow"] = flow[flow.step == 200].set_index("arm").pass1
last["mean - flow"] = last["mean"] - last["flow"]
last

# %% [markdown]
# ## The crossover, found exactly
#
# `d_elicit = acc(MAJORITY) - acc(RANDOM)` changes sign at the self-consistency crossover. With
# seeds, its location comes with an interval. On the flow, `d_elicit(p)` is a smooth deterministic
# function of the prior strength `p`, so a root finder (Brent's method) finds its zero to any
# precision. First the curve, on a grid of priors in one run:

# %%
grid = [round(0.30 + 0.025 * i, 3) for i in range(13)]
sweep = ts.run({"preset": "paper", "train": {"dynamics": "expected"}, "sweep": {"prior_strength": grid}},
               progress=False).final()
curve = sweep.pivot(index="prior_strength", columns="arm", values="pass1")
d_elicit = curve["majority"] - curve["random"]

root = expected_crossover(task_seeds=4)  # averaged over the tasks of 4 seeds (answer positions)
mode_switch = 2 * (1 + 0.2 * 8) / (6 + 2 * (1 + 0.2 * 8))  # where a correct answer becomes the prior's mode
print(f"crossover of the flow: {root:.4f}; the prior's mode switch: {mode_switch:.4f}")

fig, ax = plt.subplots(figsize=(5.8, 3.2))
ax.plot(d_elicit.index, d_elicit, marker=".", color=TERM_COLORS["d_elicit"], label="d_elicit of the flow (task of seed 0)")
ax.axhline(0, color="0.6", lw=0.8)
ax.axvline(root, color="k", label=f"crossover {root:.3f} (Brent)")
ax.axvline(mode_switch, color="grey", ls=":", label=f"mode switch {mode_switch:.3f}")
ax.set(xlabel="prior strength p_s", ylabel="d_elicit")
ax.legend(fontsize=9)
fig.tight_layout()
plt.show()

# %% [markdown]
# The crossover lies **below** the prior's mode switch: at `p = 0.44` the correct answers are not yet
# the prior's mode, yet majority reward already helps. A group of 8 samples' plurality is correct
# more often than the prior's single most likely answer, because the two correct answers split
# their mass while the majority only needs one of them to win a group, and ties between answers go
# to the lowest index, which is correct or wrong at random. The flow's crossover agrees with the
# Monte Carlo estimate of `experiments/expected_flow` within its interval (the numbers are on the
# [expected dynamics](../docs/expected.md) page).
#
# ## What to try
#
# * Swap the preset: `{"preset": "dapo", "train": {"dynamics": "expected"}}`. The filter's batch
#   normaliser is enumerated too (the chance of every number of kept groups in the batch).
# * Ask for something the flow cannot do, e.g. `{"preset": "paper", "algo": {"optimizer": "adam"},
#   "train": {"dynamics": "expected"}}`, and read the refusal: it says why and what to change.
# * Move the crossover: `expected_crossover({"preset": "paper", "task": {"format_boost": 1.0}})` with
#   `bracket=(0.5, 0.9)`.
#
# ## Exercises
#
# Try each one before opening its answer.
#
# 1. Why does the flow of RANDOM not move at all, while each sampled seed does?
#
# <details><summary>Answer</summary>
#
# The expected update is an average over every group and every reward draw. A reward independent of
# the answer gives each answer the same expected advantage, which the group centring makes 0, so the
# policy term vanishes; the KL term is 0 at the prior. A single seed's update is not an average: its
# sampled group and rewards push it one way or the other, and the pushes only cancel on average.
#
# </details>
#
# 2. Could a longer flow ever disagree with a very large number of seeds by more than their standard
#    error, and what would that mean?
#
# <details><summary>Answer</summary>
#
# Yes: with enough seeds the standard error falls below the Jensen gap, and the difference is then
# real, not noise. The flow is the path of the mean update, the seeds' mean is the mean of the paths;
# they differ by the curvature of the update times the spread of the paths. It means the flow is a
# very good summary, not the expectation of the random process itself.
#
# </details>
