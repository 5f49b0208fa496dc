"""The levels of a sweep as typed on the command line: ``--vary FIELD=v1,v2,...``, Hydra's
``range(start,stop[,step])`` and ``glob(PATTERN)``, ``--set`` values, and the one-line usage errors for
them (an unknown field named as unknown, with the closest name). Nothing heavy at import."""
from __future__ import annotations

import math
import re

import click

from tabsim.cli.completion import choices_of

# A number as a person types it: ASCII digits, an optional point and exponent. float() also reads
# full-width and other Unicode digits ("０.3") and underscores ("0.0_5"), which no one means as a level.
NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
INTEGER = re.compile(r"[+-]?[0-9]+")


def usage(msg: str):
    """End the command with a usage error (exit status 2)."""
    raise click.UsageError(msg)


def _plain_number(text: str) -> float | None:
    return float(text) if NUMBER.fullmatch(text) else None


RANGE = re.compile(r"range\((.*)\)")
GLOB = re.compile(r"glob\((.*)\)")


def _where(option: str, spec: str) -> str:
    """How a message names what was typed: ``--vary 'lr=a'``, or ``'lr=a'`` for a KEY=VALUE argument."""
    return f"{option} {spec!r}".strip()


def _range(spec: str, name: str, args: str, option: str) -> list:
    """``range(start, stop[, step])`` (Hydra's sweep of a range: ``stop`` excluded, ``step`` 1 by default):
    integers when every argument is one, else numbers at exact decimal steps (``range(0.1,0.5,0.1)``)."""
    from decimal import Decimal, InvalidOperation  # lazy: only for a range

    parts = [a.strip() for a in args.split(",")]
    if not 2 <= len(parts) <= 3 or not all(NUMBER.fullmatch(a) for a in parts):
        usage(f"{_where(option, spec)}: {name}'s levels range({args}) is not range(start, stop[, step]) with plain "
              "numbers, e.g. range(1,5) or range(0.1,0.5,0.1)")
    ints = all(INTEGER.fullmatch(a) for a in parts)
    try:
        start, stop, step = (*map(Decimal, parts), Decimal(1))[:3]
    except InvalidOperation:  # pragma: no cover - NUMBER matched
        usage(f"{_where(option, spec)}: range({args}) is not range(start, stop[, step])")
    if step <= 0 or stop <= start:
        usage(f"{_where(option, spec)}: range({args}) holds no level (it needs start < stop and a step > 0; stop is "
              "excluded, as in Python's range)")
    count = math.ceil((stop - start) / step)
    if count > 10_000:
        usage(f"{_where(option, spec)}: range({args}) has {count} levels; at most 10000")
    return [int(start + i * step) if ints else float(start + i * step) for i in range(count)]


def _glob(spec: str, name: str, pattern: str, option: str) -> list:
    """``glob(PATTERN)`` over the names a choice field takes (Hydra's glob: ``*``, ``?``, ``[...]``)."""
    import fnmatch  # lazy: only for a glob

    allowed = choices_of(name)
    if allowed is None:
        usage(f"{_where(option, spec)}: glob() chooses among names, and {name} is not a field of named choices "
              "(e.g. preset, algo.estimator, algo.surrogate); list its levels, or use range(start, stop[, step])")
    pattern = pattern.strip().strip("'\"")
    levels = [a for a in allowed if isinstance(a, str) and fnmatch.fnmatchcase(a, pattern)]
    if not levels:
        usage(f"{_where(option, spec)}: glob({pattern}) matches none of {name}'s names: {', '.join(map(str, allowed))}")
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
        usage(f"{_where(option, spec)}: an empty level in {name}'s levels (two commas, or a trailing comma)")
    return items, None


