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
# table per section (`[sweep.task]`); tabsim checks each level against its field when the file is read.
_LEVEL = {"type": ["number", "string", "boolean"]}
SWEEP = {"type": "object", "title": "Sweep",
         "description": "field (dotted for a static one, e.g. task.n_prompts) -> its levels; or a table per section",
         "additionalProperties": {"anyOf": [{"type": "array", "items": _LEVEL, "minItems": 1},
                                            {"type": "object", "additionalProperties": {
                                                "type": "array", "items": _LEVEL, "minItems": 1}}]}}


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
    schema["properties"]["sweep"] = SWEEP
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
