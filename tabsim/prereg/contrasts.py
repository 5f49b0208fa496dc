"""Seed-paired contrasts of a design's cells: ``paired:<FACTOR>`` and ``cells:<A>-<B>``.

Every cell of a design runs on the same seeds, so a contrast of two cells is differenced within each seed
and given the one-sample interval of those differences (``analysis.ci_method``; ``t`` has ``n - 1``
degrees of freedom): it keeps the correlation the shared seeds give, and a cell without seed noise
(FROZEN) is not counted as a second sample. ``paired:`` moves one factor; ``cells:`` contrasts two named
cells of ``analysis.cells`` that may differ in several factors (a reward term and the arm it is added to).
Also the row helpers the analysis shares: :class:`Estimate`, :func:`is_level`, :func:`select`,
:func:`final_rows`.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np
import pandas as pd

from tabsim import stats
from tabsim.prereg.plan import Plan, cell_pair, paired_levels


@dataclasses.dataclass
class Estimate:
    """A point estimate with an interval available at any level."""

    estimand: str
    condition: dict
    estimate: float
    ci: Callable[[float], tuple]
    method: str
    n_seeds: int
    detail: dict = dataclasses.field(default_factory=dict)
    p_floor: float = 0.0  # resolution of a bootstrap p: 1 / (resamples + 1)


def is_level(col: pd.Series, level) -> np.ndarray:
    """Where ``col`` holds ``level``: as text for text columns and levels, numerically otherwise (a static
    integer factor such as algo.epochs is a float column: 4.0 is the level 4)."""
    if isinstance(level, str) and not isinstance(col.dtype, pd.CategoricalDtype) and col.dtype != object:
        try:
            level = float(level)
        except ValueError:
            pass
    if isinstance(level, str) or col.dtype == object or isinstance(col.dtype, pd.CategoricalDtype):
        return col.astype(str).to_numpy() == str(level)
    return np.isclose(col.to_numpy(float), float(level), rtol=0.0, atol=1e-12)


def matches(df: pd.DataFrame, condition: dict) -> np.ndarray:
    """Where every factor of ``condition`` holds its level."""
    mask = np.ones(len(df), dtype=bool)
    for key, level in condition.items():
        mask &= is_level(df[key], level)
    return mask


def select(df: pd.DataFrame, condition: dict) -> pd.DataFrame:
    return df[matches(df, condition)]


def final_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows at each run's last evaluated step."""
    return frame[frame["step"] == frame["step"].max()]


def p_floor(method: str, n_resamples: int) -> float:
    return 0.0 if method == "t" else 1.0 / (n_resamples + 1)


def _seed_estimate(plan: Plan, estimand: str, condition: dict, x: np.ndarray, levels: list) -> Estimate:
    a = plan.analysis
    if x.size < 2:
        raise ValueError(f"{estimand} at {condition}: {x.size} paired seeds; an interval needs at least 2")

    def ci(level, x=x):
        iv = stats.mean_interval(x, ci=level, method=a.ci_method, n_resamples=a.n_resamples,
                                 random_state=a.random_state)
        return iv.low, iv.high

    return Estimate(estimand, condition, float(x.mean()), ci, f"{a.ci_method} (paired by seed)", int(x.size),
                    {"sd": float(x.std(ddof=1)), "levels": levels}, p_floor(a.ci_method, a.n_resamples))


def paired_estimate(plan: Plan, frame: pd.DataFrame, estimand: str, condition: dict) -> Estimate:
    """``paired:<factor>``: the factor's first level minus its second (``paired:<factor>:<A>,<B>``: A minus B),
    differenced within each seed. The condition fixes every other factor, so each seed has one run per level.
    """
    name, (first, second), _ = paired_levels(plan, estimand)
    rows = select(final_rows(frame), condition)
    is_first, is_second = is_level(rows[name], first), is_level(rows[name], second)
    rows = rows.assign(_level=np.where(is_first, first, second))[is_first | is_second]
    if rows.duplicated(["seed", "_level"]).any():
        raise ValueError(f"{estimand} at {condition}: several runs per seed and level (fix the arm, or every "
                         "other factor, in the condition)")
    wide = rows.pivot_table(
        index="seed", columns="_level", values=plan.analysis.metric, aggfunc="first", observed=True)
    if not {first, second} <= set(wide.columns):
        raise ValueError(f"{estimand} at {condition}: runs of both levels {first!r} and {second!r} are needed")
    x = (wide[first] - wide[second]).dropna().to_numpy(float)
    return _seed_estimate(plan, estimand, condition, x, [first, second])


def cells_estimate(plan: Plan, frame: pd.DataFrame, estimand: str, condition: dict) -> Estimate:
    """``cells:<A>-<B>``: cell A of ``analysis.cells`` minus cell B, differenced within each seed.

    Each cell with the condition must select exactly one final run of every seed of the other cell's
    seeds; a cell with no run, several runs of one seed, or seeds the other cell lacks is refused in one
    line (a silent mean over runs, or a dropped seed, would change the estimand).
    """
    (name_a, name_b), _ = cell_pair(plan, estimand)
    rows = select(final_rows(frame), condition)
    seeds = []
    for name in (name_a, name_b):
        cell = plan.analysis.cells[name]
        missing = [k for k in cell if k not in rows.columns]
        if missing:
            raise ValueError(f"{estimand}: cell {name!r} names {missing}, not columns of the run's frame")
        picked = rows[matches(rows, cell)]
        if picked.empty:
            raise ValueError(f"{estimand} at {condition}: cell {name!r} {cell} matches no run")
        if picked["seed"].duplicated().any():
            raise ValueError(f"{estimand} at {condition}: cell {name!r} {cell} matches several runs per seed "
                             "(fix every other factor in the cell or the condition)")
        seeds.append(picked.set_index("seed")[plan.analysis.metric])
    if set(seeds[0].index) != set(seeds[1].index):
        raise ValueError(f"{estimand} at {condition}: cells {name_a!r} and {name_b!r} ran on different seeds "
                         f"({len(seeds[0])} and {len(seeds[1])}); a paired difference needs the same seeds")
    x = (seeds[0] - seeds[1].reindex(seeds[0].index)).to_numpy(float)
    return _seed_estimate(plan, estimand, condition, x, [name_a, name_b])
