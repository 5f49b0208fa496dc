"""Config files: TOML, YAML or JSON read with a safe loader, then validated."""
from __future__ import annotations

from pathlib import Path

from tabsim.config.base import ConfigError
from tabsim.config.models import Config
from tabsim.config.validate import check_sections, resolve
from tabsim.files.safeload import LoadError, load_json, load_toml, load_yaml


CONFIG_MAX_BYTES = 1 << 20  # a config is a few hundred bytes
CONFIG_SUFFIXES = (".toml", ".yaml", ".yml", ".json")


def load_config(path: str | Path, **overrides) -> Config:
    """Read a TOML or YAML config file with a safe loader and validate it.

    Raises:
      ConfigError: the file cannot be read (see :mod:`tabsim.files.safeload` for the limits) or a value is
        bad; the message names the file and every bad field.
    """
    data = read_config_file(path)
    try:
        return resolve(data, **overrides)
    except ConfigError as err:
        raise ConfigError(str(err).replace("invalid config:", f"invalid config {path}:", 1)) from None


def read_config_file(path: str | Path) -> dict:
    """The mapping in a TOML, YAML or JSON config file, read with a safe loader (not yet validated).

    JSON is what a run writes as its ``config.json`` (the resolved config: rerunning it runs the same
    config, with the same digest). YAML is read with the YAML 1.2 core schema (only ``true``/``false`` are booleans; ``1e-3`` is a
    number). The file must be UTF-8, at most 1 MiB, nested at most 64 levels, and hold settings.
    """
    path = Path(path)
    if path.suffix not in CONFIG_SUFFIXES:
        if not path.exists():
            raise ConfigError(f"config file not found: {path}")
        raise ConfigError(f"{path}: unknown config format {path.suffix!r}; allowed: {', '.join(CONFIG_SUFFIXES)}")
    try:
        if path.suffix == ".toml":
            data = load_toml(path, max_bytes=CONFIG_MAX_BYTES, what="config file")
        elif path.suffix == ".json":  # a run's own config.json: the resolved config, rerun as it is
            data = load_json(path, max_bytes=CONFIG_MAX_BYTES, what="config file")
        else:
            data = load_yaml(path, schema="core", max_bytes=CONFIG_MAX_BYTES, what="config file")
    except LoadError as err:
        if "not found" in err.problem:
            raise ConfigError(f"config file not found: {path}") from None
        raise ConfigError(str(err).replace("malformed", "malformed config file:", 1)) from None
    if not isinstance(data, dict):
        hint = " (TOML written in a YAML file? name it .toml)" if isinstance(data, str) and " = " in data else ""
        raise ConfigError(f"{path}: the top level must be a table/mapping of sections, got "
                          f"{type(data).__name__}{hint}")
    if not data:  # `{}` (JSON): nothing to run but the defaults, as an empty TOML or YAML file
        raise ConfigError(f"{path}: the config is empty (no sections); give at least a preset or a section")
    check_sections(data, f"{path}: ", empty_tables=True)
    return data
