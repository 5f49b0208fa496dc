"""The work of several designs as deduplicated units (program, traced values, seed): data that the
planner (:func:`tabsim.runtime.planning.plan`) packs into chunks of one size per program."""
from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np

from tabsim.config import Config, resolve
from tabsim.config.mapping import config_mapping
from tabsim.runtime.planning import Work
from tabsim.config.static import static_key
from tabsim.studies.designs import TRACED, Design, program_config, static_combos


def run_config(cfg: Config, *, skip_frozen: bool = True) -> Config:
    """The config that is compiled for ``cfg``: without the FROZEN arm when ``skip_frozen``.

    FROZEN never updates, so its metrics at every step are the step-0 metrics, which every trained
    arm of the same seed also reports; simulating it would cost a quarter of a four-arm run.
    """
    arms = list(cfg.arms.arms)
    if not skip_frozen or "frozen" not in arms or len(arms) == 1:
        return cfg
    return resolve({**config_mapping(cfg), "arms": {**cfg.arms.model_dump(mode="json"),
                                                            "arms": [a for a in arms if a != "frozen"]}})


def plan_units(designs: Sequence[Design], *, skip_frozen: bool = True, units_per_chunk: int | None = None):
    """The deduplicated units of ``designs`` as a :class:`tabsim.runtime.planning.Work` (data for the planner),
    and where each design's cells x seeds are among them.

    A unit is a (program, traced values, seed); units that several designs share run once.

    Returns:
      ``(work, unit_index)``: ``unit_index[d][(static, traced, seed)]`` the unit id of each cell x seed of
      design ``d``.
    """
    programs: dict = {}
    pairs: dict = {}
    unit_pair, unit_seed, index = [], [], []
    for d in designs:
        traced = [f for f in d.factors if f.kind == TRACED]
        per: dict = {}
        for static in static_combos(d):
            cfg = run_config(program_config(d, static), skip_frozen=skip_frozen)
            g = list(programs).index(key) if (key := static_key(cfg)) in programs else len(programs)
            programs.setdefault(key, cfg)
            for tcombo in itertools.product(*(range(len(f.levels)) for f in traced)):
                hv = cfg.hyper_values({f.target: float(f.levels[i]) for f, i in zip(traced, tcombo)})
                hkey = (g, tuple(sorted((k, float(np.float32(v))) for k, v in hv.items())))
                _, _, seen, p = pairs.setdefault(hkey, (g, hv, {}, len(pairs)))
                new = [s for s in d.seeds if s not in seen]
                seen.update(zip(new, range(len(unit_seed), len(unit_seed) + len(new))))
                unit_pair.extend([p] * len(new))
                unit_seed.extend(new)
                per.update({(static, tcombo, s): seen[s] for s in d.seeds})
        index.append(per)
    work = Work(configs=tuple(programs.values()), hypers=tuple(p[1] for p in pairs.values()), seeds=tuple(unit_seed),
                pair=tuple(unit_pair), program=tuple(p[0] for p in pairs.values()), requested=units_per_chunk)
    return work, index
