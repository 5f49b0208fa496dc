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
# # 01 · One GRPO step on a bandit
#
# *Level: introductory · runs in about 20 s on 2 cores · reference: [GRPO-family
# semantics](../docs/science.md#grpo-family-semantics), [algorithm
# components](../docs/api.md#algorithm-components-tabsimsimalgos), [presets](../docs/presets.md)*
#
# **The idea.** GRPO has no value network. For a prompt it samples a *group* of `G` answers, scores
# them, and uses the group itself as the baseline:
#
#     A_g = (r_g - mean(r)) / (std(r) + eps)          (GRPO)
#     A_g =  r_g - mean(r)                            (Dr. GRPO: no std)
#
# In a tabular bandit a prompt's policy is a softmax over `K` answers with logits `z`, and the
# policy-gradient step on the loss `-(1/G) sum_g A_g log pi(a_g)` is exactly
#
#     z  <-  z + lr * (1/G) sum_g A_g (onehot(a_g) - pi)
#
# This notebook takes one such step by hand with tabsim's own pieces (the advantage estimators and
# `ts.policy_loss`), then changes one number at a time: the group size `G`, and whether the
# advantage is divided by the group's standard deviation.

# %%
import ipywidgets as widgets
from IPython.display import display
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
from matplotlib_inline.backend_inline import set_matplotlib_formats
import numpy as np
import pandas as pd

import tabsim as ts
from tabsim.sim.algos import ESTIMATORS
from tabsim.plotting import ALGO_COLORS, PAGE_RC

pd.set_option("display.precision", 4)
plt.rcParams.update(PAGE_RC)  # figures sized for a page column: text at body size
set_matplotlib_formats("retina")  # twice the pixels at the same size: sharp on high-DPI screens

# %% [markdown]
# ## One prompt, one group
#
# Four answers; answer 1 is the only correct one. The policy puts 0.2 on it and 0.5 on a wrong
# answer (2), so its *mode is wrong*. A group of `G = 8` answers such a policy might sample:

# %%
K = 4
prior = jnp.array([0.15, 0.20, 0.50, 0.15])
correct = jnp.array([0.0, 1.0, 0.0, 0.0])
answers = np.array([2, 1, 2, 0, 2, 3, 1, 2])  # two correct answers out of eight
rewards = np.asarray(correct[answers])


def advantage(rewards, estimator="grpo", std_ddof=0, std_eps=1e-8):
    """tabsim's advantage estimator on a batch of groups ``[B, G]`` (or one group ``[G]``)."""
    r = jnp.atleast_2d(jnp.asarray(rewards, jnp.float32))
    hp = ts.Hyper(std_ddof=float(std_ddof), std_eps=std_eps)
    adv = ESTIMATORS[estimator](r, lengths=jnp.ones_like(r), valid=jnp.ones(r.shape[0]), hp=hp)
    return adv if jnp.ndim(rewards) == 2 else adv[0]


group = pd.DataFrame({"answer": answers, "reward": rewards,
                      "A (grpo)": np.asarray(advantage(rewards, "grpo")),
                      "A (dr_grpo)": np.asarray(advantage(rewards, "dr_grpo"))})
group

# %% [markdown]
# The advantages of a group sum to zero: the group mean is the baseline. A correct answer gets a
# positive advantage, every wrong one the same negative advantage. GRPO divides by the group's
# standard deviation (here `sqrt(p (1 - p))` with `p = 2/8`), so its advantages are larger.
#
# Now the step itself. `ts.policy_loss` composes a surrogate and an aggregation; the plain
# policy-gradient surrogate (`reinforce`, no ratio, no clip) with the mean over the group's answers
# gives the update written above. We differentiate it with JAX and compare with the closed form.

# %%
PG_LOSS = ts.AlgoSpec(surrogate="reinforce", aggregation="token-mean")  # -A log pi(a), mean over answers


