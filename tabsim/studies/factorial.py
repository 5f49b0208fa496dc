"""Factorial designs on the compiled engine: declare factors, get one tidy frame.

A factor is ``name -> config field -> levels``; any number of factors, any number of levels. The
field decides how a factor is run:

* ``arm``: the engine's arm axis (levels are arm names; every arm of a seed shares its randomness);
* a traced numeric field (``prior_strength``, ``algo.filter``, ``lr``, ``gamma``, ... any field of
  :class:`tabsim.params.Hyper`): a value of the vmapped hyperparameter pytree, never a recompile;
* a static field (``preset``, ``algo.estimator``, ``task.n_prompts``, ``train.steps``, ...): each
  combination of static levels is its own compiled program.

The work is the set of units (program, traced condition, seed). Units are deduplicated across the
designs of one call, packed into chunks of ``U`` units and each chunk is one call of
``jit(vmap(train))`` over its units, so a program compiles once whatever the number of cells,
seeds or chunks. Chunks are self-contained, picklable :class:`Chunk` values run by
:func:`run_chunk` through an :class:`tabsim.runtime.executors.Executor`, so a distributed executor can run them.

    import tabsim as ts
    res = ts.run_factorial({"preset": "paper"}, {
        "reward": {"arm": ["true", "majority"]},
        "filter": {"algo.filter": [1, 0]},
        "prior": {"task.prior_strength": [0.80, 0.35]},
    }, seeds=8)
    res.final()   # columns reward, filter, prior, seed, arm, step, pass1, ...
"""
from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import jax
import numpy as np
import pandas as pd

from tabsim import _clock
from tabsim.arms import ARMS
from tabsim.config import SWEEPABLE, AlgoConfig, ArmsConfig, Config, ConfigError, TaskConfig, TrainConfig, resolve
from tabsim.files.atomic import read_frame, write_frame, write_json
from tabsim.files.provenance import provenance
from tabsim.params import stack_hypers
from tabsim.rng import seed_array
from tabsim.runtime import device as device_mod
from tabsim.runtime import planning
from tabsim.runtime.executors import Executor
from tabsim.runtime.progress import progress_bar as _progress
from tabsim.runtime.run import call_program, compiled_train, static_key
from tabsim.runtime.store import OutputExistsError, execute, job_key, writing_into
from tabsim.studies.frames import arm_rows, unit_outputs
from tabsim.studies.heartbeat import until_first_chunk

ARM, TRACED, STATIC = "arm", "traced", "static"
_SECTIONS = {"task": TaskConfig, "arms": ArmsConfig, "algo": AlgoConfig, "train": TrainConfig}
# Fields a factor may not vary: seeds are the runner's replication axis, arms are the arm factor.
_NOT_FACTORS = {"train.seeds", "train.seed", "train.chunk_conditions", "arms.arms"}
_RESERVED = {"seed", "arm", "step"}
_PROGRAMS: dict = {}  # static key -> jit(vmap(train)) over units


def field_kind(field: str) -> tuple[str, str]:
    """How a factor's config field is run: ``(kind, canonical field)``.

    Args:
      field: ``"arm"``, a sweepable name (``"prior_strength"``) or dotted path
        (``"task.prior_strength"``, ``"algo.filter"``), ``"preset"``, or a dotted static field
        (``"algo.estimator"``, ``"task.n_prompts"``, ``"train.steps"``, ...).

    Returns:
      ``("arm", "arm")``, ``("traced", <Hyper field>)`` or ``("static", <dotted path>)``.
    """
    if not isinstance(field, str) or not field:
        raise ValueError(f"factor field must be a non-empty string, got {field!r}")
    if field in ("arm", "arms.arm"):
        return ARM, "arm"
    if field in SWEEPABLE:
        return TRACED, field
    if field == "preset":
        return STATIC, "preset"
    section, _, name = field.partition(".")
    if section in _SECTIONS and name:
        if SWEEPABLE.get(name) == (section, name):
            return TRACED, name
        if field in _NOT_FACTORS:
            raise ValueError(f"factor field {field!r} cannot be a factor: seeds are the runner's replication "
                             f"axis (pass seeds=) and arms are varied with the 'arm' field")
        if name not in _SECTIONS[section].model_fields:
            raise ValueError(f"factor field {field!r}: {section} has no field {name!r}; allowed: "
                             f"{', '.join(sorted(_SECTIONS[section].model_fields))}")
        return STATIC, field
    raise ValueError(f"factor field {field!r} is unknown; allowed: 'arm', 'preset', a sweepable field "
                     f"({', '.join(sorted(SWEEPABLE))}) or a dotted static field like 'algo.estimator'")


