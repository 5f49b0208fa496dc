"""What ``tabsim run`` and ``tabsim sweep`` share: ``--preset``, ``--vary``, ``--arms`` and ``--set``, how
they build one validated config from a file and the options, and the estimate of a long run.

Malformed option values are usage errors (exit 2, like an unknown option); a config value out of range
is a config error (exit 1) naming the field. Nothing heavy at import (``tabsim run --help``).
"""
from __future__ import annotations

import click

from tabsim.cli.completion import complete_field
from tabsim.cli.options import compile_cache_folder
from tabsim.cli.levels import is_sweep, parse_value, parse_vary, unknown_field, usage  # noqa: F401 (usage: for the other commands)
from tabsim.config.presets import PRESETS

SECTIONS = ("task", "arms", "algo", "train")

DEFAULT_SWEEP = {"prior_strength": [0.2, 0.35, 0.5, 0.65, 0.8]}


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
def _allowed_keys() -> dict[str, list[str]]:
    # lazy: `tabsim run --help` loads no config schema (pydantic)
    from tabsim.config import SWEEPABLE, AlgoConfig, ArmsConfig, TaskConfig, TrainConfig

    models = {"task": TaskConfig, "arms": ArmsConfig, "algo": AlgoConfig, "train": TrainConfig}
    keys = {sec: list(m.model_fields) for sec, m in models.items()}
    keys["sweep"] = sorted(SWEEPABLE)
    return keys


def _static_sweep(name: str) -> bool:
    # lazy: `tabsim run --help` loads no config schema (pydantic)
    from tabsim.runtime.sweeps import static_name

    return static_name(name) is not None


def parse_set(specs) -> dict:
    """Every ``--set KEY=VALUE`` (``algo.lr=0.1``, ``train.steps=100``, ``preset=dapo``,
    ``task.tree.depth=3``, ``sweep.lr=[0.1,0.2]``) into a nested mapping; unknown keys are refused with
    the allowed ones named."""
    # lazy: the names come with the config's (kept out of `tabsim run --help`)
    from tabsim.base.choices import TREE_FIELDS
    from tabsim.config.models import traced_name

    allowed = _allowed_keys()
    out: dict = {}
    seen: set = set()
    for spec in specs:
        key, eq, raw = spec.partition("=")
        key = key.strip()
        if not eq or not key:
            usage(f"--set {spec!r}: expected KEY=VALUE with a dotted KEY, e.g. --set algo.lr=0.1")
        parts = key.split(".")
        if parts[0] == "sweep" and len(parts) > 2 and traced_name(".".join(parts[1:])):  # sweep.algo.lr: lr
            parts = ["sweep", traced_name(".".join(parts[1:]))]
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
                      help="A field (bare or dotted: lr, algo.lr) and its levels: v1,v2,..., range(start,stop[,step]) "
                           "or glob(PATTERN) over a field's names; repeat for a full factorial (replaces the file's "
                           "sweep). A numeric field varies within one compiled program; a static field "
                           "(task.n_prompts, algo.estimator, preset, ...) runs one group per level, with the same "
                           "seeds.")(fn)
    fn = click.argument("overrides", nargs=-1, metavar="[KEY=VALUE]...", shell_complete=complete_field)(fn)
    fn = click.option("--preset", default=None, shell_complete=complete_preset,
                      help="Preset to start from, one of: " + ", ".join(sorted(PRESETS))
                           + " (default: the config file's).")(fn)
    return fn


def build_config(data: dict, *, preset=None, vary=(), arms=None, sets=(), seeds=None, steps=None,
                 default_preset: str | None = None, default_sweep: dict | None = None, overrides=(),
                 multirun: bool = False, command: str = "tabsim run"):
    """The validated config of ``data`` (a file's mapping) with the command-line options on top.

    Order: preset < file < ``--set`` < ``--preset``, ``--seeds``, ``--steps``, ``--vary``, ``--arms``.
    A sweep that varies static fields gives a :class:`tabsim.runtime.sweeps.Sweep` (its groups' configs)
    instead of a config. Raises :class:`tabsim.config.ConfigError` for a bad value; a malformed option is a
    usage error.
    """
    # lazy: `tabsim run --help` loads no config schema (and validation no JAX: the engine loads after it)
    from tabsim.config import deep_merge, resolve
    from tabsim.config.validate import canonical_sweep
    from tabsim.runtime.sweeps import split

    check_preset(preset)
    more_sets, more_vary = split_overrides(overrides, multirun=multirun, command=command)
    sets = (*sets, *more_sets)
    over: dict = parse_set(sets)
    if preset is not None:
        over["preset"] = preset
    elif "preset" not in data and "preset" not in over and default_preset is not None:
        over["preset"] = default_preset
    train = {k: v for k, v in (("seeds", seeds), ("steps", steps)) if v is not None}
    if train:
        over["train"] = {**over.get("train", {}), **train}
    if vary or more_vary:
        over["sweep"] = parse_vary(vary)
        for name, levels in parse_vary(more_vary, option="").items():  # KEY=VALUE arguments: named as typed
            if name in over["sweep"]:
                usage(f"{name}: swept twice (by --vary and by {name}=...); give its levels once")
            over["sweep"][name] = levels
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
    grouped = split(deep_merge(data, {}), **over)  # a sweep of static fields: groups of one program each
    cfg = grouped if grouped is not None else resolve(deep_merge(data, {}), **over)
    every = _default_eval_every(cfg, data, over)
    if every is None:
        return cfg
    over["train"] = {**over.get("train", {}), "eval_every": every}
    grouped = split(deep_merge(data, {}), **over)
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
    cached = " (less for programs already in the compilation cache)" if compile_cache_folder() is not None else ""
    click.echo(f"{command}: {n_cond} condition(s){groups} x {seeds} x {len(cfg.arms.arms)} arm(s) = {runs} training runs "
               f"of {cfg.train.steps} steps; {describe_seconds(seconds)} on {cpu_count()} core(s), including "
               f"{describe_seconds(compiling)} of compilation for {programs} program{'s' * (programs != 1)}{cached} "
               f"and {describe_seconds(training)} of training (an estimate)", err=True)
    return seconds