def grpo_step(logits, answers, adv, lr=1.0):
    """One gradient step of the tabular policy ``logits [K]`` on one group."""
    answers = jnp.asarray(answers)

    def loss(z):
        logq = jnp.broadcast_to(jax.nn.log_softmax(z), (1, answers.shape[0], 1, z.shape[-1]))  # [B, G, T, K]
        tokens = answers[None, :, None]  # [B, G, T]: a bandit answer is one token
        mask = jnp.ones(tokens.shape)
        unused = jnp.zeros(tokens.shape)  # logp_old: the reinforce surrogate has no ratio
        return ts.policy_loss(PG_LOSS, logq, tokens, mask, jnp.asarray(adv)[None], unused, logq, ts.Hyper())[0]

    return logits - lr * jax.grad(loss)(logits)


logits = jnp.log(prior)
adv = advantage(rewards, "grpo")
new_logits = grpo_step(logits, answers, adv, lr=1.0)
closed_form = logits + (adv[:, None] * (jax.nn.one_hot(answers, K) - prior)).mean(0)
print("autodiff step == closed form:", bool(jnp.allclose(new_logits, closed_form, atol=1e-6)))

# %%
rows = {"before": prior}
for est in ("grpo", "dr_grpo"):
    rows[f"after one {est} step"] = jax.nn.softmax(grpo_step(logits, answers, advantage(rewards, est), lr=1.0))
table = pd.DataFrame({k: np.asarray(v) for k, v in rows.items()}, index=[f"answer {a}" for a in range(K)]).T
table["pass@1"] = table["answer 1"]
table

# %% [markdown]
# Mass moves from the sampled wrong answers to the correct one: answer 2 (sampled four times) loses
# the most, answers 0 and 3 (once each) a little. The advantages sum to zero, so the logit of an
# answer that was never sampled would not change at all; its probability would move only through
# the softmax's normalisation.
# With the same learning rate the GRPO step is larger than the Dr. GRPO step because its advantages
# were divided by a standard deviation below 1.
#
# If every answer of a group gets the same reward, every advantage is 0 and the group teaches
# nothing:

# %%
print("all wrong  :", np.asarray(advantage(np.zeros(8))))
print("all correct:", np.asarray(advantage(np.ones(8))))

# %% [markdown]
# ## Changing G
#
# A group is wasted when all its rewards agree. For a prompt whose pass@1 is `p` that happens with
# probability `p^G + (1 - p)^G`, so small groups waste most of the batch on hard (and easy) prompts.
# Below, 4000 groups are sampled for each `G`, one step is taken on each (lr 0.5, with the closed
# form just checked against `ts.policy_loss`, for all groups at once) and the change of pass@1 is
# recorded: its mean is the expected progress, its spread the noise of a single step.


# %%
def one_step_gains(prior, correct, G, estimator, *, n_groups=4000, lr=0.5, seed=0, adv_fn=advantage):
    """Change of pass@1 after one step on each of ``n_groups`` sampled groups, and the zero-variance flags."""
    prior, correct = np.asarray(prior, float), np.asarray(correct, float)
    answers = np.random.default_rng(seed).choice(len(prior), size=(n_groups, G), p=prior)
    rewards = correct[answers]
    adv = np.asarray(adv_fn(rewards, estimator))  # [n_groups, G], tabsim's estimator by default
    onehot = np.eye(len(prior))[answers]  # [n_groups, G, K]
    new = np.log(prior) + lr * (adv[..., None] * (onehot - prior)).mean(1)
    pi_new = np.exp(new) / np.exp(new).sum(-1, keepdims=True)
    wasted = rewards.max(1) == rewards.min(1)
    return pi_new @ correct - prior @ correct, wasted


records = []
for G in (2, 4, 8, 16, 32):
    for est in ("grpo", "dr_grpo"):
        gain, wasted = one_step_gains(prior, correct, G, est)
        records.append({"G": G, "estimator": est, "wasted groups": wasted.mean(),
                        "theory p^G+(1-p)^G": 0.2**G + 0.8**G,
                        "mean gain": gain.mean(), "sd of gain": gain.std(), "mean / sd": gain.mean() / gain.std()})
by_g = pd.DataFrame(records)
by_g

# %% [markdown]
# Read the table along `G`:
#
# * the share of wasted groups follows `p^G + (1 - p)^G` (about two thirds at `G = 2`, essentially
#   none at `G = 32`);
# * the loss is a mean over the group, so each answer weighs `1/G`: a bigger group does not make the
#   step much bigger, it makes it *less noisy*. Dr. GRPO's mean gain only grows like `(G - 1)/G` (an
#   answer's own reward is part of its baseline) while the spread keeps falling, so the
#   signal-to-noise ratio rises steadily;
# * GRPO's gain depends on `G` also through the standard deviation it divides by: a group with one
#   lucky correct answer out of `G` has a small std and gets a large push.

