"""A config built from a mapping: merged over its preset, checked and validated (:func:`resolve`)."""
from __future__ import annotations

import copy
import sys
from typing import Any

from pydantic import ValidationError

from tabsim.config.base import ConfigError, suggest
from tabsim.config.models import SECTION_MODELS, SWEEPABLE, Config, traced_name
from tabsim.config.presets import PRESETS


def deep_merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict) and k != "sweep":
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


SECTIONS = ("task", "arms", "algo", "train", "sweep")


def check_sections(data: dict, where: str, *, empty_tables: bool = False) -> None:
    """A section left empty (YAML ``train:`` with nothing under it reads as null) is refused, not read as
    the defaults; with ``empty_tables`` (a file) so is an empty table (TOML ``[train]``, YAML ``train: {}``),
    but for ``sweep``, where ``{}`` means "no sweep" (it replaces a preset's)."""
    for k in SECTIONS:
        if k in data and data[k] is None:
            raise ConfigError(f"{where}{k}: the section is empty (nothing under {k}:); give its fields, indented "
                              f"under it, or remove the line")
        if empty_tables and k != "sweep" and data.get(k) == {}:
            raise ConfigError(f"{where}{k}: the section is empty (a [{k}] table, or {k}: {{}}, with no fields); "
                              f"give its fields, or remove it to keep the preset's")


def check_keys(x, where: str = "") -> None:
    """Every mapping key is a name (YAML turns ``true:``, ``~:`` or ``1:`` into other types)."""
    if isinstance(x, dict):
        for k, v in x.items():
            here = f"{where}.{k}" if where else str(k)
            if not isinstance(k, str):
                hint = " (YAML reads an unquoted true / false as a boolean: quote the key)" if isinstance(k, bool) else ""
                raise ConfigError(f"{here}: a key must be a name, got {k!r}{hint}")
            check_keys(v, here)
    elif isinstance(x, list):
        for i, v in enumerate(x):
            check_keys(v, f"{where}[{i}]")


def plain(x):
    """Python values for NumPy scalars and arrays, lists for tuples (the Python API may pass any)."""
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    np = sys.modules.get("numpy")  # a NumPy value comes only from a process that has loaded NumPy
    if np is not None and isinstance(x, (np.generic, np.ndarray)):
        return plain(x.tolist()) if isinstance(x, np.ndarray) else x.item()
    return x


def hint(loc: tuple, err: dict) -> str:
    """Extra words for an error: a suggestion for a misspelt key, the quoting of a YAML boolean."""
    got = err.get("input")
    if err["type"] == "extra_forbidden":
        model = Config if len(loc) == 1 else SECTION_MODELS.get(str(loc[0]))
        if model is not None:
            return suggest(loc[-1], model.model_fields)
    if err["type"] in ("int_type", "float_type") and isinstance(got, str):
        try:
            float(got)
        except ValueError:
            return ""
        return "; a string: write the number without quotes (YAML 1.1 files such as plans need 1.0e-2, not 1e-2)"
    if err["type"] == "string_type" and isinstance(got, bool):
        return (f"; YAML reads an unquoted {str(got).lower()} as a boolean: quote it "
                f"(\"{str(got).lower()}\")")
    return ""


def format_error(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "config"
        msg = e["msg"].removeprefix("Value error, ")
        if loc == "config" or msg.startswith((loc + ".", loc + ":", loc + " ")):
            lines.append(msg + hint(e["loc"], e))  # the message names the field itself
            continue
        got = e.get("input")
        quiet = isinstance(got, dict) or e["type"] == "extra_forbidden" or "got " in msg or repr(got) in msg
        shown = "" if quiet else f" (got {got!r})"
        if e["type"] == "extra_forbidden":
            msg = "unknown field"
        lines.append(f"{loc}: {msg}{shown}{hint(e['loc'], e)}")
    return "invalid config:\n  " + "\n  ".join(lines)


def sweep_level_problems(cfg: "Config") -> list[str]:
    """Every sweep level checked as a value of its field (0 / 1 for the switches ``filter`` and ``std_ddof``)."""
    problems = []
    for name, levels in cfg.sweep.items():
        section, field = SWEEPABLE[name]
        model = getattr(cfg, section)
        for i, level in enumerate(levels):
            value: Any = level
            if field in ("filter", "std_ddof"):
                if level not in (0.0, 1.0):
                    problems.append(f"sweep.{name}[{i}]: a switch; its levels are 0 and 1 (got {level!r})")
                    continue
                value = bool(level) if field == "filter" else int(level)
            try:
                model.__class__.model_validate({**model.model_dump(), field: value})
            except ValidationError as err:
                problems.append(f"sweep.{name}[{i}]: {err.errors()[0]['msg'].removeprefix('Value error, ')} "
                                f"(got {level!r})")
    return problems


def flat_sweep(sweep: dict, prefix: str = "") -> dict:
    """A sweep with a table per section (TOML ``[sweep.algo]``) as dotted names: ``{"algo.lr": [..]}``."""
    out: dict = {}
    for k, v in sweep.items():
        if isinstance(v, dict):
            out.update(flat_sweep(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def canonical_sweep(sweep: dict) -> dict:
    """``sweep`` with each numeric field under its bare name (``algo.lr`` -> ``lr``), in the given order;
    other names are kept (validation names them)."""
    out: dict = {}
    for name, levels in flat_sweep(sweep).items():
        canon = traced_name(name) or name
        if canon in out:
            raise ConfigError(f"sweep.{name}: {canon} is given twice (as {canon} and as {name}); list its levels once")
        out[canon] = levels
    return out


def resolve(data: dict | None = None, **overrides) -> Config:
    """Build a validated :class:`Config` from a mapping (and a preset it names).

    Values are taken as they are: a float where an integer is meant, a string where a number is meant
    or a number where a boolean is meant is refused, and every number must be finite and in range.

    Raises:
      ConfigError: naming every bad field, its value and the allowed range.
    """
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"config: expected a mapping of sections (task, arms, algo, train, sweep), "
                          f"got {type(data).__name__}")
    check_sections(data or {}, "")
    data = plain(deep_merge(dict(data or {}), overrides))
    check_keys(data)
    name = data.get("preset")
    if name is not None:
        if not isinstance(name, str) or name not in PRESETS:
            raise ConfigError(f"preset: unknown preset {name!r}{suggest(name, PRESETS)}; allowed: "
                              f"{', '.join(sorted(PRESETS))}")
        data = deep_merge(PRESETS[name], data)
    if not isinstance(data.get("sweep", {}), dict):
        raise ConfigError("sweep: must be a table of field = [levels]")
    if data.get("sweep"):
        data["sweep"] = canonical_sweep(data["sweep"])
    try:
        cfg = Config.model_validate(data)
    except ValidationError as err:
        raise ConfigError(format_error(err)) from None
    problems = sweep_level_problems(cfg)
    if problems:
        raise ConfigError("invalid config:\n  " + "\n  ".join(problems))
    return cfg
