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
# # 04 · Length bias in a tree: GRPO vs Dr. GRPO
#
# *Level: intermediate · runs in about 15 s on 2 cores · reference: [GRPO-family
# semantics](../docs/science.md#grpo-family-semantics), [the
# tree-MDP](../docs/howto.md#use-the-tree-mdp), [presets](../docs/presets.md)*
#
# **The idea.** In a bandit every answer is one token, so how the loss is averaged over tokens does
# not matter. With answers of different lengths it does. GRPO's original loss is
# *seq-mean-token-mean*: each answer's token losses are averaged over **its own length**, then
# averaged over answers,
#
#     L_GRPO = (1/G) sum_i (1/|o_i|) sum_t  -A_i log pi(o_i,t)
#
# so the total push on answer `i`'s log-probability is `A_i / |o_i|`. A long wrong answer
# (`A < 0`) is pushed down less than a short one, and a short correct answer is pushed up more than
# a long one. Dr. GRPO (arXiv 2503.20783) divides every answer's token *sum* by the same constant,
# `G x T_max` (*seq-mean-token-sum-norm*), and drops the std scaling, so the push on an answer no
# longer depends on its length.
#
# tabsim's `tree` environment makes lengths real: an answer is a path of tokens through a small
# tree, ending at STOP or at depth `D`; many paths map to each of the `K` answers. Its prior can make
# wrong answers longer than correct ones, as they tend to be in language models.

# %%
import matplotlib.pyplot as plt
from matplotlib_inline.backend_inline import set_matplotlib_formats
import numpy as np
import pandas as pd

import tabsim as ts
from tabsim.plotting import ALGO_COLORS, PAGE_RC

pd.set_option("display.precision", 3)
plt.rcParams.update(PAGE_RC)  # figures sized for a page column: text at body size
set_matplotlib_formats("retina")  # twice the pixels at the same size: sharp on high-DPI screens

# %% [markdown]
# ## The task
#
# Depth `D = 5`, branching 3 (STOP plus two content tokens at every node), 16 prompts, `K = 8`
# answers of which 2 are correct, prior pass@1 0.4. The length profile of the prior,
# `P(L | correct) ∝ exp(lambda_c (L - 1)/(D - 1))`, has `lambda = +1` for wrong answers and `-1` for
# correct ones: wrong answers are longer.
#
# Two compositions, everything else equal (token-level ratio clipped at 0.2, no KL, SGD, the TRUE
# reward against FROZEN), each swept over three learning rates in one compiled program:
#
# | cell | advantage | aggregation |
# |---|---|---|
# | `grpo` | `(r - mean) / (std + 1e-4)` | seq-mean-token-mean |
# | `dr_grpo` | `r - mean` | seq-mean-token-sum-norm |

# %%
TASK = {"env": "tree", "n_prompts": 16, "n_answers": 8, "n_correct": 2, "prior_strength": 0.4, "format_boost": 0.0,
        "tree": {"depth": 5, "branching": 3, "length_slope_wrong": 1.0, "length_slope_correct": -1.0}}
CELLS = {"grpo": {"estimator": "grpo", "aggregation": "seq-mean-token-mean"},
         "dr_grpo": {"estimator": "dr_grpo", "aggregation": "seq-mean-token-sum-norm"}}
LRS = [5.0, 20.0, 80.0]


def config(cell):
    return {"task": TASK, "arms": {"arms": ["frozen", "true"]},
            "algo": {**cell, "std_ddof": 1, "std_eps": 1e-4, "ratio": "token", "surrogate": "clip",
                     "eps_low": 0.2, "eps_high": 0.2, "kl_placement": "none", "optimizer": "sgd"},
            "train": {"steps": 100, "batch_size": 16, "group_size": 8, "seeds": 8, "eval_every": 10},
            "sweep": {"lr": LRS}}


frame = pd.concat([ts.run(config(cell), progress=False).frame.assign(cell=name) for name, cell in CELLS.items()],
                  ignore_index=True)