# %%
fig, ax = plt.subplots(2, 1, figsize=(5.8, 6.4), sharex=True)
for est, g in by_g.groupby("estimator"):
    ax[0].plot(g["G"], g["mean gain"], "o-", color=ALGO_COLORS[est], label=est)
    ax[1].plot(g["G"], g["mean / sd"], "o-", color=ALGO_COLORS[est], label=est)
ax[0].set(ylabel="mean change of pass@1", title="expected progress of one step")
ax[1].set(xlabel="G", ylabel="mean / sd", title="signal-to-noise of one step")
for a in ax:
    a.set_xscale("log", base=2)
    a.set_xticks(sorted(by_g["G"].unique()), [str(g) for g in sorted(by_g["G"].unique())])
    a.minorticks_off()
ax[0].legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Dividing by the standard deviation
#
# A group's std is at most 0.5 (binary rewards), reached when half the answers are correct, and
# smaller when the group is lopsided. Dividing by it therefore re-weights the prompts: relative to
# Dr. GRPO, hard prompts (pass@1 near 0) and easy ones (near 1) get bigger steps than prompts in the
# middle. Here is the expected one-step gain against the prompt's pass@1, at `G = 8`, and the ratio
# of the two estimators' steps.

# %%
curve = []
for p in (0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.65, 0.8, 0.9, 0.95, 0.98):
    pr = np.array([(1 - p) / 3, p, (1 - p) / 3, (1 - p) / 3])
    row = {"pass@1 before": p}
    for est in ("grpo", "dr_grpo"):
        row[est] = one_step_gains(pr, correct, 8, est)[0].mean()
    curve.append(row)
curve = pd.DataFrame(curve).set_index("pass@1 before")
curve["grpo / dr_grpo"] = curve["grpo"] / curve["dr_grpo"]

fig, ax = plt.subplots(2, 1, figsize=(5.8, 6.4), sharex=True)
for est in ("grpo", "dr_grpo"):
    ax[0].plot(curve.index, curve[est], "o-", color=ALGO_COLORS[est], label=est)
ax[1].plot(curve.index, curve["grpo / dr_grpo"], "o-", color="k")
ax[0].set(ylabel="mean change of pass@1", title="expected gain of one step")
ax[1].set(xlabel="pass@1 before", ylabel="ratio", title="GRPO step / Dr. GRPO step")
ax[0].legend()
fig.tight_layout()
plt.show()
curve

# %% [markdown]
# Both curves peak in the middle (a prompt that is always right or always wrong yields few useful
# groups), but the ratio is smallest near `p = 0.5` and grows toward both ends: the std
# normalisation up-weights the prompts the policy almost always fails or almost always solves.

# %% [markdown]
# ## Explore: p and G
#
# In a running notebook the sliders redraw the figure: 4000 sampled groups of `G` answers for a
# prompt whose pass@1 is `p`, one step on each, and the distribution of the change of pass@1 under
# GRPO and Dr. GRPO. The spike at 0 is the wasted groups. (The sliders need `ipywidgets`, which the
# `notebook` extra installs; on the documentation site the figure shows the default values.)


# %%
def np_advantage(rewards, estimator):
    """The two estimators in NumPy: no JAX dispatch for each new shape, so a slider redraws quickly."""
    centred = rewards - rewards.mean(-1, keepdims=True)
    return centred / (rewards.std(-1, keepdims=True) + 1e-8) if estimator == "grpo" else centred


check = np.random.default_rng(1).integers(0, 2, (64, 8)).astype(float)
for est in ("grpo", "dr_grpo"):  # the same numbers as tabsim's estimators
    assert np.allclose(np_advantage(check, est), advantage(check, est), atol=1e-5)


