"""Completions of a table whose partition arms are not all reported: every missing arm on a grid over
[0, 100] (the model-free bounds), and the RANDOM arm spread over the ``d_null`` range that published
random-reward runs measured. A term's bound is the union of its intervals over the completions.
"""
from __future__ import annotations

import numpy as np

from tabsim.audit.entry import PARTITION_ARMS, Entry
from tabsim.audit.estimate import arm_moments


def with_null_envelope(means: np.ndarray, variances: np.ndarray, envelope: tuple, *, step: float = 1.0,
                       seed_sd: float = 0.0) -> tuple:
    """The consistent completions with their RANDOM arm also anywhere in the measured ``d_null`` range.

    Each completion ``c`` (reported base ``b_c``) is repeated with ``acc(RANDOM) = b_c + g`` for ``g`` on a
    grid over ``envelope`` (its ends included), clipped to [0, 100], with variance ``seed_sd^2`` like a
    logical completion; the original completions are kept. Only the RANDOM column changes.

    Args:
      means, variances: ``[C, 4]`` completions (columns :data:`PARTITION_ARMS`).
      envelope: ``(low, high)`` of ``d_null`` in points (:func:`tabsim.audit.measured.null_envelope`).
      step: grid step in points.
      seed_sd: assumed seed sd of the filled arm.

    Returns:
      ``(means [C (1 + G), 4], variances [C (1 + G), 4])``.
    """
    lo, hi = float(envelope[0]), float(envelope[1])
    gains = np.unique(np.concatenate([np.arange(lo, hi, step), [hi]]))
    r, f = PARTITION_ARMS.index("random"), PARTITION_ARMS.index("frozen")
    m = np.repeat(means[:, None, :], gains.size, axis=1).copy()  # [C, G, 4]
    v = np.repeat(variances[:, None, :], gains.size, axis=1).copy()
    m[..., r] = np.clip(means[:, f, None] + gains[None, :], 0.0, 100.0)
    v[..., r] = seed_sd ** 2
    return (np.concatenate([means, m.reshape(-1, 4)]), np.concatenate([variances, v.reshape(-1, 4)]))


def logical_completions(entry: Entry, *, seed_sd: float = 0.0, step: float = 1.0, unit: str = "items") -> tuple:
    """Every missing arm on a grid over [0, 100] (the table-only, model-free bounds).

    Returns:
      ``(means [C, 4], variances [C, 4])``.
    """
    mean, var, _ = arm_moments(entry, seed_sd=seed_sd, unit=unit)
    missing = [a for a in PARTITION_ARMS if a not in mean]
    levels = np.arange(0.0, 100.0 + 1e-9, step)
    grids = np.meshgrid(*([levels] * len(missing)), indexing="ij") if missing else []
    n = grids[0].size if missing else 1
    m = np.zeros((n, 4))
    v = np.zeros((n, 4))
    for i, arm in enumerate(PARTITION_ARMS):
        if arm in mean:
            m[:, i], v[:, i] = mean[arm], var[arm]
        else:
            m[:, i] = grids[missing.index(arm)].ravel()
            v[:, i] = seed_sd ** 2
    return m, v