def parse_levels(spec: str, option: str = "--vary"):
    """``FIELD=v1,v2,...`` (or ``FIELD=range(start,stop[,step])``) -> ``(FIELD, [v1, v2, ...])``: plain finite
    numbers, none empty."""
    name, _, levels = spec.partition("=")
    name = name.strip()
    if not name or not levels.strip():
        usage(f"{_where(option, spec)}: expected FIELD=v1,v2,... (e.g. {option} lr=0.05,0.1)")
    items, expanded = _items(spec, name, levels, option)
    if expanded is not None:
        if not all(isinstance(v, (int, float)) for v in expanded):
            usage(f"{_where(option, spec)}: {name} is a numeric field; glob() chooses among names")
        return name, [float(v) for v in expanded]
    out = []
    for x in items:
        v = _plain_number(x)
        if v is None:
            try:
                v = float(x)
            except ValueError:
                usage(f"{_where(option, spec)}: {name}'s level {x!r} is not a plain number (ASCII digits, an optional "
                      "point and exponent, e.g. 0.05 or 5e-2)")
            if not math.isfinite(v):
                usage(f"{_where(option, spec)}: {name}'s level {x!r} is not a finite number")
            usage(f"{_where(option, spec)}: {name}'s level {x!r} is not a plain number (ASCII digits, an optional point and "
                  "exponent, e.g. 0.05 or 5e-2; no underscores or other digits)")
        if not math.isfinite(v):
            usage(f"{_where(option, spec)}: {name}'s level {x!r} is not a finite number")
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
            usage(f"{_where(option, spec)}: {name}'s level {x.strip()!r} is not a name, a number or true/false")
        out.append(v)
    return out


def unknown_field(option: str, name: str) -> None:
    """Refuse a field that is no config field: its closest name suggested, and what may be varied."""
    # lazy: the config's models, only for the message
    from tabsim.base.registry import suggest
    from tabsim.config.models import field_names

    where = f"{option} {name}".strip()
    usage(f"{where}: unknown field{suggest(name, field_names())}; give a numeric field (lr, algo.lr, "
          "prior_strength, ...) or a static one (task.n_prompts, algo.estimator, preset, ...); "
          "`tabsim config show paper` lists every field")


def parse_vary(specs, option: str = "--vary") -> dict:
    """Every ``--vary`` into ``{field: levels}``; a field given twice is refused. A numeric field may be named
    bare or dotted (``lr``, ``algo.lr``); a static field (``task.n_prompts``, ``algo.estimator``, ``preset``)
    takes names as well as numbers: its levels run as groups of one compiled program each
    (:mod:`tabsim.runtime.sweeps`). Levels are ``v1,v2,...``, ``range(start,stop[,step])`` or, for a field of
    named choices, ``glob(PATTERN)``. An unknown field is refused as unknown, the closest name suggested."""
    # lazy: `tabsim run --help` loads no config schema (pydantic)
    from tabsim.config.models import traced_name
    from tabsim.runtime.sweeps import NOT_SWEPT, static_name

    sweep: dict = {}
    for spec in specs:
        name = spec.partition("=")[0].strip()
        if not name or "=" not in spec:
            usage(f"{_where(option, spec)}: expected FIELD=v1,v2,... (e.g. {option} lr=0.05,0.1)")
        traced = traced_name(name)
        static = static_name(name) if traced is None else None
        if traced is None and static is None:
            unknown_field(option, name)
        if static in NOT_SWEPT:
            usage(f"{option} {name}".strip() + f": {static} is not a field a sweep varies: {NOT_SWEPT[static]}")
        if static is not None:
            name, levels = static, parse_static_levels(spec, static, option)
        else:
            levels = parse_levels(spec, option)[1]
            name = traced
        if name in sweep:
            usage(f"{option} {name}".strip() + f": given twice; list every level of {name} once "
                  f"(e.g. {f'{option} ' if option else ''}{name}={','.join(str(v) for v in sweep[name] + levels)})")
        sweep[name] = levels
    return sweep


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


def is_sweep(value: str) -> bool:
    """Whether an override's value is a sweep: a comma list outside brackets and quotes, a range() or a glob()."""
    v = value.strip()
    if RANGE.fullmatch(v) or GLOB.fullmatch(v):
        return True
    return "," in v and not (v.startswith("[") and v.endswith("]")) and not (
        len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'")


