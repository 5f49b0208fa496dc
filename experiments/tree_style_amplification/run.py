"""Study (b): does a high-prior reasoning *style* get amplified by RANDOM reward under reuse + clipping?

The root of the tree picks a style. Style 0 (root token 1) holds 90% of the prior mass and is right 60%
of the time; style 1 (root tokens STOP and 2) holds 10% and is right 20% of the time (the analogue of
code reasoning in the spurious-rewards study, arXiv 2506.10947). Arms FROZEN and RANDOM (gamma = 0.5)
are paired per seed. Cells: PPO clip with 4 epochs of reuse per rollout batch at two clip widths, the
unclipped importance-weighted loss with the same reuse, and on-policy clip (1 epoch: the clip never
fires). Each cell sweeps the learning rate (one compiled program).

    python experiments/tree_style_amplification/run.py [--quick]

Writes ``out/results.parquet``, ``out/summary.json`` and ``out/style_amplification.png/.pdf``.
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
TREE = {"depth": 4, "branching": 3,
        "styles": [{"mass": 0.9, "accuracy": 0.6, "actions": [1]}, {"mass": 0.1, "accuracy": 0.2, "actions": [0, 2]}]}
CELLS = {
    "clip0.2_reuse4": {"surrogate": "clip", "eps_low": 0.2, "eps_high": 0.2, "epochs": 4},
    "clip0.05_reuse4": {"surrogate": "clip", "eps_low": 0.05, "eps_high": 0.05, "epochs": 4},
    "noclip_reuse4": {"surrogate": "importance", "epochs": 4},
    "clip0.2_onpolicy": {"surrogate": "clip", "eps_low": 0.2, "eps_high": 0.2, "epochs": 1},
}
LRS = [3.0, 10.0, 30.0]
METRICS = ("style0_mass", "pass1", "token_entropy", "kl_ref")


def config(cell: dict, seeds: int, steps: int) -> dict:
    return {"task": {"env": "tree", "n_prompts": 32, "n_answers": 8, "n_correct": 2, "format_boost": 0.0, "tree": TREE},
            "arms": {"arms": ["frozen", "random"], "gamma": 0.5},
            "algo": {"estimator": "grpo", "std_ddof": 1, "std_eps": 1e-4, "ratio": "token",
                     "aggregation": "token-mean", "kl_placement": "none", "optimizer": "sgd", **cell},
            "train": {"steps": steps, "batch_size": 16, "group_size": 16, "seeds": seeds, "eval_every": 10},
            "sweep": {"lr": LRS}}


def paired(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (cell, lr, seed, step): RANDOM minus FROZEN for each metric (seeds share their draws)."""
    key = ["cell", "lr", "seed", "step"]
    w = frame.pivot_table(index=key, columns="arm", values=list(METRICS), observed=True)
    return pd.DataFrame({m: w[(m, "random")] - w[(m, "frozen")] for m in METRICS}).reset_index()


def summarise(frame: pd.DataFrame, diff: pd.DataFrame) -> dict:
    last = diff[diff.step == diff.step.max()]
    clip = frame[(frame.arm == "random") & (frame.step > 0)].groupby(["cell", "lr"], observed=True).clip_frac.mean()
    out = {}
    for (cell, lr), g in last.groupby(["cell", "lr"], observed=True, sort=False):
        row = {"cell": cell, "lr": lr, "clip_frac": float(clip[(cell, lr)]), "n_seeds": int(len(g))}
        for m in METRICS:
            x = g[m].to_numpy()
            row[f"d_{m}"] = {"mean": float(x.mean()), "se": float(x.std(ddof=1) / np.sqrt(len(x)))}
        d = row["d_style0_mass"]
        row["style0_mass_rises"] = bool(d["mean"] > 2 * d["se"])
        row["style0_mass_falls"] = bool(d["mean"] < -2 * d["se"])
        out[f"{cell}|lr={lr:g}"] = row
    return out