@dataclasses.dataclass(frozen=True)
class Factor:
    """One factor: a frame column ``name`` whose ``levels`` set the config ``field``.

    Attributes:
      name: column name in the output frame (not ``seed``, ``arm`` or ``step``).
      field: config field, see :func:`field_kind`.
      levels: the levels, in order (for two-level effect coding the first is coded +1).
      labels: optional display values of the levels in the frame (default: the levels).
    """

    name: str
    field: str
    levels: tuple
    labels: tuple | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"factor name must be a non-empty string, got {self.name!r}")
        if self.name in _RESERVED:
            raise ValueError(f"factor name {self.name!r} is reserved; pick another (reserved: seed, arm, step)")
        levels = tuple(self.levels) if isinstance(self.levels, (list, tuple)) else None
        if not levels:
            raise ValueError(f"factor {self.name!r}: levels must be a non-empty list, got {self.levels!r}")
        if len(set(map(repr, levels))) != len(levels):
            raise ValueError(f"factor {self.name!r}: levels repeat: {list(levels)}")
        object.__setattr__(self, "levels", levels)
        kind, canon = field_kind(self.field)
        if kind == ARM:
            bad = [x for x in levels if x not in ARMS]
            if bad:
                raise ValueError(f"factor {self.name!r}: unknown arm(s) {bad}; allowed: {', '.join(ARMS)}")
        if kind == TRACED:
            for x in levels:
                if isinstance(x, str) or not isinstance(x, (int, float, bool, np.integer, np.floating)):
                    raise ValueError(f"factor {self.name!r}: {self.field} is numeric; level {x!r} is not a number")
        if self.labels is not None:
            labels = tuple(self.labels)
            if len(labels) != len(levels) or len(set(map(repr, labels))) != len(labels):
                raise ValueError(f"factor {self.name!r}: labels must be {len(levels)} distinct values, one per "
                                 f"level, got {list(labels)}")
            object.__setattr__(self, "labels", labels)

    @property
    def kind(self) -> str:
        return field_kind(self.field)[0]

    @property
    def target(self) -> str:
        return field_kind(self.field)[1]

    def label(self, i: int):
        return (self.labels or self.levels)[i]


def as_factors(factors) -> tuple[Factor, ...]:
    """Normalise factor declarations: :class:`Factor` values or a mapping ``name -> {field: levels}``."""
    if isinstance(factors, Factor):
        return (factors,)
    if isinstance(factors, Mapping):
        out = []
        for name, spec in factors.items():
            if isinstance(spec, Factor):
                out.append(spec)
                continue
            if not isinstance(spec, Mapping) or len(spec) != 1:
                raise ValueError(f"factor {name!r}: declare it as {{field: [levels]}} with exactly one field, "
                                 f"e.g. {{'task.prior_strength': [0.8, 0.35]}}; got {spec!r}")
            (field, levels), = spec.items()
            out.append(Factor(name, field, tuple(levels) if isinstance(levels, (list, tuple)) else levels))
        factors = out
    factors = tuple(factors)
    for f in factors:
        if not isinstance(f, Factor):
            raise ValueError(f"factors must be Factor values or a mapping name -> {{field: levels}}, got {f!r}")
    names = [f.name for f in factors]
    if len(set(names)) != len(names):
        raise ValueError(f"factor names repeat: {names}")
    targets = [f.target for f in factors]
    if len(set(targets)) != len(targets):
        raise ValueError(f"two factors set the same field: {[f.field for f in factors]}")
    return factors


@dataclasses.dataclass(frozen=True)
class Design:
    """A full factorial of ``factors`` on ``base``, replicated over ``seeds``.

    Attributes:
      base: the config mapping every cell starts from (validated by :func:`tabsim.config.resolve`).
      factors: the factors; cells are their full factorial, in declaration order.
      seeds: the seed ids; every cell runs every seed (paired across cells and arms).
      name: a label for progress and provenance.
    """

    base: dict
    factors: tuple
    seeds: tuple
    name: str = "design"


