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
# # 03 · Why random rewards can move a policy: clipping bias and off-policy reuse
#
# *Level: intermediate · runs in about 25 s on 2 cores · reference: [what a faithful simulator
# shows](../docs/science.md#what-a-faithful-simulator-shows), [presets and
# reuse](../docs/presets.md#notes-on-the-mapping),
# [statistics](../docs/api.md#statistics-tabsimstats)*
#
# **The idea.** A RANDOM reward (1 with probability `gamma`, independent of the answer) carries no
# information, and with one on-policy update per batch its expected policy gradient is exactly 0.
# Papers nevertheless report that random rewards improve some models. The proposed mechanism
# ([what a faithful simulator shows](../docs/science.md#what-a-faithful-simulator-shows)) is the PPO
# clip under *off-policy reuse*: when a rollout batch is reused for several
# updates, the ratio `pi / pi_old` moves away from 1, the clip cuts some pushes and not others, and
# the asymmetry drifts the policy toward its high-prior answers: up when the prior's mode is
# correct, down when it is wrong.
#
# This notebook measures `d_null = acc(RANDOM) - acc(FROZEN)` in three settings and changes one
# number, `gamma`. What the tabular simulator shows is more specific than the slogan:
#
# * the **clip's own effect** does point toward the mode;
# * but **reuse itself**, without a clip, drifts the other way;
# * so the **net** drift points toward the mode for a skewed random reward (`gamma = 0.2`) and the
#   opposite sign, when the mode is correct, for the symmetric one (`gamma = 0.5`).
#
# The full study is `experiments/clipping_null` (32 seeds, 5 priors, 2 learning rates); this is a
# small version of it.

# %%
import functools

import ipywidgets as widgets
from IPython.display import display
import matplotlib.pyplot as plt
from matplotlib_inline.backend_inline import set_matplotlib_formats
import numpy as np
import pandas as pd

import tabsim as ts
from tabsim.stats import mean_interval
from tabsim.plotting import ARM_COLORS, PAGE_RC, SETTING_COLORS

pd.set_option("display.precision", 4)
plt.rcParams.update(PAGE_RC)  # figures sized for a page column: text at body size
set_matplotlib_formats("retina")  # twice the pixels at the same size: sharp on high-DPI screens

# %% [markdown]
# ## Three settings, one reward that knows nothing
#
# The `dapo` preset's composition (group z-score, clip, token-mean loss) on a bandit of 16 prompts,
# `K = 8`, `k = 2` correct, prior strength 0.8, arms FROZEN and RANDOM (paired seeds). Three
# settings, each its own compiled program:
#
# | setting | updates per rollout batch | surrogate |
# |---|---|---|
# | `on_policy` | 1 | clip 0.2 (never fires: the ratio is 1) |
# | `reuse_clip` | 4 full-batch passes | clip 0.2 |
# | `reuse_noclip` | 4 full-batch passes | the unclipped importance ratio |
#
# Each prompt owns its logits in a bandit, so reuse means passes over the same batch (`epochs`), not
# minibatches (see [the presets' notes](../docs/presets.md#notes-on-the-mapping)). A large learning
# rate (4.0) makes the clip bind on a few per
# cent of the answers. Two traced factors ride along in each program: `gamma` (0.5, 0.2) and the
# format boost `f` (0.2: the prior's mode is a correct answer; 4.0: the boosted wrong "format"
# answer is the mode).

# %%
SETTINGS = {"on_policy": {"epochs": 1},
            "reuse_clip": {"epochs": 4},
            "reuse_noclip": {"epochs": 4, "surrogate": "importance"}}


def config(algo):
    return {"preset": "dapo",
            "task": {"n_prompts": 16, "n_answers": 8, "n_correct": 2, "prior_strength": 0.8},
            "arms": {"arms": ["frozen", "random"]},
            "algo": {**algo, "eps_low": 0.2, "eps_high": 0.2, "filter": False, "lr": 4.0},
            "train": {"steps": 100, "batch_size": 16, "group_size": 8, "seeds": 8},
            "sweep": {"gamma": [0.5, 0.2], "format_boost": [0.2, 4.0]}}


final = pd.concat([ts.run(config(algo), progress=False).final().assign(setting=name)
                   for name, algo in SETTINGS.items()], ignore_index=True)
mode = final[final.arm == "frozen"].groupby("format_boost")["mode_correct"].mean()
print("share of prompts whose prior mode is correct:", mode.to_dict())

# %% [markdown]
# ## d_null per setting
#
# Per seed, `d = pass1(RANDOM) - pass1(FROZEN)` (same task draw, same sampling noise); the table gives
# its mean over seeds with a Student-t 95% interval, and the share of answers on which the clip
# bound (`clip_frac`, for `reuse_noclip` where it *would* have bound).

