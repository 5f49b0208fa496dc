"""Study (c): GSPO's sequence-level ratio against GRPO's token-level ratio under off-policy reuse.

GRPO clips each token's ratio at 1 +/- 0.2; GSPO (arXiv 2507.18071) clips one ratio per answer,
``exp(mean_t log w_t)``, at 1 - 3e-4 / 1 + 4e-4. Both use the group z-score and seq-mean-token-mean, so
with one epoch (ratio = 1) they are the same update, which the study checks. Reuse is 1, 4 or 8
epochs over each rollout batch; the learning rate is swept up to a level where training becomes
unstable. Task: a hard tree prompt set (prior pass@1 about 0.15, one correct answer of 8) with two
paired reward arms, the verifier (TRUE) and a noisy verifier (NOISY, fpr = fnr = 0.2).

Stability per seed: final pass@1, its spread over seeds, the largest drawdown of pass@1 (running max
minus current, over the eval points) and the final KL to the prior; plus the clip fraction.

    python experiments/tree_gspo_vs_grpo/run.py [--quick]

Writes ``out/results.parquet``, ``out/summary.json`` and ``out/gspo_vs_grpo.png/.pdf``.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

import tabsim as ts
from tabsim.studies.scripts import study_args, study_store, write_study
from tabsim.plotting import ALGO_COLORS

OUT = Path(__file__).resolve().parent / "out"
TREE = {"depth": 6, "branching": 3, "length_slope_wrong": 1.0}
ALGOS = {
    "grpo": {"ratio": "token", "eps_low": 0.2, "eps_high": 0.2},
    "gspo": {"ratio": "sequence", "eps_low": 3e-4, "eps_high": 4e-4},
}
EPOCHS = (1, 4, 8)
LRS = [10.0, 40.0, 160.0, 640.0]
ARMS = ["true", "noisy"]


def config(algo: dict, epochs: int, seeds: int, steps: int) -> dict:
    return {"task": {"env": "tree", "n_prompts": 32, "n_answers": 8, "n_correct": 1, "prior_strength": 0.15,
                     "tree": TREE},
            "arms": {"arms": ARMS, "fpr": 0.2, "fnr": 0.2},
            "algo": {"estimator": "grpo", "std_ddof": 1, "std_eps": 1e-4, "surrogate": "clip",
                     "aggregation": "seq-mean-token-mean", "kl_placement": "none", "optimizer": "sgd",
                     "epochs": epochs, **algo},
            "train": {"steps": steps, "batch_size": 16, "group_size": 8, "seeds": seeds, "eval_every": 10},
            "sweep": {"lr": LRS}}


def per_seed(frame: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for key, s in frame.groupby(["algo", "epochs", "lr", "arm", "seed"], observed=True, sort=False):
        s = s.sort_values("step")
        p = s.pass1.to_numpy()
        rows.append(dict(zip(["algo", "epochs", "lr", "arm", "seed"], key),
                         final_pass1=p[-1], max_drawdown=float((np.maximum.accumulate(p) - p).max()),
                         final_kl=s.kl_ref.iloc[-1], final_token_entropy=s.token_entropy.iloc[-1],
                         clip_frac=s.clip_frac.iloc[1:].mean()))
    return pd.DataFrame(rows)


def summarise(ps: pd.DataFrame) -> dict:
    out = {}
    for key, g in ps.groupby(["arm", "algo", "epochs", "lr"], observed=True, sort=False):
        n = len(g)
        row = dict(zip(["arm", "algo", "epochs", "lr"], [key[0], key[1], int(key[2]), float(key[3])]), n_seeds=n)
        for m in ("final_pass1", "max_drawdown", "final_kl", "final_token_entropy", "clip_frac"):
            x = g[m].to_numpy()
            row[m] = {"mean": float(x.mean()), "se": float(x.std(ddof=1) / np.sqrt(n))}
        row["final_pass1_sd_over_seeds"] = float(g.final_pass1.std(ddof=1))
        out["|".join(f"{k}={v}" for k, v in zip(["arm", "algo", "epochs", "lr"], key))] = row
    return out


def paired_contrast(ps: pd.DataFrame) -> dict:
    """GSPO minus GRPO per (arm, epochs, lr), paired over seeds (both runs use the same seed draws)."""
    w = ps.pivot_table(index=["arm", "epochs", "lr", "seed"], columns="algo",
                       values=["final_pass1", "max_drawdown"], observed=True)
    out = {}
    for (arm, ep, lr), g in w.groupby(level=[0, 1, 2], sort=False):
        row = {}
        for m in ("final_pass1", "max_drawdown"):
            d = (g[(m, "gspo")] - g[(m, "grpo")]).to_numpy()
            row[m] = {"mean": float(d.mean()), "se": float(d.std(ddof=1) / np.sqrt(len(d)))}
        out[f"arm={arm}|epochs={ep}|lr={lr:g}"] = row
    return out


def figure(frame: pd.DataFrame, ps: pd.DataFrame):
    import matplotlib.pyplot as plt

    colors = {a: ALGO_COLORS[a] for a in ("grpo", "gspo")}
    styles = {1: ":", 4: "--", 8: "-"}
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.6))
    tr = frame[frame.arm == "noisy"]
    for ax, lr in zip(axes[:2], (LRS[-2], LRS[-1])):
        for (algo, ep), g in tr[tr.lr == lr].groupby(["algo", "epochs"], observed=True, sort=False):
            m = g.groupby("step").pass1.mean()
            ax.plot(m.index, m.values, color=colors[algo], ls=styles[ep], label=f"{algo}, {ep} epochs")
        ax.set(title=f"pass@1 (NOISY reward), lr={lr:g}", xlabel="step")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    t = ps[ps.arm == "noisy"]
    for (algo, ep), g in t.groupby(["algo", "epochs"], observed=True, sort=False):
        m = g.groupby("lr")[["final_pass1", "clip_frac"]].mean()
        axes[2].plot(m.index, m.final_pass1, "o", color=colors[algo], ls=styles[ep], label=f"{algo}, {ep}")
        axes[3].plot(m.index, m.clip_frac, "o", color=colors[algo], ls=styles[ep], label=f"{algo}, {ep}")
    axes[2].set(xscale="log", xlabel="lr", title="final pass@1 (NOISY), mean over seeds")
    axes[3].set(xscale="log", xlabel="lr", title="clip fraction (NOISY)")
    for ax in axes[2:]:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def main():
    args = study_args(__doc__, "4 seeds, 60 steps (smoke run)", OUT)
    with study_store(args, "experiments/tree_gspo_vs_grpo") as out:
        seeds, steps = (4, 60) if args.quick else (16, 150)
        t0 = time.perf_counter()
        frames, configs = [], {}
        for name, algo in ALGOS.items():
            for ep in EPOCHS:
                res = ts.run(config(algo, ep, seeds, steps), progress=False)
                configs[f"{name}|epochs={ep}"] = res.config
                frames.append(res.frame.assign(algo=name, epochs=ep))
        frame = pd.concat(frames, ignore_index=True)
        ps = per_seed(frame)
        one_epoch = frame[frame.epochs == 1].pivot_table(index=["arm", "lr", "seed", "step"], columns="algo",
                                                          values="pass1", observed=True)
        identical = float(np.abs(one_epoch["gspo"] - one_epoch["grpo"]).max())
        summary = summarise(ps)
        write_study(out, frame, {"gspo_vs_grpo": figure(frame, ps)}, {
            "study": "tree_gspo_vs_grpo",
            "question": "under off-policy reuse, is GSPO's sequence-level clipped ratio more stable than GRPO's token-level one,"
                        " and how often does each clip?",
            "one_epoch_max_abs_pass1_difference": identical,
            "cells": summary, "gspo_minus_grpo": paired_contrast(ps), "configs": configs}, started=t0, quick=args.quick)
        print(f"1 epoch: max |pass1(gspo) - pass1(grpo)| = {identical:.2e}")
        for k, v in summary.items():
            if v["arm"] == "true":
                print(k, f"pass1={v['final_pass1']['mean']:.3f}±{v['final_pass1']['se']:.3f}",
                      f"drawdown={v['max_drawdown']['mean']:.3f}", f"clip={v['clip_frac']['mean']:.3f}")


if __name__ == "__main__":
    main()
