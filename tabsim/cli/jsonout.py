"""``--json``: one summary object on stdout, every line meant for a person on stderr.

A command given ``--json`` prints exactly one JSON object on stdout when it ends (``json.loads`` of the
whole of stdout works), so scripts need no parsing of tables; progress, notes and the human summary go
to stderr as usual. A refusal prints no object (the exit status and stderr say why).
"""
from __future__ import annotations

import json
import math

import click


def json_option(fn):
    """Add ``--json`` (parameter ``as_json``) to a command."""
    return click.option("--json", "as_json", is_flag=True,
                        help="Print one JSON summary object on stdout; human-readable lines go to stderr.")(fn)


def _plain(o):
    if isinstance(o, float) and not math.isfinite(o):
        return None  # JSON has no NaN or infinity
    if isinstance(o, dict):
        return {str(k): _plain(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_plain(v) for v in o]
    if hasattr(o, "item") and callable(o.item):  # NumPy scalars
        return _plain(o.item())
    if isinstance(o, (str, int, float, bool)) or o is None:
        return o
    return str(o)


def emit(obj: dict) -> None:
    """Print ``obj`` as one line of JSON on stdout (NaN and infinity as null, other objects as strings)."""
    click.echo(json.dumps(_plain(obj), sort_keys=True, allow_nan=False))


def say(message: str, as_json: bool) -> None:
    """A line for a person: on stdout normally, on stderr under ``--json`` (stdout holds only the object)."""
    click.echo(message, err=as_json)
