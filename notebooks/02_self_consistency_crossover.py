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
# # 02 · The self-consistency crossover
#
# *Level: introductory · runs in about 20 s on 2 cores · reference:
# [estimands](../docs/science.md#estimands-and-the-telescoping-identity), [the
# crossover](../docs/science.md#the-self-consistency-crossover),
# [statistics](../docs/api.md#statistics-tabsimstats)*
#
# **The idea.** A *majority* reward pays an answer when it is the plurality answer of its own
# sampled group (test-time RL). It knows nothing about correctness: it sharpens the policy toward
# what the policy already says most often. So it helps when the base policy's favourite answer is
# correct and hurts when it is wrong, and which of the two happens depends on how strong the prior
# is. The prior strength where the sign flips is the *self-consistency crossover*.
#
# To see how much of a verifier's gain is really "reward design", tabsim trains four paired arms
# (FROZEN, RANDOM, MAJORITY, TRUE: same seeds, same sampling noise) and splits the gain of TRUE over
# FROZEN into three telescoping terms:
#
#     d_total  = acc(TRUE) - acc(FROZEN) = d_null + d_elicit + d_rd
#     d_null   = acc(RANDOM)   - acc(FROZEN)     training with no information
#     d_elicit = acc(MAJORITY) - acc(RANDOM)     self-consistency sharpening
#     d_rd     = acc(TRUE)     - acc(MAJORITY)   what the verifier adds
#
# The naive reading `acc(TRUE) - acc(RANDOM) = d_elicit + d_rd` counts the sharpening as reward
# design; its bias is exactly `d_elicit`.

# %%
import functools

import ipywidgets as widgets
from IPython.display import display
import matplotlib.pyplot as plt
from matplotlib_inline.backend_inline import set_matplotlib_formats
import numpy as np
import pandas as pd

import tabsim as ts
from tabsim.stats import locate_crossover, seed_partition, summarize_partition
from tabsim.plotting import ARM_COLORS, ARM_STYLES, PAGE_RC, TERM_COLORS

pd.set_option("display.precision", 3)
plt.rcParams.update(PAGE_RC)  # figures sized for a page column: text at body size
set_matplotlib_formats("retina")  # twice the pixels at the same size: sharp on high-DPI screens

# %% [markdown]
# ## Where is the prior's mode correct?
#
# The `paper` preset is the reference simulator: 40 prompts, `K = 8` answers of which `k = 2` are
# correct, prior mass `p_s` shared by the correct answers, and one wrong "format" answer whose mass is
# multiplied by `1 + f K` (`f = 0.2`). One correct answer is the mode once `p_s / k` beats the format
# answer's `(1 - p_s) / (K - k) (1 + f K)`:

# %%
K, k, f = 8, 2, 0.2
boost = (1 + f * K) / (K - k)
mode_flip = boost / (1 / k + boost)  # solves p / k = (1 - p) (1 + f K) / (K - k)
print(f"one correct answer becomes the prior's mode above p_s = {mode_flip:.3f}")

# %% [markdown]
# ## Train the four arms across prior strengths
#
# One call: the prior strength is a traced value, so the whole sweep is one compiled program
# (8 seeds x 4 arms x 9 priors, 200 steps).

# %%
PRIORS = [0.2, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.65, 0.8]
res = ts.run({"preset": "paper", "sweep": {"prior_strength": PRIORS}, "train": {"seeds": 8, "eval_every": 20}},
             progress=False)
print(f"{len(res.frame)} rows in {res.provenance['wall_seconds']} s")
res.frame.head()

# %%
fin = res.final()
acc = fin.pivot_table(index="prior_strength", columns="arm", values="pass1", observed=True)
acc["frozen mode correct"] = fin[fin.arm == "frozen"].groupby("prior_strength")["mode_correct"].mean()
acc["majority mode correct"] = fin[fin.arm == "majority"].groupby("prior_strength")["mode_correct"].mean()
acc

# %% [markdown]
# `pass1` is the exact final pass@1 (the policy's mass on the correct answers, averaged over
# prompts and seeds); `mode correct` is the share of prompts whose most likely answer is correct.
# RANDOM stays on FROZEN (on-policy updates with a reward independent of the answer have no drift),
# TRUE climbs everywhere, and MAJORITY moves *down* at weak priors and *up* at strong ones.
#
# The trajectories at one weak and one strong prior:

# %%
fig, axes = plt.subplots(2, 1, figsize=(5.8, 6.4), sharex=True, sharey=True)
for ax, p in zip(axes, (0.35, 0.8)):
    sub = res.frame[res.frame.prior_strength == p]
    for arm, g in sub.groupby("arm", observed=True):
        m = g.groupby("step")["pass1"].mean()
        ls, marker = ARM_STYLES[str(arm)]
        # FROZEN is drawn last, dashed over markers, so it stays visible where RANDOM lies on it
        ax.plot(m.index, m.values, ls=ls, marker=marker, markevery=2, color=ARM_COLORS[str(arm)],
                label=str(arm), zorder=3 if arm == "frozen" else 2)
    ax.set(title=f"prior strength {p}", ylabel="pass@1")
axes[1].set_xlabel("step")
axes[0].legend(ncols=2)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Explore: the prior strength
#
# Move the slider in a running notebook to train the four arms at any prior strength. These runs
# use the *expected-update dynamics* (`"train": {"dynamics": "expected"}`): each step applies the
# exact expected update instead of a sampled one, so a run is deterministic, needs one seed, and
# takes a fraction of a second once compiled. The dashed line marks the prior's mode switch
# computed above. (The slider needs `ipywidgets`, from the `notebook` extra; on the documentation
# site the figure shows the default value, and [the science page](../docs/science.md#the-self-consistency-crossover)
# has a slider over a precomputed grid.)


# %%
@functools.lru_cache(maxsize=None)
def expected_curves(p_s):
    """Mean pass@1 per arm and step under the expected-update dynamics at prior strength ``p_s``."""
    cfg = {"preset": "paper", "task": {"prior_strength": p_s},
           "train": {"dynamics": "expected", "seeds": 1, "eval_every": 10}}
    frame = ts.run(cfg, progress=False).frame
    return frame.pivot_table(index="step", columns="arm", values="pass1", observed=True)


def draw_prior(p_s=0.5):
    curves = expected_curves(round(p_s, 3))
    fig, ax = plt.subplots(figsize=(5.8, 3.8))
    for arm in ("frozen", "random", "majority", "true"):
        ls, marker = ARM_STYLES[arm]
        ax.plot(curves.index, curves[arm], ls=ls, marker=marker, markevery=4, color=ARM_COLORS[arm],
                label=arm, zorder=3 if arm == "frozen" else 2)
    end = curves.iloc[-1]
    d_elicit, d_rd = end["majority"] - end["random"], end["true"] - end["majority"]
    side = "above" if p_s > mode_flip else "below"
    ax.set(xlabel="step", ylabel="pass@1", ylim=(0, 1),
           title=f"p_s = {p_s:.2f} ({side} the mode switch {mode_flip:.3f})\n"
                 f"d_elicit = {d_elicit:+.3f}, d_rd = {d_rd:+.3f}")
    ax.legend(ncols=2, loc="lower right")
    fig.tight_layout()
    plt.show()


explore = widgets.interactive(draw_prior, p_s=widgets.FloatSlider(value=0.5, min=0.1, max=0.9, step=0.025))
display(explore)


# %% [markdown]
# ## The partition, per seed and with intervals
#
# `seed_partition` forms the terms on every seed (the arms of a seed are paired) and checks the
# telescoping identity on each row; `summarize_partition` gives estimates and intervals over seeds
# (Student t here: with 8 seeds the bootstrap intervals undercover).

# %%
per_seed = seed_partition(res.frame, by=["prior_strength"])
summary = summarize_partition(per_seed, by=["prior_strength"], method="t")
terms = summary.pivot(index="prior_strength", columns="term", values="estimate")
terms[["d_null", "d_elicit", "d_rd", "d_total", "d_naive", "rd_fraction"]].round(4)

# %%
summary[summary.term == "d_elicit"][["prior_strength", "estimate", "ci_low", "ci_high", "n_seeds"]]

# %%
fig, ax = plt.subplots(figsize=(5.8, 4.2))
x = np.asarray(PRIORS)  # p_s on a numeric axis: the uneven spacing of the levels shows
pos = np.zeros(len(PRIORS))
neg = np.zeros(len(PRIORS))
for term, color in ((t, TERM_COLORS[t]) for t in ("d_null", "d_elicit", "d_rd")):
    v = terms[term].to_numpy()
    base = np.where(v >= 0, pos, neg)
    ax.bar(x, v, width=0.04, bottom=base, color=color, label=term)
    pos, neg = pos + np.clip(v, 0, None), neg + np.clip(v, None, 0)