def draw_one_step(p=0.2, G=8):
    """Histogram of one step's change of pass@1 for GRPO and Dr. GRPO at pass@1 ``p`` and group size ``G``."""
    pr = np.array([(1 - p) / 3, p, (1 - p) / 3, (1 - p) / 3])
    fig, ax = plt.subplots(figsize=(5.8, 3.8))
    for est in ("grpo", "dr_grpo"):
        gain, wasted = one_step_gains(pr, correct, G, est, adv_fn=np_advantage)
        ax.hist(gain, bins=40, histtype="step", lw=2, color=ALGO_COLORS[est],
                label=f"{est}: mean {gain.mean():+.4f}")
    ax.set(xlabel="change of pass@1 after one step", ylabel="groups", yscale="log",
           title=f"p = {p:.2f}, G = {G}: {wasted.mean():.0%} of groups wasted")
    ax.legend()
    fig.tight_layout()
    plt.show()


explore = widgets.interactive(draw_one_step, p=widgets.FloatSlider(value=0.2, min=0.02, max=0.98, step=0.02),
                              G=widgets.SelectionSlider(options=[2, 4, 8, 16, 32, 64], value=8))
display(explore)


# %% [markdown]
# ## The same step inside the engine
#
# `ts.run` does exactly this for a batch of prompts at every step, compiled and vmapped over seeds
# and arms. Here the `grpo` preset (z-score, clip, no KL) trains 16 prompts for 20 steps with the
# TRUE reward, once with `G = 2` and once with `G = 8` (a static shape: one compilation each). Only
# `G` changes.

# %%
rows = []
for G in (2, 8):
    cfg = {"preset": "grpo", "task": {"n_prompts": 16, "prior_strength": 0.3},
           "arms": {"arms": ["frozen", "true"]}, "algo": {"kl_placement": "none"},
           "train": {"steps": 20, "eval_every": 5, "group_size": G, "seeds": 8}}
    res = ts.run(cfg, progress=False)
    curve_g = res.frame[res.frame.arm == "true"].groupby("step")["pass1"].mean()
    rows.append(curve_g.rename(f"G = {G}"))
pd.concat(rows, axis=1)

# %% [markdown]
# With `G = 8` the policy gains more pass@1 per step: fewer groups are wasted and each update is
# less noisy, at four times the sampled answers.
#
# ## What to try
#
# * Change `answers` so the group holds one correct answer, or seven: how large is GRPO's
#   advantage of the lone correct answer compared with Dr. GRPO's?
# * Set `std_ddof=1` (the Bessel std of TRL and verl) or `std_eps=1e-4` in `advantage`.
# * Make the prompt easy (`prior` with 0.9 on answer 1) and redo the `G` table.
# * In the engine cell, swap `"preset": "grpo"` for `"dr_grpo"`, or sweep the learning rate with
#   `"sweep": {"lr": [0.2, 0.8, 3.2]}` (one compiled program for all three).

# %% [markdown]
# ## Exercises
#
# Try each one before opening its answer.
#
# 1. A group of `G = 8` holds exactly one correct answer. What advantage does that answer get under
#    Dr. GRPO, and under GRPO (population std, tiny `eps`)? Check with `advantage`.
#
# <details><summary>Answer</summary>
#
# The mean reward is 1/8, so Dr. GRPO gives `1 - 1/8 = 0.875` (and `-0.125` to each wrong answer).
# The population std is `sqrt(1/8 * 7/8) = 0.331`, so GRPO gives `0.875 / 0.331 = 2.65` (that is
# `sqrt(7)`) and `-0.378` to each wrong answer: a lone success in a hard prompt gets a push three
# times larger than Dr. GRPO's.
#
# </details>
#
# 2. A prompt's pass@1 is 0.1. What share of its groups teaches nothing at `G = 8`, and at `G = 16`?
#
# <details><summary>Answer</summary>
#
# A group is wasted when all its rewards agree: `0.1^G + 0.9^G`, which is 0.43 at `G = 8` and 0.19
# at `G = 16`.
#
# </details>
#
# 3. Why does the logit of an answer that no one in the group sampled not change at all in one step?
#
# <details><summary>Answer</summary>
#
# Its update is `lr (1/G) [sum of A_g over the answers equal to it - pi_j sum_g A_g]`. The first sum
# is empty, and the second is 0 because a group's advantages sum to zero (the group mean is the
# baseline, with or without the division by the std). Its probability still moves, through the
# softmax's normalisation.
#
# </details>
