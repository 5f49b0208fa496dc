"""What ``tabsim run`` and ``tabsim sweep`` share: ``--preset``, ``--vary``, ``--arms`` and ``--set``, how
they build one validated config from a file and the options, and the estimate of a long run.

Malformed option values are usage errors (exit 2, like an unknown option); a config value out of range
is a config error (exit 1) naming the field. Nothing heavy at import (``tabsim run --help``).
"""
from __future__ import annotations

import math
import re

import click

from tabsim.config.presets import PRESETS

# A number as a person types it: ASCII digits, an optional point and exponent. float() also reads
# full-width and other Unicode digits ("０.3") and underscores ("0.0_5"), which no one means as a level.
NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
INTEGER = re.compile(r"[+-]?[0-9]+")
SECTIONS = ("task", "arms", "algo", "train")

DEFAULT_SWEEP = {"prior_strength": [0.2, 0.35, 0.5, 0.65, 0.8]}


def usage(msg: str):
    """End the command with a usage error (exit status 2)."""
    raise click.UsageError(msg)


def _plain_number(text: str) -> float | None:
    return float(text) if NUMBER.fullmatch(text) else None


RANGE = re.compile(r"range\((.*)\)")
GLOB = re.compile(r"glob\((.*)\)")


def _range(spec: str, name: str, args: str, option: str) -> list:
    """``range(start, stop[, step])`` (Hydra's sweep of a range: ``stop`` excluded, ``step`` 1 by default):
    integers when every argument is one, else numbers at exact decimal steps (``range(0.1,0.5,0.1)``)."""
    from decimal import Decimal, InvalidOperation  # lazy: only for a range

    parts = [a.strip() for a in args.split(",")]
    if not 2 <= len(parts) <= 3 or not all(NUMBER.fullmatch(a) for a in parts):
        usage(f"{option} {spec!r}: {name}'s levels range({args}) is not range(start, stop[, step]) with plain "
              "numbers, e.g. range(1,5) or range(0.1,0.5,0.1)")
    ints = all(INTEGER.fullmatch(a) for a in parts)
    try:
        start, stop, step = (*map(Decimal, parts), Decimal(1))[:3]
    except InvalidOperation:  # pragma: no cover - NUMBER matched
        usage(f"{option} {spec!r}: range({args}) is not range(start, stop[, step])")
    if step <= 0 or stop <= start:
        usage(f"{option} {spec!r}: range({args}) holds no level (it needs start < stop and a step > 0; stop is "
              "excluded, as in Python's range)")
    count = math.ceil((stop - start) / step)
    if count > 10_000:
        usage(f"{option} {spec!r}: range({args}) has {count} levels; at most 10000")
    return [int(start + i * step) if ints else float(start + i * step) for i in range(count)]


def choices_of(field: str) -> tuple | None:
    """The names a static field chooses among (``preset``, ``algo.estimator``, ``arms.tie``, ...), or None."""
    import typing  # lazy: only for a glob or a completion

    from tabsim.base.choices import RNGS
    from tabsim.config.models import CHOICES, SECTION_MODELS, registered

    if field == "preset":
        return tuple(sorted(PRESETS))
    section, _, name = field.partition(".")
    if section == "algo" and name in CHOICES:
        return registered(name)
    if field == "train.rng":
        return RNGS
    model = SECTION_MODELS.get(section) if section else None
    info = model.model_fields.get(name) if model is not None else None
    if info is not None and typing.get_origin(info.annotation) is typing.Literal:
        return tuple(typing.get_args(info.annotation))
    return None


def _glob(spec: str, name: str, pattern: str, option: str) -> list:
    """``glob(PATTERN)`` over the names a choice field takes (Hydra's glob: ``*``, ``?``, ``[...]``)."""
    import fnmatch  # lazy: only for a glob

    allowed = choices_of(name)
    if allowed is None:
        usage(f"{option} {spec!r}: glob() chooses among names, and {name} is not a field of named choices "
              "(e.g. preset, algo.estimator, algo.surrogate); list its levels, or use range(start, stop[, step])")
    pattern = pattern.strip().strip("'\"")
    levels = [a for a in allowed if isinstance(a, str) and fnmatch.fnmatchcase(a, pattern)]
    if not levels:
        usage(f"{option} {spec!r}: glob({pattern}) matches none of {name}'s names: {', '.join(map(str, allowed))}")
    return levels