prior = frame[(frame.arm == "frozen") & (frame.step == 0)][["pass1", "len_mean", "len_correct", "len_wrong"]].mean()
print("the prior (FROZEN):", prior.round(3).to_dict())

# %% [markdown]
# `len_correct` and `len_wrong` are exact: the expected length of an answer given that it is correct
# (wrong), computed by dynamic programming over the tree and averaged over prompts.
#
# ## What training with the verifier does to lengths

# %%
true = frame[frame.arm == "true"]
curves = true.groupby(["cell", "lr", "step"])[["pass1", "len_wrong", "len_correct"]].mean()
start = curves.xs(0, level="step")
end = curves.xs(100, level="step")
summary = pd.DataFrame({"final pass@1": end["pass1"],
                        "change of len_wrong": end["len_wrong"] - start["len_wrong"],
                        "change of len_correct": end["len_correct"] - start["len_correct"]})
summary

# %%
fig, axes = plt.subplots(3, 1, figsize=(5.8, 10.5))
colors = {a: ALGO_COLORS[a] for a in ("grpo", "dr_grpo")}
for (cell, lr), c in curves.groupby(level=["cell", "lr"]):
    c = c.droplevel(["cell", "lr"])
    kw = dict(color=colors[cell], ls={5.0: ":", 20.0: "-", 80.0: "--"}[lr], label=f"{cell}, lr {lr:g}")
    axes[0].plot(c.index, c["len_wrong"], **kw)
    axes[1].plot(c.index, c["len_correct"], **kw)
    axes[2].plot(c["pass1"], c["len_wrong"], marker=".", **kw)
axes[0].set(title="E[length | wrong]", xlabel="step", ylabel="tokens")
axes[1].set(title="E[length | correct]", xlabel="step", ylabel="tokens")
axes[2].set(title="E[length | wrong] against pass@1", xlabel="pass@1", ylabel="tokens")
axes[0].legend(fontsize=10, ncols=2)
fig.tight_layout()
plt.show()

# %% [markdown]
# GRPO also climbs faster at the same learning rate (its std scaling enlarges the steps), so a
# comparison at equal *step* mixes two things. The bottom panel and the table below compare the two
# at equal **pass@1**: the wrong-answer length when the policy first reaches a given accuracy.

# %%
rows = []
for (cell, lr), c in curves.groupby(level=["cell", "lr"]):
    p, lw = c["pass1"].to_numpy(), c["len_wrong"].to_numpy()
    for target in (0.6, 0.8):
        reached = p.max() >= target
        rows.append({"cell": cell, "lr": lr, "pass@1": target,
                     "len_wrong growth": np.interp(target, p, lw) - lw[0] if reached else np.nan})
at_equal = pd.DataFrame(rows).pivot_table(index=["pass@1", "lr"], columns="cell", values="len_wrong growth")
at_equal

# %% [markdown]
# Read the two tables:
#
# * with the verifier reward, correct answers get **shorter** under both compositions;
# * at equal pass@1, wrong answers are **longer than in the prior under both**, and more under
#   GRPO's seq-mean-token-mean aggregation at every learning rate (NaN: that accuracy was not reached
#   in 100 steps);
# * at the end of the run GRPO's wrong answers are still longer at every learning rate, while Dr.
#   GRPO's grow less and, once the policy nearly saturates (the largest learning rate), can come
#   back to about the prior's length.
#
# So Dr. GRPO's aggregation removes much of the extra growth but, in this tree, not all of it. The full study
# (`experiments/tree_length_bias`, 16 seeds, 300 steps, 2 x 2 design) separates the two ingredients:
# the **aggregation** is what matters (swapping only the estimator changes little), and in its
# control with no length preference in the prior, wrong answers also lengthen under Dr. GRPO, so
# part of the growth comes from the tree itself rather than from the loss.
#
# ## Said exactly: the expected dynamics
#
# Eight seeds leave noise in these tables. A small tree's exact expected update takes it out:
# `tabsim.sim.expected.expected_update` enumerates every group of G leaves of each prompt by its counts
# and applies the engine's loss to each, so iterating it gives the path of the mean update with no
# seed at all ([expected dynamics](../docs/expected.md#length-bias-said-exactly)). The same task at
# depth 3 (15 leaves), groups of G = 4 (3,060 per prompt, every one of them every step), learning
# rate 20, 30 steps:

# %%
import jax

from tabsim.config import resolve
from tabsim.sim.expected import expected_update
from tabsim.sim.params import Hyper
from tabsim.sim.rng import seed_array
from tabsim.runtime.run import algo_spec, make_env, schedule


def exact_lengths(cell, steps=30):
    """E[length | wrong], E[length | correct] and pass@1 before and after ``steps`` exact expected steps."""
    cfg = resolve(config(cell), task={**TASK, "tree": {**TASK["tree"], "depth": 3}}, algo={"lr": 20.0},
                  train={"group_size": 4, "seeds": 1, "steps": steps, "eval_every": steps}, sweep={})
    env, algo, sched, hp = make_env(cfg), algo_spec(cfg), schedule(cfg), Hyper(**cfg.hyper_values())
    # compiled once each: called as plain functions, every array operation inside would compile on its own
    init_task, evaluate = jax.jit(env.init_task), jax.jit(env.evaluate)
    task = init_task(seed_array([0])[0], hp)
    z = task.prior_logits
    before = evaluate(z, task, hp)
    for _ in range(steps):
        z = expected_update(env, algo, sched, "true", task, z, hp)
    after = evaluate(z, task, hp)
    return {"pass@1": float(after["pass1"]),
            "change of len_wrong": float(after["len_wrong"] - before["len_wrong"]),
            "change of len_correct": float(after["len_correct"] - before["len_correct"])}


exact = pd.DataFrame({name: exact_lengths(cell) for name, cell in CELLS.items()}).T
exact

# %% [markdown]
# With no seed noise the reading is plain: GRPO's aggregation lengthens wrong answers more (about
# +0.23 tokens in 30 steps), Dr. GRPO's lengthens them less (about +0.08) but not to zero, and correct
# answers get shorter under both. Run with no length preference in the prior
# (`experiments/tree_length_bias/expected.py`), wrong answers still lengthen, by +0.46 under GRPO and
# +0.22 under Dr. GRPO: part of the lengthening comes from the tree's shared prefixes (a prefix that
# leads to a correct answer is pushed up and takes its longer wrong continuations with it), not from
# the loss.
#
# ## What to try
#
# * Separate the two ingredients: add a cell `{"estimator": "grpo", "aggregation":
#   "seq-mean-token-sum-norm"}` and one `{"estimator": "dr_grpo", "aggregation": "seq-mean-token-mean"}`.
# * Try `"token-mean"` (DAPO's aggregation: every token of the batch weighs the same).
# * Remove the length preference (`length_slope_wrong = length_slope_correct = 0`).
# * Swap the token ratio for GSPO's sequence ratio (`"ratio": "sequence"` with tiny clip epsilons,
#   the `gspo` preset).

# %% [markdown]
# ## Exercises
#
# Try each one before opening its answer.
#
# 1. Under `seq-mean-token-mean`, how much does each token of an answer of length `L` weigh in the
#    loss, and why does that lengthen wrong answers?
#
# <details><summary>Answer</summary>
#
# `1 / L` (the answer's token mean), times the answer's share of the batch. A long wrong answer
# (negative advantage) is pushed down less per token than a short one, so among wrong answers the
# long ones lose less mass and the wrong-answer length grows. `seq-mean-token-sum-norm` divides by a
# constant (answers x maximum length), so every token weighs the same.
#
# </details>
#
# 2. Why does the notebook compare the two compositions at equal pass@1 rather than at equal step?
#
# <details><summary>Answer</summary>
#
# GRPO's std scaling makes its steps larger, so at the same step it is also further along in
# accuracy; at equal pass@1 the comparison is about length alone.
#
# </details>
