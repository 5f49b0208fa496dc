"""Study (a): GRPO's length bias on a tree-MDP (Dr. GRPO, arXiv 2503.20783).

Claim under test: with the verifier reward, GRPO (group z-score + seq-mean-token-mean aggregation)
lengthens wrong answers, Dr. GRPO (centred reward + seq-mean-token-sum-norm) does not. The 2 x 2 design
(estimator x aggregation) separates the two ingredients; a learning-rate sweep (one compiled program
per cell) lets the lengths be compared at equal pass@1 as well as at equal step.

    python experiments/tree_length_bias/run.py [--quick]

Writes ``out/results.parquet`` (tidy, all cells), ``out/summary.json`` and ``out/length_bias.png/.pdf``.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

import tabsim as ts
from tabsim.studies.scripts import study_args, study_store, write_study
from tabsim.plotting import color_of

OUT = Path(__file__).resolve().parent / "out"
# length profiles of the prior: wrong answers longer (the studied case) and a neutral control
PROFILES = {"wrong_longer": {"length_slope_wrong": 1.0, "length_slope_correct": -1.0},
            "neutral": {"length_slope_wrong": 0.0, "length_slope_correct": 0.0}}
TREE = {"depth": 6, "branching": 3}
# the algo sections of the grpo / dr_grpo compositions, without KL so the aggregation is the only length term
CELLS = {
    "grpo": {"estimator": "grpo", "aggregation": "seq-mean-token-mean"},
    "grpo_estimator+drgrpo_agg": {"estimator": "grpo", "aggregation": "seq-mean-token-sum-norm"},
    "drgrpo_estimator+grpo_agg": {"estimator": "dr_grpo", "aggregation": "seq-mean-token-mean"},
    "dr_grpo": {"estimator": "dr_grpo", "aggregation": "seq-mean-token-sum-norm"},
}
LRS = [5.0, 20.0, 80.0]
MATCH_PASS1 = (0.7, 0.9)


def config(cell: dict, profile: dict, seeds: int, steps: int) -> dict:
    return {"task": {"env": "tree", "n_prompts": 32, "n_answers": 8, "n_correct": 2, "prior_strength": 0.4,
                     "format_boost": 0.0, "tree": {**TREE, **profile}},
            "arms": {"arms": ["frozen", "true"]},
            "algo": {**cell, "std_ddof": 1, "std_eps": 1e-4, "surrogate": "clip", "eps_low": 0.2, "eps_high": 0.2,
                     "ratio": "token", "kl_placement": "none", "epochs": 1, "optimizer": "sgd"},
            "train": {"steps": steps, "batch_size": 16, "group_size": 8, "seeds": seeds, "eval_every": 10},
            "sweep": {"lr": LRS}}


def at_pass1(traj: pd.DataFrame, col: str, target: float) -> float:
    """``col`` linearly interpolated at the first crossing of pass1 = target (NaN if never reached)."""
    p, y = traj["pass1"].to_numpy(), traj[col].to_numpy()
    hit = np.flatnonzero(p >= target)
    if len(hit) == 0:
        return np.nan
    i = hit[0]
    if i == 0:
        return float(y[0])
    f = (target - p[i - 1]) / (p[i] - p[i - 1])
    return float(y[i - 1] + f * (y[i] - y[i - 1]))


def mean_se(x) -> dict:
    x = np.asarray(x, float)
    x = x[np.isfinite(x)]
    if len(x) == 0:
        return {"mean": None, "se": None, "n": 0}
    return {"mean": float(x.mean()), "se": float(x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else None,
            "n": int(len(x))}


def summarise(frame: pd.DataFrame) -> dict:
    out = {}
    tr = frame[frame.arm == "true"]
    for (profile, cell, lr), g in tr.groupby(["profile", "cell", "lr"], observed=True, sort=False):
        per_seed = []
        for seed, s in g.groupby("seed"):
            s = s.sort_values("step")
            first, last = s.iloc[0], s.iloc[-1]
            row = {"d_len_wrong": last.len_wrong - first.len_wrong, "d_len_correct": last.len_correct - first.len_correct,
                   "max_len_wrong_rise": s.len_wrong.max() - first.len_wrong, "final_pass1": last.pass1}
            for t in MATCH_PASS1:
                row[f"d_len_wrong@pass1={t}"] = at_pass1(s, "len_wrong", t) - first.len_wrong
                row[f"d_len_correct@pass1={t}"] = at_pass1(s, "len_correct", t) - first.len_correct
            per_seed.append(row)
        ps = pd.DataFrame(per_seed)
        out[f"{profile}|{cell}|lr={lr:g}"] = {"profile": profile, "cell": cell, "lr": lr,
                                              **{k: mean_se(ps[k]) for k in ps.columns}}
    return out


def verdict(summary: dict) -> dict:
    """Per cell: at how many learning rates wrong answers got significantly longer (mean > 2 s.e.)."""
    res = {}
    for profile, cell in ((p, c) for p in PROFILES for c in CELLS):
        rows = [v for v in summary.values() if v["cell"] == cell and v["profile"] == profile]
        grows = [r["lr"] for r in rows if r["d_len_wrong"]["mean"] is not None
                 and r["d_len_wrong"]["mean"] > 2 * (r["d_len_wrong"]["se"] or np.inf)]
        matched = [r[f"d_len_wrong@pass1={MATCH_PASS1[-1]}"]["mean"] for r in rows]
        res[f"{profile}|{cell}"] = {"lrs_where_len_wrong_grows": grows, "n_lrs": len(rows),
                     f"mean_d_len_wrong@pass1={MATCH_PASS1[-1]}_over_lrs":
                         float(np.nanmean([m for m in matched if m is not None])) if any(m is not None for m in matched) else None}
    return res


def figure(frame: pd.DataFrame, lr_show: float):
    import matplotlib.pyplot as plt

    tr = frame[(frame.arm == "true") & (frame.profile == "wrong_longer")]
    colors = {c: color_of(c, i) for i, c in enumerate(CELLS)}
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for cell, g in tr[tr.lr == lr_show].groupby("cell", observed=True, sort=False):
        m = g.groupby("step")[["len_wrong", "len_correct"]].agg(["mean", "sem"])
        for ax, col in ((axes[0], "len_wrong"), (axes[1], "len_correct")):
            ax.plot(m.index, m[(col, "mean")], color=colors[cell], label=cell)
            ax.fill_between(m.index, m[(col, "mean")] - m[(col, "sem")], m[(col, "mean")] + m[(col, "sem")],
                            color=colors[cell], alpha=0.2)
    axes[0].set(title=f"E[length | wrong], lr={lr_show:g} (prior: wrong longer)", xlabel="step", ylabel="tokens")
    axes[1].set(title=f"E[length | correct], lr={lr_show:g}", xlabel="step")
    for (cell, lr), g in tr.groupby(["cell", "lr"], observed=True, sort=False):
        m = g.groupby("step")[["pass1", "len_wrong"]].mean()
        axes[2].plot(m.pass1, m.len_wrong, color=colors[cell], alpha=0.4 + 0.6 * (lr == lr_show), lw=1.2,
                     label=cell if lr == lr_show else None)
    axes[2].set(title="E[length | wrong] against pass@1 (all lrs)", xlabel="pass@1", ylabel="tokens")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def main():
    args = study_args(__doc__, "4 seeds, 100 steps (smoke run)", OUT)
    with study_store(args, "experiments/tree_length_bias") as out:
        seeds, steps = (4, 100) if args.quick else (16, 300)
        t0 = time.perf_counter()
        frames, configs = [], {}
        for pname, profile in PROFILES.items():
            for name, cell in CELLS.items():
                res = ts.run(config(cell, profile, seeds, steps), progress=False)
                configs[f"{pname}|{name}"] = res.config
                frames.append(res.frame.assign(profile=pname, cell=name))
        frame = pd.concat(frames, ignore_index=True)
        frame["cell"] = pd.Categorical(frame["cell"], categories=list(CELLS))
        frame["profile"] = pd.Categorical(frame["profile"], categories=list(PROFILES))
        summary = summarise(frame)
        write_study(out, frame, {"length_bias": figure(frame, lr_show=20.0)}, {
            "study": "tree_length_bias", "question": "does GRPO lengthen wrong answers where Dr. GRPO does not?",
            "metric": "len_wrong = E[answer length | wrong answer], exact by DP, mean over prompts; d_ = final - initial,"
                      " per seed; @pass1=t: interpolated where the seed's pass@1 first reaches t",
            "verdict": verdict(summary), "cells": summary, "configs": configs}, started=t0, quick=args.quick)
        for k, v in verdict(summary).items():
            print(k, v)


if __name__ == "__main__":
    main()