def make_design(base: Config | dict | None, factors=(), *, seeds: int | Sequence[int] | None = None,
                name: str = "design") -> Design:
    """Validate a design: the base config, the factors (and their levels) and the seeds.

    A ``sweep`` in ``base`` becomes one traced factor per field (named by the field).

    Raises:
      ConfigError: a bad config value or factor level, naming the field, value and allowed range.
      ValueError: a malformed factor or seed list.
    """
    if isinstance(base, Config):
        base = base.model_dump(mode="json")
    base = copy.deepcopy(dict(base or {}))
    sweep = base.pop("sweep", {}) or {}
    facs = list(as_factors(factors))
    have = {f.target for f in facs}
    for fname, levels in sweep.items():
        if fname not in have:
            facs.append(Factor(fname, fname, tuple(levels)))
    facs = tuple(as_factors(facs))
    if sum(f.kind == ARM for f in facs) > 1:
        raise ValueError("at most one factor can vary the arm")
    cfg = resolve(base)
    if seeds is None:
        seeds = cfg.train.seeds
    if isinstance(seeds, (int, np.integer)) and not isinstance(seeds, bool):
        if seeds < 1:
            raise ValueError(f"seeds must be >= 1, got {seeds}")
        seed_list = tuple(range(cfg.train.seed, cfg.train.seed + int(seeds)))
    else:
        try:
            seed_list = tuple(int(s) for s in seeds)
        except (TypeError, ValueError):
            raise ValueError(f"seeds must be a count or a list of ints, got {seeds!r}") from None
        bad = [s for s in seed_list if not 0 <= s < 2**31]
        if not seed_list or bad or len(set(seed_list)) != len(seed_list):
            raise ValueError(f"seeds must be distinct ints in [0, 2**31), at least one; got {list(seeds)[:8]}...")
    design = Design(base=base, factors=facs, seeds=seed_list, name=name)
    for static in _static_combos(design):  # every level of every factor is validated before anything runs
        _program_config(design, static)
    return design


def _set_path(d: dict, path: str, value) -> None:
    if path == "preset":
        d["preset"] = value
        return
    section, _, name = path.partition(".")
    d.setdefault(section, {})
    d[section] = dict(d[section])
    d[section][name] = value


def _static_combos(design: Design) -> list[tuple]:
    statics = [f for f in design.factors if f.kind == STATIC]
    return list(itertools.product(*(range(len(f.levels)) for f in statics)))


def _program_config(design: Design, static: tuple) -> Config:
    """The resolved config of one static combination, with every traced level validated."""
    statics = [f for f in design.factors if f.kind == STATIC]
    data = copy.deepcopy(design.base)
    for f, i in zip(statics, static):
        _set_path(data, f.target, f.levels[i])
    arm_f = next((f for f in design.factors if f.kind == ARM), None)
    sweep = {f.target: [float(x) for x in f.levels] for f in design.factors if f.kind == TRACED}
    try:
        cfg = resolve({**data, "sweep": sweep})
    except ConfigError as err:
        where = ", ".join(f"{f.name}={f.levels[i]!r}" for f, i in zip(statics, static))
        raise ConfigError(f"{err}" + (f"\n  (in the cell {where})" if where else "")) from None
    if arm_f is not None:
        arms = list(cfg.arms.arms) + [a for a in arm_f.levels if a not in cfg.arms.arms]
        if arms != list(cfg.arms.arms):
            cfg = resolve({**data, "sweep": sweep, "arms": {**data.get("arms", {}), "arms": arms}})
    # a swept ent_coef decides that the entropy term is compiled (tabsim.runtime.run.algo_spec): keep it
    kept = {k: v for k, v in sweep.items() if k == "ent_coef"}
    return resolve({**cfg.model_dump(mode="json"), "sweep": kept})


