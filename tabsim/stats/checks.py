"""Input checks shared by the statistics modules.

Every public function of :mod:`tabsim.stats` checks its inputs at entry and raises ``ValueError``
with a message naming the field, the bad value and the allowed range; the helpers below keep those
messages uniform.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import pandas as pd

BOOTSTRAP_METHODS = ("bca", "percentile")
INTERVAL_METHODS = ("bca", "percentile", "t")


def check_frame(df, name: str = "df") -> None:
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"{name} must be a pandas DataFrame, got {type(df).__name__}")
    if len(df) == 0:
        raise ValueError(f"{name} is empty (0 rows); it needs at least one row per seed")


def check_columns(df: pd.DataFrame, columns: Iterable[str], *, name: str = "df", role: str = "") -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        what = f" ({role})" if role else ""
        raise ValueError(
            f"{name} lacks column(s) {missing}{what}; available columns: {list(df.columns)}"
        )


def as_tuple(value, name: str) -> tuple:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    try:
        return tuple(value)
    except TypeError:
        raise ValueError(f"{name} must be a column name or a sequence of column names, got {value!r}")


def check_level(ci: float, name: str = "ci") -> float:
    try:
        level = float(ci)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a confidence level in (0, 1), got {ci!r}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"{name} must be a confidence level in (0, 1), got {ci!r}")
    return level


def check_method(method: str, allowed: Sequence[str] = INTERVAL_METHODS, name: str = "method") -> str:
    if not isinstance(method, str) or method.lower() not in allowed:
        raise ValueError(f"{name} must be one of {list(allowed)}, got {method!r}")
    return method.lower()


def check_int(value, name: str, *, minimum: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_positive(value, name: str) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    if not np.isfinite(out) or out <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return out


def check_finite_column(df: pd.DataFrame, column: str, *, name: str = "df") -> np.ndarray:
    try:
        values = df[column].to_numpy(dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name}[{column!r}] must be numeric, got dtype {df[column].dtype}")
    bad = ~np.isfinite(values)
    if bad.any():
        first = df.index[np.flatnonzero(bad)[0]]
        raise ValueError(
            f"{name}[{column!r}] must be finite; {int(bad.sum())} value(s) are NaN or inf "
            f"(first at index {first!r})"
        )
    return values


def make_rng(random_state, name: str = "random_state") -> np.random.Generator:
    """A fresh Generator for an int seed; a Generator is used as given (its stream advances)."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, (bool, np.bool_)) or not isinstance(random_state, (int, np.integer)):
        raise ValueError(
            f"{name} must be a non-negative int or a numpy Generator (explicit randomness), "
            f"got {random_state!r}"
        )
    if random_state < 0:
        raise ValueError(f"{name} must be a non-negative int, got {random_state!r}")
    return np.random.default_rng(int(random_state))


def group_items(df: pd.DataFrame, by: tuple):
    """Yield ``(key_dict, sub_frame)`` per group of ``by`` (one group when ``by`` is empty)."""
    if not by:
        yield {}, df
        return
    for key, sub in df.groupby(list(by), sort=True, dropna=False):
        if not isinstance(key, tuple):
            key = (key,)
        yield dict(zip(by, key)), sub


def describe_group(key: dict) -> str:
    if not key:
        return "the whole frame"
    return "group " + ", ".join(f"{k}={v!r}" for k, v in key.items())


def select_step(df: pd.DataFrame, step, group_cols: Sequence[str], *, name: str = "df") -> pd.DataFrame:
    """Keep the rows of the evaluation step ``step`` ("final" = largest step of each group)."""
    if step is None:
        return df
    check_columns(df, ["step"], name=name, role="evaluation step; pass step=None if absent")
    if isinstance(step, str):
        if step != "final":
            raise ValueError(f"step must be 'final', an int or None, got {step!r}")
        if group_cols:
            last = df.groupby(list(group_cols), sort=False, dropna=False)["step"].transform("max")
        else:
            last = pd.Series(df["step"].max(), index=df.index)
        return df[df["step"] == last]
    if isinstance(step, (bool, np.bool_)) or not isinstance(step, (int, np.integer)):
        raise ValueError(f"step must be 'final', an int or None, got {step!r}")
    out = df[df["step"] == step]
    if len(out) == 0:
        steps = sorted(pd.unique(df["step"]).tolist())
        raise ValueError(f"step={step!r} is not in {name}['step']; available steps: {steps}")
    return out