def _items(spec: str, name: str, text: str, option: str):
    """The level texts of ``text`` (comma-separated, none empty), or the levels of a range() or glob()."""
    text = text.strip()
    m = RANGE.fullmatch(text)
    if m:
        return None, _range(spec, name, m.group(1), option)
    m = GLOB.fullmatch(text)
    if m:
        return None, _glob(spec, name, m.group(1), option)
    items = [x.strip() for x in text.split(",")]
    if any(not x for x in items):
        usage(f"{option} {spec!r}: an empty level in {name}'s levels (two commas, or a trailing comma)")
    return items, None


def parse_levels(spec: str, option: str = "--vary"):
    """``FIELD=v1,v2,...`` (or ``FIELD=range(start,stop[,step])``) -> ``(FIELD, [v1, v2, ...])``: plain finite
    numbers, none empty."""
    name, _, levels = spec.partition("=")
    name = name.strip()
    if not name or not levels.strip():
        usage(f"{option} {spec!r}: expected FIELD=v1,v2,... (e.g. {option} lr=0.05,0.1)")
    items, expanded = _items(spec, name, levels, option)
    if expanded is not None:
        if not all(isinstance(v, (int, float)) for v in expanded):
            usage(f"{option} {spec!r}: {name} is a numeric field; glob() chooses among names")
        return name, [float(v) for v in expanded]
    out = []
    for x in items:
        v = _plain_number(x)
        if v is None:
            try:
                v = float(x)
            except ValueError:
                usage(f"{option} {spec!r}: {name}'s level {x!r} is not a plain number (ASCII digits, an optional "
                      "point and exponent, e.g. 0.05 or 5e-2)")
            if not math.isfinite(v):
                usage(f"{option} {spec!r}: {name}'s level {x!r} is not a finite number")
            usage(f"{option} {spec!r}: {name}'s level {x!r} is not a plain number (ASCII digits, an optional point and "
                  "exponent, e.g. 0.05 or 5e-2; no underscores or other digits)")
        if not math.isfinite(v):
            usage(f"{option} {spec!r}: {name}'s level {x!r} is not a finite number")
        out.append(v)
    return name, out


def parse_static_levels(spec: str, name: str, option: str = "--vary") -> list:
    """The levels of a static field's ``--vary``: names, integers, numbers or true/false, none empty; or a
    range() of numbers, or a glob() of the field's names."""
    items, expanded = _items(spec, name, spec.partition("=")[2], option)
    if expanded is not None:
        return expanded
    out = []
    for x in items:
        v = parse_value(x)
        if v is None or isinstance(v, list):
            usage(f"{option} {spec!r}: {name}'s level {x.strip()!r} is not a name, a number or true/false")
        out.append(v)
    return out


def unknown_field(option: str, name: str) -> None:
    """Refuse a field that is no config field: its closest name suggested, and what may be varied."""
    from tabsim.base.registry import suggest
    from tabsim.config.models import field_names

    where = f"{option} {name}".strip()
    usage(f"{where}: unknown field{suggest(name, field_names())}; give a numeric field (lr, algo.lr, "
          "prior_strength, ...) or a static one (task.n_prompts, algo.estimator, preset, ...); "
          "`tabsim config show` lists every field")