@dataclasses.dataclass(frozen=True)
class Chunk:
    """One call of a compiled program over ``len(seeds)`` units (self-contained and picklable).

    Attributes:
      config: resolved config (JSON); its static structure selects the program.
      hypers: one full :class:`tabsim.params.Hyper` value mapping per unit.
      seeds: one seed id per unit.
      n_real: units that count; the rest pad the chunk to the program's fixed size.
      index: position of the chunk in its run.
    """

    config: dict
    hypers: tuple
    seeds: tuple
    n_real: int
    index: int = 0


def unit_program(cfg: Config):
    """``jit(vmap(train))`` over units ``(seed [U, 1, 2], hypers [U, 1])`` for ``cfg``'s static structure.

    Cached per static key, beside the engine program in ``tabsim.runtime.run._CACHE`` that it wraps.
    """
    key = static_key(cfg)
    if key not in _PROGRAMS:  # setdefault: threads that build it together share the first
        train = compiled_train(cfg)
        # the engine's function itself (a nested jit may not carry compiler options; its options go here)
        program = jax.jit(jax.vmap(train.__wrapped__), compiler_options=train.xla_options)
        program.xla_options = train.xla_options
        _PROGRAMS.setdefault(key, program)
    return _PROGRAMS[key]


def run_chunk(chunk: Chunk) -> dict[str, np.ndarray]:
    """Run one chunk; returns metric -> ``[n_real, A, E + 1]`` (units, arms, eval points)."""
    cfg = Config.model_validate(chunk.config)
    program = unit_program(cfg)
    seeds = seed_array(chunk.seeds)[:, None, :]
    hp = jax.tree_util.tree_map(lambda x: x[:, None], stack_hypers(list(chunk.hypers)))
    out = jax.device_get(call_program(("units", static_key(cfg)), program, seeds, hp))
    return {k: np.asarray(v)[: chunk.n_real, 0, 0] for k, v in out.items()}


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



def run_config(cfg: Config, *, skip_frozen: bool = True) -> Config:
    """The config that is compiled for ``cfg``: without the FROZEN arm when ``skip_frozen``.

    FROZEN never updates, so its metrics at every step are the step-0 metrics, which every trained
    arm of the same seed also reports; simulating it would cost a quarter of a four-arm run.
    """
    arms = list(cfg.arms.arms)
    if not skip_frozen or "frozen" not in arms or len(arms) == 1:
        return cfg
    return resolve({**cfg.model_dump(mode="json"), "arms": {**cfg.arms.model_dump(mode="json"),
                                                            "arms": [a for a in arms if a != "frozen"]}})


def _plan_units(designs: Sequence[Design], skip_frozen: bool):
    """``(programs, pairs, unit_pair [n_units], unit_seed, index)`` of the deduplicated units of ``designs``.

    A unit is a (program, traced values, seed); a *pair* ``pairs[(g, hyper items)] = (g, Hyper mapping,
    {seed: unit id}, pair id)`` is one program ``g`` (its position in ``programs``) with one set of traced values.
    """
    programs: dict = {}
    pairs: dict = {}
    unit_pair, unit_seed, index = [], [], []
    for d in designs:
        traced = [f for f in d.factors if f.kind == TRACED]
        per: dict = {}
        for static in _static_combos(d):
            cfg = run_config(_program_config(d, static), skip_frozen=skip_frozen)
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
    return programs, list(pairs.values()), np.asarray(unit_pair, dtype=np.int64), unit_seed, index


def plan_chunks(designs: Sequence[Design], *, units_per_chunk: int | None = None, skip_frozen: bool = True,
                executor=None, device=None):
    """Deduplicated units of ``designs`` packed into equal-size chunks, one size per program.

    An ``executor`` whose workers have a memory limit (:class:`tabsim.runtime.dask.DaskExecutor`) caps the
    units per chunk so that one chunk fits it. ``device`` (a ``jax.Device``) is where the chunks run: an
    accelerator's chunks are as large as its memory holds (:func:`tabsim.runtime.planning.units_per_chunk`).

    Returns:
      ``(chunks, unit_index, programs)``: ``chunks`` a list of ``(unit ids, Chunk)``;
      ``unit_index[d][(static, traced, seed)]`` the unit id of each cell x seed of design ``d``;
      ``programs`` static key -> compiled config.
    """
    programs, pairs, unit_pair, unit_seed, index = _plan_units(designs, skip_frozen)
    unit_program = np.asarray([pair[0] for pair in pairs], dtype=np.int64)[unit_pair]
    hypers, seeds = np.empty(len(pairs), dtype=object), np.empty(len(unit_seed), dtype=object)
    hypers[:], seeds[:] = [pair[1] for pair in pairs], unit_seed
    chunks = []
    for g, cfg in enumerate(programs.values()):
        ids = np.flatnonzero(unit_program == g)
        u = planning.units_per_chunk(cfg, ids.size, executor, units_per_chunk, device)  # a unit: condition x seed
        conf = cfg.model_dump(mode="json")
        for start in range(0, ids.size, u):
            part = ids[start:start + u]
            padded = np.concatenate([part, np.repeat(part[-1:], u - part.size)])
            chunks.append((part.tolist(), Chunk(config=conf, hypers=tuple(hypers[unit_pair[padded]]),
                                                seeds=tuple(seeds[padded]), n_real=part.size, index=len(chunks))))
    return chunks, index, programs


