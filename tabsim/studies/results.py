"""A design's results: the tidy frame built from the unit outputs, saved and loaded with its config
and provenance."""
from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from tabsim.files.atomic import read_frame, write_frame, write_json
from tabsim.runtime.store import OutputExistsError, writing_into
from tabsim.studies.chunks import run_config
from tabsim.studies.designs import ARM, STATIC, TRACED, Design, Factor, program_config, static_combos
from tabsim.studies.frames import arm_rows


@dataclasses.dataclass
class DesignResult:
    """A design's tidy frame (one row per cell x seed x arm x eval step), with its config and provenance.

    Columns: the factor names (their labels), ``seed``, ``arm``, ``step``, then the metrics.
    """

    frame: pd.DataFrame
    factors: tuple
    config: dict
    provenance: dict

    @property
    def factor_names(self) -> list[str]:
        return [f.name for f in self.factors]

    def final(self) -> pd.DataFrame:
        """Rows at each program's last evaluated step."""
        statics = [f.name for f in self.factors if f.kind == STATIC]
        if statics:
            last = self.frame.groupby(statics, observed=True)["step"].transform("max")
        else:
            last = self.frame["step"].max()
        return self.frame[self.frame["step"] == last].reset_index(drop=True)

    def save(self, out_dir: str | Path, fmt: str = "parquet", stem: str = "results", *,
             overwrite: bool = False) -> Path:
        """Write ``<stem>.<fmt>``, ``<stem>.config.json`` (base config and factors) and provenance, atomically.

        An existing ``<stem>.<fmt>`` is refused unless ``overwrite`` (files of other stems are kept)."""
        out = Path(out_dir)
        if not overwrite and not writing_into(out) and (out / f"{stem}.{fmt}").exists():
            raise OutputExistsError(f"{out / f'{stem}.{fmt}'} exists; pass overwrite=True to replace it")
        write_frame(out / f"{stem}.{fmt}", self.frame)
        write_json(out / f"{stem}.config.json", self.config)
        write_json(out / f"{stem}.provenance.json", self.provenance)
        return out

    @classmethod
    def load(cls, out_dir: str | Path, stem: str = "results") -> "DesignResult":
        out = Path(out_dir)
        files = [p for p in (out / f"{stem}.parquet", out / f"{stem}.csv") if p.exists()]
        if not files:
            raise FileNotFoundError(f"{out}: no {stem}.parquet or {stem}.csv")
        config = json.loads((out / f"{stem}.config.json").read_text())
        factors = tuple(Factor(f["name"], f["field"], tuple(f["levels"]),
                               tuple(f["labels"]) if f.get("labels") is not None else None)
                        for f in config.get("factors", []))
        return cls(frame=read_frame(files[0]), factors=factors, config=config,
                   provenance=json.loads((out / f"{stem}.provenance.json").read_text()))


def design_frame(d: Design, per: dict, outputs, skip_frozen: bool) -> pd.DataFrame:
    """Tidy rows of one design from the unit outputs."""
    statics = [f for f in d.factors if f.kind == STATIC]
    traced = [f for f in d.factors if f.kind == TRACED]
    arm_f = next((f for f in d.factors if f.kind == ARM), None)
    parts, programs = [], []
    for static in static_combos(d):
        cfg = program_config(d, static)
        arms = list(cfg.arms.arms)
        keep = [arms.index(a) for a in arm_f.levels] if arm_f else list(range(len(arms)))
        programs.append((static, cfg, arms, keep))
    # the arm column's categories: every program's arms in their order of first appearance
    all_arms = list(dict.fromkeys(arms[k] for _, _, arms, keep in programs for k in keep))
    for static, cfg, arms, keep in programs:
        ran = list(run_config(cfg, skip_frozen=skip_frozen).arms.arms)
        ev = cfg.train.eval_every or cfg.train.steps
        steps = np.arange(0, cfg.train.steps + 1, ev)
        tcombos = list(itertools.product(*(range(len(f.levels)) for f in traced)))
        S, A, E = len(d.seeds), len(keep), steps.size
        ids = np.array([[per[(static, t, s)] for s in d.seeds] for t in tcombos])  # [cells, S]
        metrics = outputs.metrics(ids)
        ci, si, ai, ei = (a.ravel() for a in np.meshgrid(np.arange(len(tcombos)), np.arange(S), np.arange(A),
                                                            np.arange(E), indexing="ij"))
        cols: dict[str, Any] = {}
        for f, i in zip(statics, static):
            cols[f.name] = np.full(ci.size, f.label(i), dtype=object)
        for j, f in enumerate(traced):
            lab = [f.label(t[j]) for t in tcombos]
            cols[f.name] = np.asarray(lab)[ci]
        if arm_f is not None:
            cols[arm_f.name] = np.asarray([arm_f.label(k) for k in range(A)], dtype=object)[ai]
        cols["seed"] = np.asarray(d.seeds, dtype=np.int64)[si]
        codes = np.asarray([all_arms.index(arms[k]) for k in keep], dtype=np.int32)[ai]
        cols["arm"] = pd.Categorical.from_codes(codes, categories=all_arms)  # from codes: no string per row
        cols["step"] = steps[ei]
        for m in metrics:
            cols[m] = arm_rows(outputs.gather(m, ids), arms, ran, keep).astype(np.float64).reshape(-1)
        parts.append(pd.DataFrame(cols))
    frame = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    names = [f.name for f in d.factors]
    frame = frame[names + [c for c in frame.columns if c not in names]]
    for f in statics:
        vals = [f.label(i) for i in range(len(f.levels))]
        if all(isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) for x in vals):
            frame[f.name] = frame[f.name].astype(float)
        elif all(isinstance(x, str) for x in vals):
            frame[f.name] = frame[f.name].astype(str)
    return frame


def frames_by_design(results: Iterable[DesignResult]) -> dict[str, pd.DataFrame]:
    """``{design name: frame}`` for a list of results."""
    return {r.provenance["design"]: r.frame for r in results}
