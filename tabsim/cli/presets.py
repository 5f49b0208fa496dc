"""``tabsim presets`` and ``tabsim config show NAME``: what the presets are, and a preset's resolved config."""
from __future__ import annotations

import json
from pathlib import Path

import click

from tabsim.cli.jsonout import emit, json_option
from tabsim.cli.schema import schema_cmd
from tabsim.cli.study import build_config, usage
from tabsim.config.models import AlgoConfig
from tabsim.config.presets import PRESETS


ALGO_KEYS = ("estimator", "ratio", "surrogate", "aggregation", "optimizer", "lr", "epochs", "filter")
SECTION_ORDER = ("task", "arms", "algo", "train")


def _value(v) -> str:
    return "[" + ", ".join(map(str, v)) + "]" if isinstance(v, list) else str(v)


def _summary(name: str) -> str:
    """What preset ``name`` sets, section by section: in ``algo`` the composition (estimator, ratio, surrogate,
    aggregation, optimizer, lr, epochs, filter) and every other named choice set away from its default (a tracker,
    a prompt skip, reward terms, ...; the numeric knobs are in ``tabsim config show NAME``); in ``task``, ``arms``
    and ``train`` every field it sets (a group stage, a refill, the group size, ...)."""
    preset, parts = PRESETS[name], []
    for section in SECTION_ORDER:
        body = preset.get(section) or {}
        if section == "algo":
            keys = [k for k in ALGO_KEYS if k in body] + [
                k for k, v in body.items() if k not in ALGO_KEYS and isinstance(v, (str, list))
                and k in AlgoConfig.model_fields and v != AlgoConfig.model_fields[k].default]
        else:
            keys = list(body)
        if keys:
            parts.append(f"{section}: " + ", ".join(f"{k} {_value(body[k])}" for k in keys))
    return "; ".join(parts)


@click.command("presets")
@json_option
def presets_cmd(as_json):
    """List the presets (named compositions a config or --preset starts from).

    \b
    Example:
      tabsim presets
      tabsim config show dapo
    """
    if as_json:
        emit({"command": "tabsim presets", "presets": {name: PRESETS[name] for name in PRESETS}})
        return
    width = max(map(len, PRESETS))
    for name in PRESETS:
        click.echo(f"{name:<{width}}  {_summary(name)}")
    click.echo("\nthe whole resolved config of one: tabsim config show NAME", err=True)


@click.group("config", context_settings={"help_option_names": ["-h", "--help"]})
def config_group():
    """Show configs: a preset's resolved config (every field, the defaults filled in), or the config's JSON Schema."""


config_group.add_command(schema_cmd)


@config_group.command("show")
@click.argument("name")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Override a value by its dotted key (as tabsim run --set), e.g. --set algo.lr=0.1.")
@click.option("--format", "fmt", type=click.Choice(["toml", "json"]), default="toml", show_default=True,
              help="toml: a file tabsim run reads; json: as a run's config.json.")
@json_option
def show_cmd(name, sets, fmt, as_json):
    """Print the resolved config of preset NAME (or of a config file NAME) with every field.

    The TOML output is a config file: `tabsim config show dapo > dapo.toml` then edit and
    `tabsim run dapo.toml`.

    \b
    Example:
      tabsim config show paper
      tabsim config show grpo --set train.steps=100 --format json
      tabsim config show paper --json
    """
    # lazy: `tabsim config --help` loads no JAX (the config schema loads the engine's registries)
    from tabsim.config import CONFIG_SUFFIXES, ConfigError, read_config_file

    try:
        if name in PRESETS:
            cfg = build_config({}, preset=name, sets=sets)
        elif Path(name).suffix in CONFIG_SUFFIXES and Path(name).exists():
            cfg = build_config(read_config_file(name), sets=sets)
        else:
            usage(f"NAME {name!r}: not a preset or a config file; presets: {', '.join(PRESETS)}")
    except ConfigError as err:
        raise click.ClickException(str(err)) from None
    data = cfg.model_dump(mode="json")
    if as_json:
        emit({"command": "tabsim config show", "name": name, "config": data})
        return
    if fmt == "json":
        click.echo(json.dumps(data, indent=2, sort_keys=True))
        return
    click.echo(to_toml(data))


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"no TOML form for {v!r}")


def to_toml(data: dict) -> str:
    """A resolved config as TOML (fields that are None, i.e. unset, become comments)."""
    lines = []
    if data.get("preset") is not None:
        lines.append(f"preset = {_toml_value(data['preset'])}")
    for section in ("task", "arms", "algo", "train", "sweep"):
        body = data.get(section) or {}
        if section == "sweep" and not body:
            continue
        lines.append(f"\n[{section}]")
        for k, v in body.items():
            if v is None:
                lines.append(f"# {k} = (unset)")
            elif isinstance(v, dict) and not v:
                continue  # an empty table (task.tree of a bandit) is the default
            else:
                lines.append(f"{k} = {_toml_value(v)}")
    return "\n".join(lines).lstrip("\n") + "\n"
