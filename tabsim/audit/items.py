"""Per-item results (item x sample correctness) and the clustered variance they give.

An avg@k score averages k samples of each item; the samples of one item are correlated, so the
score carries between ``p(1 - p) / (n k)`` (samples independent) and ``p(1 - p) / n`` (the item as
the unit) of variance. Per-item results settle it: with ``y_i`` the item's score (mean of its
samples for greedy / avg@k, any correct sample for pass@k), the clustered variance of the mean is
``s^2(y) / n``, and two arms scored on the same items get the paired covariance
``cov(y_a, y_b) / n`` (Cameron & Miller, A Practitioner's Guide to Cluster-Robust Inference, 2015).

File format (CSV, ``#`` lines are comments): columns ``arm``, ``item``, ``correct`` (0 or 1) and
optionally ``sample``; one row per arm x item x sample.
"""
from __future__ import annotations

import csv
import dataclasses
import io
from pathlib import Path

import numpy as np

from tabsim.files.safeload import LoadError, read_text

MAX_BYTES = 64 << 20  # 10^6 item x sample rows
COLUMNS = ("arm", "item", "correct")


@dataclasses.dataclass(frozen=True)
class ItemScores:
    """Per-item scores of one arm: ``items`` (ids, sorted) and ``y`` in [0, 1], one per item."""

    items: tuple
    y: np.ndarray
    samples: int


def read_per_item(path: Path, *, protocol: str, k: int, arm_names: dict, where: str, add) -> dict:
    """Read a per-item file and reduce it to per-item scores per arm.

    Args:
      path: the CSV file.
      protocol: ``greedy``, ``avg`` or ``pass``: how the samples of an item make its score.
      k: samples per item the entry declares (each arm x item must have exactly k rows).
      arm_names: name as written in the file -> canonical arm (aliases resolved by the caller).
      where: the entry's label, for messages.
      add: ``add(where, message)`` collects a problem.

    Returns:
      dict canonical arm -> :class:`ItemScores` (empty when the file has problems).
    """
    field = "per_item"
    try:
        text = read_text(path, max_bytes=MAX_BYTES, what="per-item file")
    except LoadError as err:
        add(where, f"{field}: {err}")
        return {}
    lines = ["" if ln.lstrip().startswith("#") else ln for ln in text.splitlines()]
    reader = csv.reader(io.StringIO("\n".join(lines)))
    try:
        rows = [r for r in reader if any(c.strip() for c in r)]
    except csv.Error as err:
        add(where, f"{field}: {path}: malformed CSV: {err}")
        return {}
    if not rows:
        add(where, f"{field}: {path}: empty; expected columns {', '.join(COLUMNS)} [, sample]")
        return {}
    header = [h.strip() for h in rows[0]]
    miss = [c for c in COLUMNS if c not in header]
    if miss:
        add(where, f"{field}: {path}: missing column(s) {miss}; expected {', '.join(COLUMNS)} [, sample]")
        return {}
    ia, ii, ic = (header.index(c) for c in COLUMNS)
    cells: dict = {}
    bad = []
    for n, r in enumerate(rows[1:], start=2):
        r = r + [""] * (len(header) - len(r))
        arm_raw, item, corr = r[ia].strip(), r[ii].strip(), r[ic].strip()
        arm = arm_names.get(arm_raw)
        if arm is None:
            bad.append(f"row {n}: arm {arm_raw!r} is not an arm of this entry ({', '.join(arm_names)})")
        elif corr not in ("0", "1"):
            bad.append(f"row {n}: correct {corr!r} must be 0 or 1")
        elif not item:
            bad.append(f"row {n}: item is empty")
        else:
            cells.setdefault(arm, {}).setdefault(item, []).append(int(corr))
        if len(bad) >= 5:
            break
    for b in bad:
        add(where, f"{field}: {path}: {b}")
    if bad:
        return {}
    out = {}
    for arm, by_item in cells.items():
        counts = {len(v) for v in by_item.values()}
        if counts != {k}:
            add(where, f"{field}: {path}: arm {arm!r} has {sorted(counts)} samples per item; the entry declares {k}")
            continue
        items = tuple(sorted(by_item))
        mat = np.array([by_item[i] for i in items], dtype=float)
        y = mat.max(axis=1) if protocol == "pass" else mat.mean(axis=1)
        out[arm] = ItemScores(items, y, k)
    return out


def clustered_moments(scores: dict) -> tuple[dict, dict]:
    """Mean (percent) and clustered covariance (points^2) of arms with per-item scores.

    ``var_a = 100^2 s^2(y_a) / n``; ``cov_ab = 100^2 cov(y_a, y_b) / n`` when both arms are scored on
    the same items (paired), else 0.

    Returns:
      ``(mean, cov)``: dict arm -> percent, dict (arm, arm) -> points^2.
    """
    mean, cov = {}, {}
    arms = list(scores)
    for a in arms:
        s = scores[a]
        mean[a] = 100.0 * float(s.y.mean())
    for i, a in enumerate(arms):
        for b in arms[i:]:
            sa, sb = scores[a], scores[b]
            if sa.items != sb.items:
                continue
            n = len(sa.items)
            c = float(np.cov(sa.y, sb.y, ddof=1)[0, 1]) if n > 1 else 0.0
            cov[(a, b)] = cov[(b, a)] = 1e4 * c / n
    return mean, cov
