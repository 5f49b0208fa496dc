"""Scores normalised across conditions, so that an aggregate over conditions weighs each alike.

A condition of a sweep (a prior strength, a learning rate) moves every group's scores together; pooled
raw, a performance profile over three priors is a staircase of the grid, not of the groups. rliable
normalises each task's scores by a low and a high reference (random and human on Atari). Two choices:

* ``"minmax"``: ``(score - lo) / (hi - lo)`` with ``lo``, ``hi`` the least and greatest score of all
  groups' runs in the condition, so each condition spans [0, 1];
* ``"arms"``: ``(score - FROZEN) / (TRUE - FROZEN)``, the means over seeds of the FROZEN and TRUE arms
  in the same condition (and group): 0 is no training, 1 is training on the true reward, the natural
  ends of this simulator's scale.

Both are affine maps per key (a condition, or a group and a condition), returned as a frame of keys,
``lo`` and ``span`` so that a run's scores at every step use the same map.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

NORMALIZATIONS = ("none", "minmax", "arms")
DESCRIPTIONS = {"none": "raw scores",
                "minmax": "min-max per condition: (score - least) / (greatest - least) over all groups' runs",
                "arms": "relative to the arms per condition: (score - FROZEN) / (TRUE - FROZEN), their means over "
                        "seeds"}


def minmax_maps(runs: pd.DataFrame, keys: list[str], score: str = "score") -> pd.DataFrame:
    """``keys, lo, span`` per condition: the least score and the range of all runs in it."""
    got = runs.groupby(keys, observed=True, sort=False)[score].agg(["min", "max"]).reset_index()
    return got.assign(lo=got["min"], span=got["max"] - got["min"])[[*keys, "lo", "span"]]


def reference_maps(rows: pd.DataFrame, keys: list[str], *, low: str, high: str, arm: str = "arm",
                   score: str = "score") -> pd.DataFrame:
    """``keys, lo, span`` per key: the mean ``score`` of the ``low`` arm's rows and the difference to the
    ``high`` arm's mean."""
    means = rows[rows[arm].astype(str).isin([low, high])].assign(_arm=lambda d: d[arm].astype(str)) \
        .pivot_table(index=keys, columns="_arm", values=score, aggfunc="mean", observed=True)
    return pd.DataFrame({"lo": means[low], "span": means[high] - means[low]}).reset_index()


def apply_maps(runs: pd.DataFrame, maps: pd.DataFrame, keys: list[str], score: str = "score") -> pd.DataFrame:
    """``runs`` with ``score`` replaced by ``(score - lo) / span`` of its key; ``ValueError`` naming the
    first key whose span is 0 or missing (no scale there)."""
    bad = maps[~(np.abs(maps["span"]) > 0)]
    if len(bad):
        where = ", ".join(f"{k}={bad.iloc[0][k]}" for k in keys if k != "_all") or "the only condition"
        raise ValueError(f"the scale is 0 or undefined at {where} (low and high ends both {bad.iloc[0]['lo']:g}, "
                         f"or absent): {len(bad)} of {len(maps)} condition(s) cannot be scaled")
    got = runs.merge(maps, on=keys, how="left", validate="many_to_one")
    if got["span"].isna().any():
        raise ValueError("some runs have no reference in their condition")
    return got.assign(**{score: (got[score] - got["lo"]) / got["span"]}).drop(columns=["lo", "span"])
