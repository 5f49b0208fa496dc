"""Study: the null term d_null = acc(RANDOM) - acc(FROZEN) with and without reuse and clipping.

Question (docs/science.md): does a reward that knows nothing about correctness move pass@1 once each rollout
batch is reused for several clipped updates, and does the direction follow the prior's mode?

Design: the ``spurious_rewards`` preset (z-score with the unbiased std, clip 0.2, token-mean, no KL,
16 answers per prompt; N = 40 prompts, K = 8 answers, k = 2 correct) with arms FROZEN and RANDOM,
full factorial of

* setting: ``no_reuse`` (one on-policy update per batch), ``reuse_clip`` (8 sequential updates per
  batch, ratio against the rollout policy, clip 0.2), ``reuse_noclip`` (the same 8 updates with the
  unclipped importance ratio: the control that isolates the clip);
* prior strength p_s in {0.2, 0.35, 0.5, 0.65, 0.8} (the reference priors);
* format boost f in {0.2, 4.0}: at f = 0.2 the mode is wrong for p_s <= 0.35 and correct above; at
  f = 4.0 the format answer is the mode at every p_s (wrong mode at a strong prior);
* gamma in {0.5, 0.2}: P(reward = 1) of the random arm (0.5 is the reference arm; 0.2 skews the
  advantages: rare large positive, frequent small negative ones);
* lr in {4.0, 0.8}: 4.0 makes the clip fire on a few per cent of the tokens; 0.8 (the preset's) on
  about 1e-5 of them.

d_null is paired per seed (same task draw and sampling noise for both arms); its interval is the
BCa bootstrap over seeds of :func:`tabsim.stats.mean_interval` (fixed random state).

    python experiments/clipping_null/run.py [--quick] [--out DIR]

Writes ``results.parquet`` (tidy run frame), ``d_null.csv`` (one row per condition), ``summary.json``
(for each setting a list of ``{prior_strength, d_null, ci_low, ci_high, ...}`` at the reference
gamma 0.5 and lr 4.0, plus every condition) and ``d_null.png/.pdf``.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

import tabsim as ts
from tabsim.studies.scripts import study_args, study_store, write_study
from tabsim.files.atomic import write_frame
from tabsim.plotting import SETTING_COLORS
from tabsim.stats import mean_interval

OUT = Path(__file__).resolve().parent / "out"
PRIORS = [0.2, 0.35, 0.5, 0.65, 0.8]
FORMAT_BOOSTS = [0.2, 4.0]
GAMMAS = [0.5, 0.2]
LRS = [4.0, 0.8]
REFERENCE = {"gamma": 0.5, "lr": 4.0}
SETTINGS = {
    "no_reuse": {"epochs": 1},
    "reuse_clip": {"epochs": 8},
    "reuse_noclip": {"epochs": 8, "surrogate": "importance"},
}
K, N_CORRECT = 8, 2
# derived, per seed: d_null(reuse_clip) - d_null(reuse_noclip), what the clip itself adds
DERIVED = "clip_effect"


def config(setting: str, seeds: int, steps: int) -> dict:
    return {"preset": "spurious_rewards",
            "task": {"n_prompts": 40, "n_answers": K, "n_correct": N_CORRECT},
            "arms": {"arms": ["frozen", "random"]},
            "algo": {**SETTINGS[setting]},
            "train": {"steps": steps, "seeds": seeds, "eval_every": steps // 4},
            "sweep": {"prior_strength": PRIORS, "format_boost": FORMAT_BOOSTS, "gamma": GAMMAS, "lr": LRS}}


def prior(p_s: float, f: float) -> np.ndarray:
    """The bandit prior of one prompt: k correct answers first, then the format answer, then the rest."""
    w = np.array([p_s / N_CORRECT] * N_CORRECT + [(1 - p_s) / (K - N_CORRECT) * (1 + f * K)]
                 + [(1 - p_s) / (K - N_CORRECT)] * (K - N_CORRECT - 1))
    return w / w.sum()


def prior_facts(p_s: float, f: float) -> dict:
    """Mode correctness (a correct answer outweighs the format answer) and the collision criterion:
    the sign of ``sum_c pi_c (pi_c - sum_a pi_a^2)``, i.e. whether the correct answers hold more mass than
    the policy's collision probability (what a rich-get-richer drift of every answer rewards)."""
    pi = prior(p_s, f)
    collision = float((pi**2).sum())
    return {"mode_correct": bool(pi[0] > pi[N_CORRECT]), "pass1_prior": float(pi[:N_CORRECT].sum()),
            "collision_margin": float((pi[:N_CORRECT] * (pi[:N_CORRECT] - collision)).sum())}