# %%
KEYS = ["setting", "gamma", "format_boost"]
wide = final.pivot_table(index=[*KEYS, "seed"], columns="arm", values="pass1", observed=True)
d = (wide["random"] - wide["frozen"]).rename("d_null")
# the clip's own contribution: the same seeds with and without the clip
clip_effect = d.xs("reuse_clip", level="setting") - d.xs("reuse_noclip", level="setting")
d = pd.concat([d, pd.concat({"clip_effect": clip_effect}, names=["setting"])])

rows = []
for key, x in d.groupby(level=KEYS, sort=False):
    iv = mean_interval(x.to_numpy(), method="t")
    rows.append({**dict(zip(KEYS, key)), "mode": "correct" if mode[key[2]] > 0.5 else "wrong",
                 "d_null": iv.estimate, "ci_low": iv.low, "ci_high": iv.high})
table = pd.DataFrame(rows)
clip = final[final.arm == "random"].groupby(KEYS)["clip_frac"].mean().rename("clip_frac")
table = table.join(clip, on=KEYS)
table.pivot_table(index=["gamma", "format_boost", "mode"], columns="setting", values="d_null", sort=False)

# %%
fig, axes = plt.subplots(2, 1, figsize=(5.8, 7.0), sharey=True)
colors = {s: SETTING_COLORS[s] for s in ("on_policy", "reuse_noclip", "reuse_clip", "clip_effect")}
for ax, gamma in zip(axes, (0.5, 0.2)):
    sub = table[table.gamma == gamma]
    for i, (setting, color) in enumerate(colors.items()):
        s = sub[sub.setting == setting]
        x = np.arange(len(s)) + (i - 1.5) * 0.2
        ax.bar(x, s.d_null, width=0.2, color=color, label=setting,
               yerr=[s.d_null - s.ci_low, s.ci_high - s.d_null], capsize=2)
    ax.set_xticks(np.arange(2), [f"f={f:g}\nmode {m}" for f, m in zip(s.format_boost, s["mode"])])
    ax.axhline(0, color="k", lw=0.8)
    ax.set(title=f"random reward, gamma = {gamma}", ylabel="d_null (pass@1)")
axes[1].legend(ncols=2)
fig.tight_layout()
plt.show()
table.round(4)

# %% [markdown]
# ## Reading it
#
# 1. **On policy, nothing much happens.** The ratio is exactly 1, the clip never fires
#    (`clip_frac = 0`), and `d_null` stays small next to the reuse effects. (At this large learning
#    rate a small positive second-order drift of a few thousandths can show up; it vanishes at the
#    presets' `lr = 0.8`.)
# 2. **Reuse without the clip drifts away from the mode.** The importance weights of a reused batch
#    favour the answers whose probability moved most, the low-probability ones: pass@1 falls when
#    the mode is correct and rises when the format answer is the mode.
# 3. **The clip pushes toward the mode.** `clip_effect` (clip minus no clip, same seeds) has the
#    sign of the mode: positive when the mode is correct, negative when it is wrong. It is large at
#    `gamma = 0.2`; at `gamma = 0.5` it is smaller and 8 seeds may not separate it from 0 (the
#    32-seed study does).
# 4. **The net sign depends on `gamma`.** With `gamma = 0.2` the advantages are skewed (rare large
#    positive ones), the clip cuts the big pushes of low-probability answers while the mode keeps
#    its own, and the clip wins: `d_null` has the sign of the mode. With `gamma = 0.5` the advantages are
#    symmetric, the reuse drift wins: `d_null` is *negative* with a correct mode (and positive
#    when the format answer is the mode).
#
# The numbers behind points 3 and 4, from the table above:

# %%
for gamma in (0.2, 0.5):
    for f in (0.2, 4.0):
        r = table.set_index(KEYS).loc[("reuse_clip", gamma, f)]
        e = table.set_index(KEYS).loc[("clip_effect", gamma, f)]
        print(f"gamma={gamma}, f={f:g} (mode {r['mode']}): reuse+clip d_null = {r.d_null:+.3f} "
              f"[{r.ci_low:+.3f}, {r.ci_high:+.3f}]; clip effect = {e.d_null:+.3f} [{e.ci_low:+.3f}, {e.ci_high:+.3f}]")

# %% [markdown]
# ## Explore: gamma, the clip and the epochs
#
# In a running notebook the sliders retrain FROZEN and RANDOM (8 seeds, the settings above, both
# format boosts) at any `gamma`, symmetric clip `eps` and number of passes over each rollout batch,
# and show `d_null` with its 95% interval. `gamma` and `eps` are traced values, so moving them reuses
# the compiled program; each new number of epochs compiles once (a few seconds), after which it is
# as fast. (The sliders need `ipywidgets`, from the `notebook` extra.)