ax.plot(x, terms["d_total"], "o-", color=TERM_COLORS["d_total"], label="d_total")
ax.axhline(0, color="grey", lw=0.8)
ax.set_xticks([0.2, 0.35, 0.5, 0.65, 0.8])
ax.set(xlabel="prior strength p_s", ylabel="change of pass@1", title="d_total = d_null + d_elicit + d_rd")
ax.legend(ncols=2)
fig.tight_layout()
plt.show()

# %% [markdown]
# Below the crossover `d_elicit < 0`: the verifier has to undo what sharpening alone would do, so
# `d_rd` exceeds the whole gain and the reward-design fraction `d_rd / d_naive` is above 1. Well
# above it `d_elicit` carries most of the gain and the fraction falls toward 0: there a paper
# comparing TRUE with RANDOM would credit its verifier with what self-consistency gives for free.
#
# ## Locating the crossover
#
# `locate_crossover` interpolates the first sign change of the mean `d_elicit` along the grid. Its
# interval is every prior where a t test over the seeds does not reject "the mean curve is zero
# here": a t band inverted at the root, which keeps its 95% coverage with few seeds.

# %%
cross = locate_crossover(per_seed, term="d_elicit", random_state=0)
print(f"d_elicit changes sign at p_s = {cross.estimate:.3f} "
      f"(95% interval {cross.ci_low:.3f} to {cross.ci_high:.3f}); "
      f"one correct answer becomes the prior's mode at {mode_flip:.3f}")

# %% [markdown]
# Compare the two numbers printed above with the table's `majority mode correct` column. Near the
# crossover the sign of `d_elicit` follows where MAJORITY training *ends up*: the prompts whose
# trained mode is a correct answer. There are two correct answers and one format answer, so a
# group's plurality can land on a correct answer often even while the format answer is still
# slightly the more likely single answer; that is why the crossover can sit below the prior's mode
# flip in this task.
#
# ## What to try
#
# * Set `"arms": {"tie": "random"}` (ties broken at random instead of toward the lowest index).
# * Replace `majority` by `majority_offline` (labels fixed once from 64 base samples) with
#   `"arms": {"arms": ["frozen", "random", "majority_offline", "true"]}` and pass
#   `majority_arm="majority_offline"` to `seed_partition`.
# * Raise the format boost (`"task": {"format_boost": 1.0}`): the crossover moves to stronger priors.
# * Add heterogeneity (`"task": {"heterogeneity": 5.0}`): prompts get their own p_s, and the sign
#   change is smoothed over the grid.

# %% [markdown]
# ## Exercises
#
# Try each one before opening its answer.
#
# 1. With the format boost raised to `f = 1.0` (`K = 8`, `k = 2`), where does a correct answer
#    become the prior's mode? Use the [mode-switch
#    formula](../docs/science.md#the-self-consistency-crossover).
#
# <details><summary>Answer</summary>
#
# `1 + f K = 9`, so `p* = k (1 + f K) / (K - k + k (1 + f K)) = 18 / 24 = 0.75`: the crossover moves
# to much stronger priors (the third item of *What to try* shows it).
#
# </details>
#
# 2. Why does RANDOM stay on FROZEN in this notebook?
#
# <details><summary>Answer</summary>
#
# The `paper` preset is on-policy with no ratio and no clip, and a random reward does not depend on
# the answer, so every answer's expected advantage is 0 and the expected update is 0; the KL term
# pulls toward the prior, where the policy already is. What is left is sampling noise, which
# averages out over seeds.
#
# </details>
#
# 3. At `p_s = 0.35`, `d_elicit < 0`. Is the reward-design fraction above or below 1, and what does
#    that say about the naive reading `acc(TRUE) - acc(RANDOM)`?
#
# <details><summary>Answer</summary>
#
# `d_naive = d_elicit + d_rd < d_rd`, so `d_rd / d_naive > 1`. Below the crossover the naive reading
# *understates* what the verifier adds: it must also undo the harm that sharpening toward a wrong
# mode would do.
#
# </details>