def parse_vary(specs, option: str = "--vary") -> dict:
    """Every ``--vary`` into ``{field: levels}``; a field given twice is refused. A numeric field may be named
    bare or dotted (``lr``, ``algo.lr``); a static field (``task.n_prompts``, ``algo.estimator``, ``preset``)
    takes names as well as numbers: its levels run as groups of one compiled program each
    (:mod:`tabsim.runtime.groups`). Levels are ``v1,v2,...``, ``range(start,stop[,step])`` or, for a field of
    named choices, ``glob(PATTERN)``. An unknown field is refused as unknown, the closest name suggested."""
    # lazy: `tabsim run --help` loads no config schema (pydantic)
    from tabsim.config.models import traced_name
    from tabsim.runtime.grouping import NOT_SWEPT, static_name

    sweep: dict = {}
    for spec in specs:
        name = spec.partition("=")[0].strip()
        if not name or "=" not in spec:
            usage(f"{option} {spec!r}: expected FIELD=v1,v2,... (e.g. {option} lr=0.05,0.1)")
        traced = traced_name(name)
        static = static_name(name) if traced is None else None
        if traced is None and static is None:
            unknown_field(option, name)
        if static in NOT_SWEPT:
            usage(f"{option} {name}: {static} is not a field a sweep varies: {NOT_SWEPT[static]}")
        if static is not None:
            name, levels = static, parse_static_levels(spec, static, option)
        else:
            levels = parse_levels(spec, option)[1]
            name = traced
        if name in sweep:
            usage(f"{option} {name}: given twice; list every level of {name} in one {option} "
                  f"(e.g. {option} {name}={','.join(str(v) for v in sweep[name] + levels)})")
        sweep[name] = levels
    return sweep


def parse_arms(spec: str) -> list[str]:
    """``--arms a,b,c`` -> ``[a, b, c]``: none empty (as ``--vary`` refuses an empty level)."""
    # lazy: `tabsim sweep --help` loads no config schema
    from tabsim.base.choices import ARMS

    names = [a.strip() for a in spec.split(",")]
    if not spec.strip():
        usage(f"--arms '': no arms; give comma-separated arms from: {', '.join(ARMS)}")
    if any(not a for a in names):
        usage(f"--arms {spec!r}: an empty arm name (two commas, or a trailing comma); give comma-separated arms "
              f"from: {', '.join(ARMS)}")
    return names


def complete_preset(ctx, param, incomplete: str) -> list[str]:
    """The presets whose names start with what was typed (shell completion of ``--preset``)."""
    return [name for name in sorted(PRESETS) if name.startswith(incomplete)]


def complete_field(ctx, param, incomplete: str) -> list:
    """Field names starting with what was typed, each with ``=`` (shell completion of ``--vary``, ``--set`` and
    the ``KEY=VALUE`` arguments); after ``=``, the field's names (``preset=``, ``algo.estimator=``)."""
    from click.shell_completion import CompletionItem  # lazy: only when completing

    from tabsim.config.models import field_names

    key, eq, value = incomplete.partition("=")
    if eq:
        names = choices_of(key) or ()
        return [CompletionItem(f"{key}={n}") for n in names if isinstance(n, str) and n.startswith(value)]
    names = [n for n in field_names() if n.startswith(incomplete)]
    if param.name == "sets":
        names = [n for n in names if "." in n or n == "preset"]
    return [CompletionItem(f"{n}=", type="plain") for n in names]


complete_override = complete_field


def check_preset(preset: str | None) -> None:
    """``--preset`` names a preset (``--preset ''`` was read as no preset, and ran ``paper``)."""
    if preset is not None and preset not in PRESETS:
        # lazy: difflib only for the message
        import difflib

        near = difflib.get_close_matches(preset, list(PRESETS), n=1)
        hint = f" (did you mean `{near[0]}`?)" if near else ""
        usage(f"--preset {preset!r}: unknown preset{hint}; allowed: {', '.join(sorted(PRESETS))}")