def run_designs(designs: Sequence[Design], *, executor: Executor | None = None, progress: bool | None = None,
                units_per_chunk: int | None = None, skip_frozen: bool = True,
                desc: str = "tabsim factorial", store=None, device: str | None = None) -> list[DesignResult]:
    """Run several designs as one packed job: shared units run once, each program compiles once.

    Args:
      designs: validated designs (see :func:`make_design`).
      executor: where chunks run (default :class:`tabsim.runtime.executors.LocalExecutor`); ``executor.map(run_chunk,
        chunks)`` must yield the outputs in chunk order.
      progress: show a progress bar over chunks (default: when there is more than one chunk).
      units_per_chunk: units (condition x seed) per compiled call; default about 4e6 sampled answers.
      skip_frozen: evaluate FROZEN from the step-0 metrics instead of simulating it (identical
        evaluation metrics; its diagnostics ``reward_mean``, ``kept_frac``, ``clip_frac`` are NaN).
      desc: progress bar label.
      store: a :class:`tabsim.runtime.store.RunStore` keeping each finished chunk, so an interrupted job resumes
        where it stopped (default: the store of an enclosing ``with RunStore(...)``, if any).
      device: ``"cpu"``, ``"gpu"`` or ``"auto"`` (default ``$TABSIM_DEVICE``, else ``"auto"``), as in
        :func:`tabsim.runtime.run.run`: chosen from the work of every chunk together.

    Returns:
      One :class:`DesignResult` per design, in order.
    """
    t0 = time.perf_counter()
    designs = list(designs)
    if units_per_chunk is not None and (not isinstance(units_per_chunk, int) or units_per_chunk < 1):
        raise ValueError(f"units_per_chunk must be an int >= 1, got {units_per_chunk!r}")
    plan, (planned, index, programs) = planning.plan_designs(  # device, chunks, executor: decided once
        lambda dev: plan_chunks(designs, units_per_chunk=units_per_chunk, skip_frozen=skip_frozen, executor=executor,
                                device=dev), executor=executor, device=device, progress=progress,
        fixed_units=units_per_chunk is not None)
    dev, executor, show, n_units = plan.device, plan.executor, plan.shown, plan.conditions
    chunks = [c for _, c in planned]
    job = job_key("designs", [(c.config, c.hypers, c.seeds, c.n_real) for c in chunks])
    with _clock.timed("compile"):
        for cfg in programs.values():  # built before the bar: a note about the compile options prints above it
            compiled_train(cfg)
    with _progress(len(planned), show, desc) as bar, device_mod.using(dev), until_first_chunk(bar):
        outs = execute(run_chunk, chunks, executor=executor, store=store, job=job, progress=bar)
    t_frames = time.perf_counter()
    outputs = unit_outputs(planned, outs)
    wall = round(time.perf_counter() - t0, 3)
    results = []
    for d, per in zip(designs, index):
        frame = _frame(d, per, outputs, skip_frozen)
        prov = provenance(design=d.name, seeds=list(d.seeds), wall_seconds_job=wall, n_units_job=n_units,
                          n_chunks_job=len(planned), n_programs_job=len(programs), **device_mod.describe(dev),
                          plan=plan.as_dict(),
                          config_hashes=sorted({_program_config(d, s).digest() for s in _static_combos(d)}))
        conf = {"base": d.base, "factors": [dataclasses.asdict(f) for f in d.factors], "seeds": list(d.seeds),
                "programs": [_program_config(d, s).model_dump(mode="json") for s in _static_combos(d)]}
        results.append(DesignResult(frame=frame, factors=d.factors, config=_jsonable(conf), provenance=prov))
    _clock.add("frames", time.perf_counter() - t_frames)
    return results