# %%
@functools.lru_cache(maxsize=None)
def null_drift(gamma, eps, epochs):
    """Per-seed d_null and the clip's firing rate at each format boost (sampled runs, 8 seeds)."""
    cfg = config({"epochs": epochs})
    cfg["algo"].update(eps_low=eps, eps_high=eps)
    cfg["arms"]["gamma"] = gamma
    cfg["sweep"] = {"format_boost": [0.2, 4.0]}
    fin = ts.run(cfg, progress=False).final()
    wide = fin.pivot_table(index=["format_boost", "seed"], columns="arm", values="pass1", observed=True)
    clip_frac = fin[fin.arm == "random"].groupby("format_boost")["clip_frac"].mean()
    return wide["random"] - wide["frozen"], clip_frac


def draw_null(gamma=0.2, eps=0.2, epochs=4):
    d, clip_frac = null_drift(round(gamma, 3), round(eps, 3), epochs)
    fig, ax = plt.subplots(figsize=(5.8, 3.6))
    for i, f in enumerate((0.2, 4.0)):
        iv = mean_interval(d.xs(f).to_numpy(), method="t")
        ax.bar(i, iv.estimate, yerr=[[iv.estimate - iv.low], [iv.high - iv.estimate]], capsize=4, width=0.5,
               color=ARM_COLORS["random"])
        ax.annotate(f"clip fired on {clip_frac[f]:.1%}", (i, 0), xytext=(0, -28), textcoords="offset points",
                    ha="center", fontsize=11)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks([0, 1], ["f = 0.2: mode correct", "f = 4.0: mode wrong"])
    ax.set(ylabel="d_null (pass@1)", xlim=(-0.6, 1.6),
           title=f"gamma = {gamma:.2f}, clip eps = {eps:.2f}, {epochs} epoch{'s' * (epochs > 1)}")
    fig.tight_layout()
    plt.show()


explore = widgets.interactive(draw_null, gamma=widgets.FloatSlider(value=0.2, min=0.0, max=1.0, step=0.05),
                              eps=widgets.FloatSlider(value=0.2, min=0.02, max=1.0, step=0.02),
                              epochs=widgets.SelectionSlider(options=[1, 2, 4, 8], value=4))
display(explore)


# %% [markdown]
# So "random rewards help strong-prior models through clipping" is true in this simulator only for
# some random rewards. The 32-seed study (`experiments/clipping_null/README.md`) finds the same
# pattern at five priors, and the pre-registered test of the symmetric clip at `gamma = 0.5`
# (`preregistration/clipping_null`, H4) came out INCONCLUSIVE. A language model differs from the
# table in one important way: its parameters are shared across prompts and tokens, so its clip
# binds at far smaller learning rates, and the balance of the two drifts need not be the same.
#
# ## What to try
#
# * `lr = 0.8` (the presets' value): the clip almost never binds and both reuse drifts shrink.
# * An asymmetric clip, `"eps_high": 0.05` (the pre-registered primary setting): at `gamma = 0.5`
#   the drift then points toward the mode.
# * `"epochs": 8` (the spurious-rewards recipe's 8 updates per batch).
# * `gamma = 0.0`: every group has the same reward, every advantage is 0, nothing moves.
# * A weaker prior, `"prior_strength": 0.35` with `f = 0.2`: the mode is wrong but two correct
#   answers share the mass, and the sign is no longer simply the mode's (see the study's README).

# %% [markdown]
# ## Exercises
#
# Try each one before opening its answer.
#
# 1. In the `on_policy` setting the clip is set to 0.2 but `clip_frac` is 0. Why can it not fire?
#
# <details><summary>Answer</summary>
#
# With one update per fresh batch the ratio `pi / pi_old` is evaluated at `pi = pi_old`: it is
# exactly 1, inside `[1 - eps, 1 + eps]`, so the clipped and unclipped losses have the same
# gradient.
#
# </details>
#
# 2. What is `d_null` with `gamma = 0`, in every setting?
#
# <details><summary>Answer</summary>
#
# Exactly 0: every reward is 0, every group has zero variance, every advantage is 0, and nothing
# moves (with the filter on, every group is dropped).
#
# </details>
#
# 3. `clip_effect` is the difference of `reuse_clip` and `reuse_noclip` on the same seeds. Why pair
#    them instead of comparing the two settings' means?
#
# <details><summary>Answer</summary>
#
# The same seed shares the task draw and every sampling draw across settings, so the per-seed
# difference removes that common noise: its interval is far narrower than that of a difference of
# two independent means.
#
# </details>