# -- --set KEY=VALUE -----------------------------------------------------------------------------------
def parse_value(text: str, *, item: bool = False):
    """A ``--set`` value: an integer, a plain number, ``true``/``false``, ``null``, a ``[a, b]`` list, a
    quoted string, or else the text itself (a name such as ``dr_grpo``).

    In a list (``item``), ``true``, ``false`` and ``null`` are names: every list field holds names or numbers
    (``arms.arms=[frozen,true]`` is the TRUE arm, not a boolean)."""
    s = text.strip()
    if INTEGER.fullmatch(s):
        return int(s)
    if NUMBER.fullmatch(s):
        return float(s)
    if s in ("true", "false") and not item:
        return s == "true"
    if s in ("null", "none", "None") and not item:
        return None
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "\"'":
        return s[1:-1]
    if s.startswith("[") and s.endswith("]") and not item:
        inner = s[1:-1].strip()
        return [parse_value(x, item=True) for x in inner.split(",")] if inner else []
    return s


def _allowed_keys() -> dict[str, list[str]]:
    # lazy: `tabsim run --help` loads no config schema (pydantic)
    from tabsim.config import SWEEPABLE, AlgoConfig, ArmsConfig, TaskConfig, TrainConfig

    models = {"task": TaskConfig, "arms": ArmsConfig, "algo": AlgoConfig, "train": TrainConfig}
    keys = {sec: list(m.model_fields) for sec, m in models.items()}
    keys["sweep"] = sorted(SWEEPABLE)
    return keys


def _static_sweep(name: str) -> bool:
    # lazy: `tabsim run --help` loads no config schema (pydantic)
    from tabsim.runtime.grouping import static_name

    return static_name(name) is not None


def parse_set(specs) -> dict:
    """Every ``--set KEY=VALUE`` (``algo.lr=0.1``, ``train.steps=100``, ``preset=dapo``,
    ``task.tree.depth=3``, ``sweep.lr=[0.1,0.2]``) into a nested mapping; unknown keys are refused with
    the allowed ones named."""
    # lazy: the names come with the config's (kept out of `tabsim run --help`)
    from tabsim.base.choices import TREE_FIELDS

    allowed = _allowed_keys()
    out: dict = {}
    seen: set = set()
    for spec in specs:
        key, eq, raw = spec.partition("=")
        key = key.strip()
        if not eq or not key:
            usage(f"--set {spec!r}: expected KEY=VALUE with a dotted KEY, e.g. --set algo.lr=0.1")
        parts = key.split(".")
        if key == "preset" or (parts[0] == "sweep" and len(parts) > 1 and _static_sweep(".".join(parts[1:]))):
            parts = parts[:1] + [".".join(parts[1:])] if parts[0] == "sweep" else parts
        elif parts[0] not in allowed:
            usage(f"--set {key}: unknown section {parts[0]!r}; KEY is preset or SECTION.FIELD with SECTION one of: "
                  f"{', '.join((*SECTIONS, 'sweep'))} (e.g. --set algo.lr=0.1)")
        elif len(parts) == 1:
            usage(f"--set {key}: name a field of the section, e.g. --set {key}.{allowed[parts[0]][0]}=VALUE; "
                  f"{parts[0]} fields: {', '.join(allowed[parts[0]])}")
        elif parts[1] not in allowed[parts[0]]:
            # lazy: difflib only for the message
            import difflib

            near = difflib.get_close_matches(parts[1], allowed[parts[0]], n=1)
            hint = f" (did you mean `{parts[0]}.{near[0]}`?)" if near else ""
            usage(f"--set {key}: unknown key{hint}; allowed in {parts[0]}: {', '.join(allowed[parts[0]])}")
        elif len(parts) > 2 and (parts[:2] != ["task", "tree"] or len(parts) > 3 or parts[2] not in TREE_FIELDS):
            usage(f"--set {key}: {'.'.join(parts[:2])} has no field {'.'.join(parts[2:])!r}"
                  + (f"; task.tree fields: {', '.join(TREE_FIELDS)}" if parts[:2] == ["task", "tree"] else ""))
        if key in seen:
            usage(f"--set {key}: given twice; give each key once")
        if parts[0] != "sweep" and is_sweep(raw):
            usage(f"--set {spec}: --set takes one value; to sweep {key} over levels use --vary {spec} (or "
                  f"{spec} --multirun, or [a,b] for a list value)")
        seen.add(key)
        value = parse_value(raw)
        if parts[0] == "sweep" and not isinstance(value, list):
            value = [value]
        node = out
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return out