def clip_effect(diff: pd.DataFrame) -> dict:
    """Clip minus no-clip (same reuse, same seeds and lr): the part of the drift due to clipping."""
    last = diff[diff.step == diff.step.max()].set_index(["cell", "lr", "seed"])["style0_mass"]
    out = {}
    for cell in ("clip0.2_reuse4", "clip0.05_reuse4"):
        for lr in LRS:
            x = (last.loc[(cell, lr)] - last.loc[("noclip_reuse4", lr)]).to_numpy()
            out[f"{cell}-noclip_reuse4|lr={lr:g}"] = {"mean": float(x.mean()), "se": float(x.std(ddof=1) / np.sqrt(len(x)))}
    return out


def figure(diff: pd.DataFrame, frame: pd.DataFrame):
    import matplotlib.pyplot as plt

    colors = {c: color_of(c, i) for i, c in enumerate(CELLS)}
    fig, axes = plt.subplots(1, len(LRS) + 1, figsize=(4 * (len(LRS) + 1), 3.4))
    for ax, lr in zip(axes, LRS):
        for cell, g in diff[diff.lr == lr].groupby("cell", observed=True, sort=False):
            m = g.groupby("step")["style0_mass"].agg(["mean", "sem"])
            ax.plot(m.index, m["mean"], color=colors[cell], label=cell)
            ax.fill_between(m.index, m["mean"] - m["sem"], m["mean"] + m["sem"], color=colors[cell], alpha=0.2)
        ax.axhline(0, color="k", lw=0.6)
        ax.set(title=f"lr={lr:g}", xlabel="step")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("style-0 mass: RANDOM - FROZEN")
    axes[0].legend(fontsize=7)
    ax = axes[-1]
    fr = frame[(frame.arm == "random") & (frame.step > 0)]
    for cell, g in fr.groupby("cell", observed=True, sort=False):
        m = g.groupby("lr").clip_frac.mean()
        ax.plot(m.index, m.values, "o-", color=colors[cell], label=cell)
    ax.set(xscale="log", xlabel="lr", ylabel="clip fraction (RANDOM arm)", title="clip activity")
    ax.set_xticks(LRS, [f"{x:g}" for x in LRS], minor=False)
    ax.minorticks_off()
    ax.grid(alpha=0.3)
    fig.suptitle("High-prior style (90% prior mass) under random reward")
    fig.tight_layout()
    return fig


def main():
    args = study_args(__doc__, "4 seeds, 100 steps (smoke run)", OUT)
    with study_store(args, "experiments/tree_style_amplification") as out:
        seeds, steps = (4, 100) if args.quick else (16, 300)
        t0 = time.perf_counter()
        frames, configs = [], {}
        for name, cell in CELLS.items():
            res = ts.run(config(cell, seeds, steps), progress=False)
            configs[name] = res.config
            frames.append(res.frame.assign(cell=name))
        frame = pd.concat(frames, ignore_index=True)
        frame["cell"] = pd.Categorical(frame["cell"], categories=list(CELLS))
        diff = paired(frame)
        summary = summarise(frame, diff)
        write_study(out, frame, {"style_amplification": figure(diff, frame)}, {
            "study": "tree_style_amplification",
            "question": "does random reward with reuse + clipping raise the high-prior style's mass, and not without clipping?",
            "metric": "d_x = x(RANDOM) - x(FROZEN) at the final step, per seed (paired); mean and s.e. over seeds",
            "cells": summary, "clip_minus_noclip_style0_mass": clip_effect(diff), "configs": configs},
            started=t0, quick=args.quick)
        for k, v in summary.items():
            print(k, f"d_style0_mass={v['d_style0_mass']['mean']:+.3f}±{v['d_style0_mass']['se']:.3f}",
                  f"d_pass1={v['d_pass1']['mean']:+.3f}", f"clip_frac={v['clip_frac']:.3f}")


if __name__ == "__main__":
    main()
