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


def parse_levels(spec: str):
    """``FIELD=v1,v2,...`` -> ``(FIELD, [v1, v2, ...])``: plain finite numbers, none empty."""
    name, _, levels = spec.partition("=")
    name = name.strip()
    if not name or not levels.strip():
        usage(f"--vary {spec!r}: expected FIELD=v1,v2,... (e.g. --vary lr=0.05,0.1)")
    out = []
    for x in levels.split(","):
        x = x.strip()
        if not x:
            usage(f"--vary {spec!r}: an empty level in {name}'s levels (two commas, or a trailing comma)")
        v = _plain_number(x)
        if v is None:
            try:
                v = float(x)
            except ValueError:
                usage(f"--vary {spec!r}: {name}'s level {x!r} is not a plain number (ASCII digits, an optional "
                      "point and exponent, e.g. 0.05 or 5e-2)")
            if not math.isfinite(v):
                usage(f"--vary {spec!r}: {name}'s level {x!r} is not a finite number")
            usage(f"--vary {spec!r}: {name}'s level {x!r} is not a plain number (ASCII digits, an optional point and "
                  "exponent, e.g. 0.05 or 5e-2; no underscores or other digits)")
        if not math.isfinite(v):
            usage(f"--vary {spec!r}: {name}'s level {x!r} is not a finite number")
        out.append(v)
    return name, out


def parse_static_levels(spec: str, name: str) -> list:
    """The levels of a static field's ``--vary``: names, integers, numbers or true/false, none empty."""
    out = []
    for x in spec.partition("=")[2].split(","):
        if not x.strip():
            usage(f"--vary {spec!r}: an empty level in {name}'s levels (two commas, or a trailing comma)")
        v = parse_value(x)
        if v is None or isinstance(v, list):
            usage(f"--vary {spec!r}: {name}'s level {x.strip()!r} is not a name, a number or true/false")
        out.append(v)
    return out


def parse_vary(specs) -> dict:
    """Every ``--vary`` into ``{field: levels}``; a field given twice is refused. A static field
    (``task.n_prompts``, ``algo.estimator``, ``preset``) takes names as well as numbers: its levels run as
    groups of one compiled program each (:mod:`tabsim.runtime.groups`)."""
    # lazy: `tabsim run --help` loads no config schema (pydantic)
    from tabsim.config import SWEEPABLE
    from tabsim.runtime.grouping import NOT_SWEPT, static_name

    sweep: dict = {}
    for spec in specs:
        name = spec.partition("=")[0].strip()
        static = static_name(name) if name and name not in SWEEPABLE else None
        if static in NOT_SWEPT:
            usage(f"--vary {name}: {static} is not a field a sweep varies: {NOT_SWEPT[static]}")
        if static is not None and spec.partition("=")[2].strip():
            name, levels = static, parse_static_levels(spec, static)
        else:
            name, levels = parse_levels(spec)
        if name in sweep:
            usage(f"--vary {name}: given twice; list every level of {name} in one --vary "
                  f"(e.g. --vary {name}={','.join(str(v) for v in sweep[name] + levels)})")
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
    return click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                        help=f"Override one config value by its dotted key, e.g. {example} (repeatable; lists as "
                             f"[a,b]; {applied}).")


# -- one config from a file and the options -------------------------------------------------------------
def study_options(fn):
    """Add ``--preset``, ``--vary``, ``--arms`` and ``--set`` (shared by ``run`` and ``sweep``)."""
    fn = set_option("applied after the file, before --seeds/--steps/--vary/--arms")(fn)
    fn = click.option("--arms", default=None, help="Comma-separated arms (default: the file's, else the preset's).")(fn)
    fn = click.option("--vary", multiple=True, metavar="FIELD=v1,v2,...",
                      help="A field and its levels; repeat for a full factorial (replaces the file's sweep). A "
                           "numeric field varies within one compiled program; a static field (task.n_prompts, "
                           "algo.estimator, preset, ...) runs one group per level, with the same seeds.")(fn)
    fn = click.option("--preset", default=None, shell_complete=complete_preset,
                      help="Preset to start from, one of: " + ", ".join(sorted(PRESETS))
                           + " (default: the config file's).")(fn)
    return fn


def build_config(data: dict, *, preset=None, vary=(), arms=None, sets=(), seeds=None, steps=None,
                 default_preset: str | None = None, default_sweep: dict | None = None):
    """The validated config of ``data`` (a file's mapping) with the command-line options on top.

    Order: preset < file < ``--set`` < ``--preset``, ``--seeds``, ``--steps``, ``--vary``, ``--arms``.
    A sweep that varies static fields gives a :class:`tabsim.runtime.groups.Plan` (its groups' configs)
    instead of a config. Raises :class:`tabsim.config.ConfigError` for a bad value; a malformed option is a
    usage error.
    """
    # lazy: `tabsim run --help` loads no config schema (and validation no JAX: the engine loads after it)
    from tabsim.config import deep_merge, resolve
    from tabsim.runtime.grouping import plan

    check_preset(preset)
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
    grouped = plan(deep_merge(data, {}), **over)  # a sweep of static fields: groups of one program each
    return grouped if grouped is not None else resolve(deep_merge(data, {}), **over)


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