def set_option(applied: str, example: str = "--set algo.lr=0.1 --set train.steps=100"):
    """The ``--set KEY=VALUE`` option (parameter ``sets``; parse it with :func:`parse_set`); ``applied`` says
    where its values go, in the help."""
    return click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", shell_complete=complete_field,
                        help=f"Override one config value by its dotted key, e.g. {example} (repeatable; lists as "
                             f"[a,b]; {applied}).")


# -- one config from a file and the options -------------------------------------------------------------
def split_overrides(overrides, *, multirun: bool, command: str) -> tuple[list, list]:
    """Hydra-style ``KEY=VALUE`` arguments as ``(--set specs, --vary specs)``: one value sets the field, a
    comma list, ``range(...)`` or ``glob(...)`` sweeps it (``tabsim run`` asks for ``--multirun`` first, as
    Hydra does). A numeric field may be named bare (``lr=0.1`` sets ``algo.lr``)."""
    from tabsim.config import SWEEPABLE  # lazy: `tabsim run --help` loads no config schema

    sets, vary = [], []
    for text in overrides:
        key, eq, value = text.partition("=")
        key = key.strip()
        if not eq or not key:
            usage(f"{text!r}: expected KEY=VALUE (e.g. algo.lr=0.1; a comma list, range(start,stop[,step]) or "
                  "glob(PATTERN) sweeps the field, as --vary does)")
        if key.startswith(("+", "~")):
            usage(f"{text}: Hydra's +/~ prefixes add or delete keys of an open config; tabsim's config has a fixed "
                  f"set of fields: write {key.lstrip('+~')}=VALUE")
        if is_sweep(value):
            if not multirun:
                usage(f"{text}: a sweep of {key}; add --multirun (-m) to run one condition per level (or give it "
                      f"as --vary {text}, or use tabsim sweep)")
            vary.append(f"{key}={value}")
        else:
            if key in SWEEPABLE:
                key = ".".join(SWEEPABLE[key])
            elif "." not in key and key not in ("preset", "sweep"):
                unknown_field("", key)
            sets.append(f"{key}={value}")
    return sets, vary


