"""``tabsim config schema``: the JSON Schema of a config file, from the pydantic models, for editors."""
from __future__ import annotations

import json

import click

from tabsim.base import choices
from tabsim.cli.jsonout import json_option
from tabsim.config.presets import PRESETS

DIALECT = "https://json-schema.org/draft/2020-12/schema"
# The names a config chooses among (tabsim.base.choices), offered by the editor as completions
ENUMS = {("algo", "estimator"): choices.ESTIMATORS, ("algo", "ratio"): choices.RATIOS,
         ("algo", "surrogate"): choices.SURROGATES, ("algo", "aggregation"): choices.AGGREGATIONS,
         ("algo", "kl"): choices.KL_ESTIMATORS, ("algo", "kl_placement"): choices.KL_PLACEMENTS,
         ("algo", "optimizer"): choices.OPTIMIZERS, ("train", "rng"): choices.RNGS}
# A sweep's levels: numbers for numeric fields, names, whole numbers or true/false for static ones, and a
# table per section (`[sweep.task]`); each level is checked as a value of its field, and a name that is no
# field a sweep varies is refused (an editor marks `lrr` or a level "nope" of prior_strength).
_LEVEL = {"type": ["number", "string", "boolean"]}
_KEEP = ("type", "enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def _levels(item: dict) -> dict:
    return {"type": "array", "items": item, "minItems": 1, "uniqueItems": True}


def _level_of(prop: dict, traced: bool) -> dict | None:
    """The schema of one level of a field whose own schema is ``prop`` (None: the field cannot be swept)."""
    if "anyOf" in prop:  # number or null: a level is a number
        prop = next((p for p in prop["anyOf"] if p.get("type") in ("number", "integer")), {})
    kind = prop.get("type")
    if kind in ("array", "object", None):
        return None
    if traced and kind in ("boolean", "integer") and set(prop.get("enum", [0, 1])) <= {0, 1}:
        return {"enum": [0, 1]}  # the switches filter and std_ddof: levels 0 and 1
    return {k: v for k, v in prop.items() if k in _KEEP}


def sweep_schema(defs: dict, sections: dict) -> dict:
    """The ``sweep`` table: each field a sweep varies (numeric ones bare or dotted, static ones dotted,
    ``preset``, ``task.tree.*``) with its levels checked as values of the field, as a dotted name or in a
    table per section; nothing else."""
    # lazy: the config's models, as in config_schema (`tabsim config --help` loads none)
    from tabsim.base.choices import TREE_FIELDS
    from tabsim.config import SWEEPABLE
    from tabsim.runtime.sweeps import NOT_SWEPT

    flat: dict = {"preset": _levels({"enum": list(PRESETS)})}
    tables: dict = {}
    for section, ref in sections.items():
        table: dict = {}
        for field, prop in defs[ref]["properties"].items():
            traced = SWEEPABLE.get(field) == (section, field)
            item = _level_of(prop, traced)
            if item is None or f"{section}.{field}" in NOT_SWEPT:
                continue
            table[field] = _levels(item)
            flat[f"{section}.{field}"] = table[field]
            if traced:
                flat[field] = table[field]
        if section == "task":
            tree = {f: _levels(_LEVEL) for f in TREE_FIELDS}
            flat.update({f"task.tree.{f}": v for f, v in tree.items()})
            table["tree"] = {"type": "object", "properties": tree, "additionalProperties": False}
        tables[section] = {"type": "object", "properties": table, "additionalProperties": False}
    return {"type": "object", "title": "Sweep",
            "description": "field (a numeric one bare or dotted, e.g. lr or algo.lr; a static one dotted, e.g. "
                           "task.n_prompts) -> its levels; or a table per section",
            "properties": {**flat, **tables}, "additionalProperties": False}


def config_schema() -> dict:
    """The JSON Schema (2020-12) of a tabsim config file (TOML, YAML or JSON): pydantic's schema of
    :class:`tabsim.config.Config`, with the allowed names as enums and the sweep table's forms."""
    from tabsim.config import Config  # lazy: `tabsim config --help` loads no pydantic models

    schema = Config.model_json_schema()
    defs = schema["$defs"]
    for (section, field), names in ENUMS.items():
        ref = schema["properties"][section]["$ref"].rsplit("/", 1)[-1]
        defs[ref]["properties"][field]["enum"] = list(names)
    arms = defs[schema["properties"]["arms"]["$ref"].rsplit("/", 1)[-1]]["properties"]["arms"]
    arms["items"] = {"enum": list(choices.ARMS)}
    schema["properties"]["preset"] = {"anyOf": [{"enum": list(PRESETS)}, {"type": "null"}], "default": None,
                                      "title": "Preset", "description": "the preset the file starts from"}
    sections = {sec: schema["properties"][sec]["$ref"].rsplit("/", 1)[-1] for sec in ("task", "arms", "algo", "train")}
    schema["properties"]["sweep"] = sweep_schema(defs, sections)
    return {"$schema": DIALECT, **schema,
            "title": "tabsim config", "description": "A tabsim config file: tabsim run CONFIG"}


@click.command("schema")
@json_option
def schema_cmd(as_json: bool):
    """Print the JSON Schema of a config file (for editor completion and checks).

    The schema is JSON either way: indented by default, one line with --json.

    \b
    Example:
      tabsim config schema > tabsim.schema.json
    """
    click.echo(json.dumps(config_schema(), indent=None if as_json else 2))