def d_null_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (setting, gamma, lr, format_boost, prior_strength): d_null with its BCa interval."""
    fin = frame[frame["step"] == frame["step"].max()]
    keys = ["setting", "gamma", "lr", "format_boost", "prior_strength"]
    wide = fin.pivot_table(index=[*keys, "seed"], columns="arm", values="pass1", observed=True)
    d = (wide["random"] - wide["frozen"]).rename("d")
    # the clip's own effect: same seeds (same task draws and sampling streams) with and without the clip
    effect = (d.xs("reuse_clip", level="setting") - d.xs("reuse_noclip", level="setting")).dropna()
    effect = pd.concat({DERIVED: effect}, names=["setting"])
    d = pd.concat([d, effect])
    clip = (fin[fin["arm"] == "random"].groupby(keys, observed=True)["clip_frac"].mean())
    clip = pd.concat([clip, pd.concat({DERIVED: clip.xs("reuse_clip", level="setting")}, names=["setting"])])
    rows = []
    for key, x in d.groupby(level=list(range(len(keys))), observed=True):
        iv = mean_interval(x.to_numpy(), method="bca", n_resamples=4000, random_state=0)
        row = dict(zip(keys, key))
        row.update(d_null=iv.estimate, se=iv.se, ci_low=iv.low, ci_high=iv.high, n_seeds=int(x.size),
                   clip_frac=float(clip.loc[key]), **prior_facts(row["prior_strength"], row["format_boost"]))
        rows.append(row)
    return pd.DataFrame(rows)


def sign_of(row) -> int:
    """+1 / -1 when the interval excludes 0, else 0."""
    return 1 if row["ci_low"] > 0 else (-1 if row["ci_high"] < 0 else 0)


def findings(table: pd.DataFrame) -> dict:
    """Per (setting, gamma, lr): how the sign of d_null (0 when its interval covers 0) lines up with the
    mode and the collision criterion; ``clip_frac`` is the share of tokens outside [1 - 0.2, 1 + 0.2] on
    the clipped side (for ``reuse_noclip``: where the clip would have cut the gradient)."""
    out = {}
    for (setting, gamma, lr), g in table.groupby(["setting", "gamma", "lr"], sort=False):
        s = g.apply(sign_of, axis=1)
        mode = np.where(g["mode_correct"], 1, -1)
        coll = np.sign(g["collision_margin"]).astype(int)
        out[f"{setting}|gamma={gamma:g}|lr={lr:g}"] = {
            "n_conditions": int(len(g)), "n_positive": int((s > 0).sum()), "n_negative": int((s < 0).sum()),
            "n_zero": int((s == 0).sum()),
            "sign_equals_mode_sign": int((s == mode).sum()), "sign_opposes_mode_sign": int((s == -mode).sum()),
            "sign_equals_collision_sign": int((s == coll).sum()),
            "max_abs_d_null": float(g["d_null"].abs().max()), "mean_clip_frac": float(g["clip_frac"].mean()),
        }
    return out


def entries(g: pd.DataFrame) -> list[dict]:
    cols = ["prior_strength", "format_boost", "mode_correct", "d_null", "ci_low", "ci_high", "se", "n_seeds",
            "clip_frac", "pass1_prior"]
    return [{c: (r[c].item() if hasattr(r[c], "item") else r[c]) for c in cols} for _, r in g[cols].iterrows()]


def figure(table: pd.DataFrame, lr: float):
    import matplotlib.pyplot as plt

    colors = {s: SETTING_COLORS[s] for s in ("no_reuse", "reuse_clip", "reuse_noclip", DERIVED)}
    fig, axes = plt.subplots(len(GAMMAS), len(FORMAT_BOOSTS), figsize=(10, 6.6), sharex=True, squeeze=False)
    for i, gamma in enumerate(GAMMAS):
        for j, f in enumerate(FORMAT_BOOSTS):
            ax = axes[i, j]
            sub = table[(table.gamma == gamma) & (table.lr == lr) & (table.format_boost == f)]
            for k, (setting, g) in enumerate(sub.groupby("setting", sort=False)):
                g = g.sort_values("prior_strength")
                x = g["prior_strength"].to_numpy() + (k - 1.5) * 0.008
                ax.plot(x, g["d_null"], color=colors[setting], lw=1, alpha=0.7, ls="--" if setting == DERIVED else "-",
                        label=setting if (i == 0 and j == 0) else None)
                ax.errorbar(x, g["d_null"], yerr=[g["d_null"] - g["ci_low"], g["ci_high"] - g["d_null"]], fmt="none",
                            ecolor=colors[setting], capsize=2, lw=1)
                for correct, marker in ((True, "o"), (False, "x")):
                    m = g["mode_correct"] == correct
                    ax.scatter(x[m.to_numpy()], g.loc[m, "d_null"], color=colors[setting], marker=marker, s=26,
                               zorder=3)
            ax.axhline(0, color="black", lw=0.6)
            ax.set_title(f"gamma={gamma:g}, format boost f={f:g}", fontsize=9)
            ax.grid(alpha=0.3)
            if j == 0:
                ax.set_ylabel("d_null = acc(random) - acc(frozen)")
            if i == len(GAMMAS) - 1:
                ax.set_xlabel("prior strength p_s")
    axes[0, 0].legend(fontsize=7, title="o mode correct, x mode wrong", title_fontsize=7)
    fig.suptitle(f"RANDOM reward's null term with and without reuse + clipping (lr={lr:g}; 95% BCa CI over seeds)",
                 fontsize=10)
    fig.tight_layout()
    return fig


def main(argv=None):
    args = study_args(__doc__, "8 seeds, 100 steps (smoke run)", OUT, argv)
    with study_store(args, "experiments/clipping_null") as out:
        seeds, steps = (8, 100) if args.quick else (32, 200)
        t0 = time.perf_counter()
        frames, configs = [], {}
        for setting in SETTINGS:
            res = ts.run(config(setting, seeds, steps), progress=False)
            configs[setting] = res.config
            frames.append(res.frame.assign(setting=setting))
        frame = pd.concat(frames, ignore_index=True)
        table = d_null_table(frame)
        write_frame(out / "d_null.csv", table)
        figures = {("d_null" if lr == REFERENCE["lr"] else "d_null_lr" + f"{lr:g}".replace(".", "p")): figure(table, lr)
                   for lr in LRS}
        ref = table[(table.gamma == REFERENCE["gamma"]) & (table.lr == REFERENCE["lr"])]
        summary = {s: entries(ref[ref.setting == s]) for s in [*SETTINGS, DERIVED]}
        summary.update({
            "study": "clipping_null",
            "question": "does RANDOM reward move pass@1 once rollout batches are reused under a clipped ratio, "
                        "and does the direction follow the prior's mode?",
            "reference": REFERENCE,
            "note": "the top-level setting lists are at the reference gamma and lr; 'conditions' has every cell; "
                    f"'{DERIVED}' is the per-seed paired difference reuse_clip - reuse_noclip",
            "findings": findings(table),
            "conditions": [{"setting": r.setting, "gamma": r.gamma, "lr": r.lr, **entries(table.loc[[i]])[0]}
                           for i, r in table.iterrows()],
            "configs": configs,
        })
        write_study(out, frame, figures, summary, started=t0, quick=args.quick, seeds=seeds, steps=steps)
        with pd.option_context("display.width", 200, "display.max_rows", 200):
            show = table[["setting", "gamma", "lr", "format_boost", "prior_strength", "mode_correct", "d_null", "ci_low",
                          "ci_high", "clip_frac"]]
            print(show.round(4).to_string(index=False))
        for k, v in summary["findings"].items():
            print(k, v)


if __name__ == "__main__":
    main()