def is_sweep(value: str) -> bool:
    """Whether an override's value is a sweep: a comma list outside brackets and quotes, a range() or a glob()."""
    v = value.strip()
    if RANGE.fullmatch(v) or GLOB.fullmatch(v):
        return True
    return "," in v and not (v.startswith("[") and v.endswith("]")) and not (
        len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'")


def study_options(fn):
    """Add ``--preset``, ``--vary``, ``--arms``, ``--set``, ``--multirun`` and the ``KEY=VALUE`` arguments
    (shared by ``run`` and ``sweep``)."""
    fn = click.option("--multirun", "-m", "multirun", is_flag=True,
                      help="Let KEY=VALUE arguments sweep: a comma list (lr=0.05,0.1), range(start,stop[,step]) "
                           "or glob(PATTERN) over a field's names (algo.estimator='glob(*grpo*)'), as Hydra's "
                           "--multirun; tabsim sweep implies it.")(fn)
    fn = set_option("applied after the file, before --seeds/--steps/--vary/--arms")(fn)
    fn = click.option("--arms", default=None, help="Comma-separated arms (default: the file's, else the preset's).")(fn)
    fn = click.option("--vary", multiple=True, metavar="FIELD=v1,v2,...", shell_complete=complete_field,
                      help="A field and its levels; repeat for a full factorial (replaces the file's sweep). A "
                           "numeric field varies within one compiled program; a static field (task.n_prompts, "
                           "algo.estimator, preset, ...) runs one group per level, with the same seeds.")(fn)
    fn = click.argument("overrides", nargs=-1, metavar="[KEY=VALUE]...", shell_complete=complete_override)(fn)
    fn = click.option("--preset", default=None, shell_complete=complete_preset,
                      help="Preset to start from, one of: " + ", ".join(sorted(PRESETS))
                           + " (default: the config file's).")(fn)
    return fn


def build_config(data: dict, *, preset=None, vary=(), arms=None, sets=(), seeds=None, steps=None,
                 default_preset: str | None = None, default_sweep: dict | None = None, overrides=(),
                 multirun: bool = False, command: str = "tabsim run"):
    """The validated config of ``data`` (a file's mapping) with the command-line options on top.

    Order: preset < file < ``--set`` < ``--preset``, ``--seeds``, ``--steps``, ``--vary``, ``--arms``.
    A sweep that varies static fields gives a :class:`tabsim.runtime.groups.Plan` (its groups' configs)
    instead of a config. Raises :class:`tabsim.config.ConfigError` for a bad value; a malformed option is a
    usage error.
    """
    # lazy: `tabsim run --help` loads no config schema (and validation no JAX: the engine loads after it)
    from tabsim.config import deep_merge, resolve
    from tabsim.config.validate import canonical_sweep
    from tabsim.runtime.grouping import plan

    check_preset(preset)
    more_sets, more_vary = split_overrides(overrides, multirun=multirun, command=command)
    sets, vary = (*sets, *more_sets), (*vary, *more_vary)
    over: dict = parse_set(sets)
    if preset is not None:
        over["preset"] = preset
    elif "preset" not in data and "preset" not in over and default_preset is not None:
        over["preset"] = default_preset
    train = {k: v for k, v in (("seeds", seeds), ("steps", steps)) if v is not None}
    if train:
        over["train"] = {**over.get("train", {}), **train}
    if vary:
        over["sweep"] = parse_vary(vary)
    elif default_sweep is not None and not data.get("sweep") and "sweep" not in over:
        over["sweep"] = dict(default_sweep)
    if arms is not None:
        over["arms"] = {**over.get("arms", {}), "arms": parse_arms(arms)}
    if "sweep" in over and "sweep" in data:  # the command line's sweep replaces the file's (not merged)
        data = {k: v for k, v in data.items() if k != "sweep"}
    # the factors in the order config.json writes them (by name), so a rerun of it has the same rows and columns
    data = dict(data)
    for where in (data, over):
        if isinstance(where.get("sweep"), dict):
            where["sweep"] = dict(sorted(canonical_sweep(where["sweep"]).items()))
    grouped = plan(deep_merge(data, {}), **over)  # a sweep of static fields: groups of one program each
    cfg = grouped if grouped is not None else resolve(deep_merge(data, {}), **over)
    every = _default_eval_every(cfg, data, over)
    if every is None:
        return cfg
    over["train"] = {**over.get("train", {}), "eval_every": every}
    grouped = plan(deep_merge(data, {}), **over)
    return grouped if grouped is not None else resolve(deep_merge(data, {}), **over)


def _default_eval_every(cfg, data: dict, over: dict) -> int | None:
    """The ``train.eval_every`` a run's curves get when neither the file nor the options set it: 20 to 50
    intervals (:func:`tabsim.config.models.default_eval_every`); None when it is set, or when the groups of a
    sweep over train.steps run different steps."""
    from tabsim.config.models import default_eval_every  # lazy: pydantic

    given = [(d.get("train") or {}) for d in (data, over) if isinstance(d.get("train"), dict)]
    if any("eval_every" in t for t in given):
        return None
    configs = [g.config for g in cfg.groups] if hasattr(cfg, "groups") else [cfg]
    if any(c.train.eval_every is not None for c in configs):  # set by the preset
        return None
    steps = {c.train.steps for c in configs}
    return default_eval_every(steps.pop()) if len(steps) == 1 else None


# -- an estimate before a long run ---------------------------------------------------------------------
# Work units (tabsim.runtime.planning.step_units) per second and core: the paper preset ran 7e7 on one
# core of a 2-core x86-64 CPU; a training run also costs a fixed amount (its task draw, evaluations and
# share of the frame), about RUN_UNITS.
UNITS_PER_CORE_SECOND = 7e7
RUN_UNITS = 20_000
ESTIMATE_ABOVE = 20.0  # seconds: a shorter run says nothing under -q
# Seconds of CPU XLA takes to compile one training program of each kind (the paper preset's sizes, one core
# of a 2-core x86-64 CPU, no compilation cache: 1.9-2.4 s for a bandit, 5.4 s for a tree, 3.2 s for the
# expected flow); every static group of a sweep is one such program, compiled before its chunks run.
COMPILE_SECONDS = {"bandit": 2.0, "tree": 5.0, "expected": 3.0}


def compile_estimate(cfg) -> tuple[float, int]:
    """``(seconds, programs)``: the compiled programs ``cfg`` runs (one per static group) and the seconds
    XLA takes to compile them on this machine, roughly (:data:`COMPILE_SECONDS`). A program compiled before
    into the compilation cache costs less; the estimate does not know which were."""
    configs = [g.config for g in cfg.groups] if hasattr(cfg, "groups") else [cfg]
    kinds = ["expected" if c.train.dynamics == "expected" else "tree" if c.task.env == "tree" else "bandit"
             for c in configs]
    return sum(COMPILE_SECONDS[k] for k in kinds), len(kinds)


def estimate_seconds(cfg) -> float:
    """Seconds of training ``cfg`` takes on this machine's cores, roughly (compilation apart:
    :func:`compile_estimate`)."""
    # lazy: the planner loads the config schema
    from tabsim.base.host import cpu_count
    from tabsim.runtime.planning import step_units

    if hasattr(cfg, "groups"):  # a sweep of static fields: its groups one after another
        return sum(estimate_seconds(g.config) for g in cfg.groups)
    n_cond = len(cfg.grid())
    seeds = 1 if cfg.train.dynamics == "expected" else cfg.train.seeds
    step, point = step_units(cfg, n_cond, seeds)
    every = cfg.train.eval_every or cfg.train.steps
    total = cfg.train.steps * step + (cfg.train.steps // every + 1) * point
    runs = n_cond * seeds * len(cfg.arms.arms)
    return (total + runs * RUN_UNITS) / (UNITS_PER_CORE_SECOND * cpu_count())


def announce_estimate(cfg, command: str, quiet: bool) -> float:
    """Print, on stderr, what a run will take when it is long (always) or when not ``quiet``; returns the
    estimate in seconds."""
    # lazy: the planner loads the config schema
    from tabsim.base.host import cpu_count
    from tabsim.files.defaults import compilation_cache
    from tabsim.runtime.planning import describe_seconds

    training = estimate_seconds(cfg)
    compiling, programs = compile_estimate(cfg)
    seconds = training + compiling
    if quiet and seconds < ESTIMATE_ABOVE:
        return seconds
    n_cond = cfg.n_conditions if hasattr(cfg, "groups") else len(cfg.grid())
    groups = f" in {len(cfg.groups)} groups" if hasattr(cfg, "groups") else ""
    cfg = cfg.groups[0].config if hasattr(cfg, "groups") else cfg
    seeds = "the expected flow" if cfg.train.dynamics == "expected" else f"{cfg.train.seeds} seeds"
    runs = n_cond * (1 if cfg.train.dynamics == "expected" else cfg.train.seeds) * len(cfg.arms.arms)
    cached = " (less for programs already in the compilation cache)" if compilation_cache() is not None else ""
    click.echo(f"{command}: {n_cond} condition(s){groups} x {seeds} x {len(cfg.arms.arms)} arm(s) = {runs} training runs "
               f"of {cfg.train.steps} steps; {describe_seconds(seconds)} on {cpu_count()} core(s), including "
               f"{describe_seconds(compiling)} of compilation for {programs} program{'s' * (programs != 1)}{cached} "
               f"and {describe_seconds(training)} of training (an estimate)", err=True)
    return seconds
