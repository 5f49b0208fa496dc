"""The gain of each cell of claim study B6 split into an answering-habit part and a knowledge part.

Accuracy is ``sum_s P(s) P(correct | s)`` over the root styles ``s`` (the tree's ``style{s}_mass`` and
``style{s}_acc``). Between the base (step 0) and step ``t``:

    d pass1 = sum_s (P_t(s) - P_0(s)) acc_0(s)        habit: the styles' masses move, each style as accurate as at the base
            + sum_s P_t(s) (acc_t(s) - acc_0(s))      knowledge: the answers within each style get more accurate
            + residual

The identity is exact per prompt; the data hold the means over prompts, so the residual is the covariance across
prompts that the means leave out (reported, small where the prompts' style masses move alike). Run as a script
after the confirmatory run, it writes ``decomposition.json`` from ``results/data.parquet``.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

CELLS = {"format": ("random", "style"), "truth": ("true", "none")}  # (arm, reward terms)


def split(frame: pd.DataFrame, step: int) -> dict:
    """``{cell: {gain, habit, knowledge, residual, habit_share}}``, each a mean over seeds, for one prior's rows
    (columns ``arm``, ``terms``, ``seed``, ``step``, ``pass1``, ``style{s}_mass``, ``style{s}_acc``)."""
    styles = sorted(int(c[5:-5]) for c in frame.columns if c.startswith("style") and c.endswith("_mass"))
    out = {}
    for name, (arm, terms) in CELLS.items():
        g = frame[(frame["arm"].astype(str) == arm) & (frame["terms"].astype(str) == terms)]
        a, b = g[g["step"] == 0].set_index("seed"), g[g["step"] == step].set_index("seed")
        gain = b["pass1"] - a["pass1"]
        habit = sum((b[f"style{s}_mass"] - a[f"style{s}_mass"]) * a[f"style{s}_acc"] for s in styles)
        know = sum(b[f"style{s}_mass"] * (b[f"style{s}_acc"] - a[f"style{s}_acc"]) for s in styles)
        out[name] = {"gain": float(gain.mean()), "habit": float(habit.mean()), "knowledge": float(know.mean()),
                     "residual": float((gain - habit - know).mean()),
                     "habit_share": float(habit.mean() / gain.mean()) if gain.mean() else float("nan")}
    return out


if __name__ == "__main__":
    here = Path(__file__).parent
    data = pd.read_parquet(here / "results" / "data.parquet")
    last = int(data["step"].max())
    result = {f"{float(ps):g}": split(g, last) for ps, g in data.groupby("prior_strength", observed=True)}
    (here / "decomposition.json").write_text(json.dumps({"step": last, "by_prior_strength": result}, indent=2) + "\n")
    print(json.dumps(result, indent=1))
