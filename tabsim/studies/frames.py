"""The unit outputs of a packed job as arrays, and the arm rows a design's frame takes from them.

Chunks of one program return metric arrays of one shape, ``[units, arms run, eval points]``; they are
concatenated once per program, and a design's cells x seeds are gathered from them by index, so
building a frame costs a few array operations whatever the number of units.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class UnitOutputs:
    """Every unit's outputs: ``data[g][metric]`` is ``[units of program g, A_ran, E]``.

    Attributes:
      data: one mapping metric -> array per program.
      group: ``[n_units]`` the program of each unit id.
      row: ``[n_units]`` the unit's row in its program's arrays.
    """

    data: tuple
    group: np.ndarray
    row: np.ndarray

    def _group_of(self, ids: np.ndarray) -> int:
        g = self.group[ids]
        if not (g == g.flat[0]).all():
            raise ValueError("the units of one static combination come from several programs")
        return int(g.flat[0])

    def metrics(self, ids: np.ndarray) -> list[str]:
        """The sorted metric names of the program that ran ``ids``."""
        return sorted(self.data[self._group_of(ids)])

    def gather(self, metric: str, ids: np.ndarray) -> np.ndarray:
        """``ids.shape + [A_ran, E]``: ``metric`` of the units ``ids`` (all of one program)."""
        return self.data[self._group_of(ids)][metric][self.row[ids]]


def unit_outputs(planned: Sequence[tuple], outs: Sequence[dict]) -> UnitOutputs:
    """Concatenate chunk outputs per program (chunks of one program share their ``config`` mapping).

    Args:
      planned: ``(unit ids, Chunk)`` pairs, as the plan holds them (:attr:`tabsim.runtime.planning.RunPlan.parts`).
      outs: each chunk's output, metric -> ``[n_real, A_ran, E]``, in the same order.
    """
    groups: dict[int, int] = {}  # id of a chunk's config mapping -> program index
    parts: list[list[dict]] = []
    ids: list[list] = []
    for (uids, chunk), out in zip(planned, outs):
        g = groups.setdefault(id(chunk.config), len(groups))
        if g == len(parts):
            parts.append([])
            ids.append([])
        parts[g].append(out)
        ids[g].append(np.asarray(uids, dtype=np.int64))
    n = max((int(i.max()) + 1 for per in ids for i in per if i.size), default=0)
    group, row = np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    data = []
    for g, (chunk_outs, chunk_ids) in enumerate(zip(parts, ids)):
        uids = np.concatenate(chunk_ids)
        group[uids], row[uids] = g, np.arange(uids.size)
        data.append({m: np.concatenate([o[m] for o in chunk_outs]) for m in chunk_outs[0]})
    return UnitOutputs(data=tuple(data), group=group, row=row)


def arm_rows(values: np.ndarray, arms: list, ran: list, keep: list) -> np.ndarray:
    """``[..., A_kept, E]`` rows of the design's arms from units' ``[..., A_ran, E]`` outputs.

    A FROZEN arm that was not simulated repeats the step-0 value of the first simulated arm (its
    policy is the prior at every step; diagnostics are NaN at step 0).
    """
    src = [ran.index(arms[k]) if arms[k] in ran else -1 for k in keep]
    out = values[..., [max(j, 0) for j in src], :]
    for a, j in enumerate(src):
        if j < 0:
            out[..., a, :] = values[..., 0, :1]
    return out