def _jsonable(obj):
    return json.loads(json.dumps(obj, default=lambda o: o.item() if isinstance(o, np.generic) else str(o)))


def _frame(d: Design, per: dict, outputs, skip_frozen: bool) -> pd.DataFrame:
    """Tidy rows of one design from the unit outputs."""
    statics = [f for f in d.factors if f.kind == STATIC]
    traced = [f for f in d.factors if f.kind == TRACED]
    arm_f = next((f for f in d.factors if f.kind == ARM), None)
    parts, arms_seen = [], []
    for static in _static_combos(d):
        cfg = _program_config(d, static)
        arms = list(cfg.arms.arms)
        ran = list(run_config(cfg, skip_frozen=skip_frozen).arms.arms)
        keep = [arms.index(a) for a in arm_f.levels] if arm_f else list(range(len(arms)))
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
        arm_names = [arms[k] for k in keep]
        arms_seen.append(arm_names)
        cols["arm"] = np.asarray(arm_names, dtype=object)[ai]
        cols["step"] = steps[ei]
        for m in metrics:
            cols[m] = arm_rows(outputs.gather(m, ids), arms, ran, keep).astype(np.float64).reshape(-1)
        parts.append(pd.DataFrame(cols))
    frame = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    names = [f.name for f in d.factors]
    frame = frame[names + [c for c in frame.columns if c not in names]]
    all_arms = list(dict.fromkeys(a for names_ in arms_seen for a in names_))  # their order of first appearance
    frame["arm"] = pd.Categorical(frame["arm"], categories=all_arms)
    for f in statics:
        vals = [f.label(i) for i in range(len(f.levels))]
        if all(isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) for x in vals):
            frame[f.name] = frame[f.name].astype(float)
        elif all(isinstance(x, str) for x in vals):
            frame[f.name] = frame[f.name].astype(str)
    return frame


def run_factorial(base: Config | dict | None, factors, *, seeds: int | Sequence[int] | None = None,
                  executor: Executor | None = None, progress: bool | None = None,
                  units_per_chunk: int | None = None, skip_frozen: bool = True,
                  name: str = "factorial", device: str | None = None) -> DesignResult:
    """Run the full factorial of ``factors`` x ``seeds`` on ``base`` and return its tidy frame.

    Every cell x seed x arm is one trajectory; traced factors and seeds are vmapped units of one
    compiled program per static combination (see the module docstring).

    Args:
      base: config mapping (or :class:`Config`), e.g. ``{"preset": "paper"}``.
      factors: ``{name: {field: levels}}`` or a sequence of :class:`Factor`.
      seeds: a count (from ``train.seed``) or a list of seed ids; default ``train.seeds``.
      executor: chunk executor (default local).
      progress: progress bar over chunks.
      units_per_chunk: units per compiled call (default about 4e6 sampled answers).
      skip_frozen: see :func:`run_designs`.
      name: label for progress and provenance.
      device: ``"cpu"``, ``"gpu"`` or ``"auto"``, see :func:`run_designs`.

    Returns:
      :class:`DesignResult`.
    """
    design = make_design(base, factors, seeds=seeds, name=name)
    return run_designs([design], executor=executor, progress=progress, units_per_chunk=units_per_chunk,
                       skip_frozen=skip_frozen, desc=f"tabsim {name}", device=device)[0]


def frames_by_design(results: Iterable[DesignResult]) -> dict[str, pd.DataFrame]:
    """``{design name: frame}`` for a list of results."""
    return {r.provenance["design"]: r.frame for r in results}


__all__ = ["Factor", "Design", "Chunk", "DesignResult", "field_kind", "as_factors", "make_design", "plan_chunks",
           "run_chunk", "run_config", "run_designs", "run_factorial", "unit_program", "frames_by_design"]
