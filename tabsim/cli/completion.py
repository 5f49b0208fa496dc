"""Shell completion of the values of options and arguments (click's ``shell_complete``): field names, the
names a choice field takes, and the factors of a run folder. Light at import: ``tabsim compare --help``
loads nothing more for it; the config's names load when a completion is asked for."""
from __future__ import annotations

import json
from pathlib import Path


def choices_of(field: str) -> tuple | None:
    """The names a static field chooses among (``preset``, ``algo.estimator``, ``arms.tie``, ...), or None."""
    # lazy: the config's models, only for a glob or a completion (tabsim compare --help stays light)
    import typing
    from tabsim.base.choices import RNGS
    from tabsim.config.models import CHOICES, SECTION_MODELS, registered
    from tabsim.config.presets import PRESETS

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


def complete_field(ctx, param, incomplete: str) -> list:
    """Field names starting with what was typed, each with ``=`` (``--vary``, ``--set`` and the ``KEY=VALUE``
    arguments); after ``=``, the names the field takes (``preset=``, ``algo.estimator=``)."""
    # lazy: the config's models, only when a completion is asked for
    from click.shell_completion import CompletionItem
    from tabsim.config.models import field_names

    key, eq, value = incomplete.partition("=")
    if eq:
        names = choices_of(key) or ()
        return [CompletionItem(f"{key}={n}") for n in names if isinstance(n, str) and n.startswith(value)]
    names = [n for n in field_names() if n.startswith(incomplete)]
    if param.name == "sets":
        names = [n for n in names if "." in n or n == "preset"]
    return [CompletionItem(f"{n}=") for n in names]


def complete_factor(ctx, param, incomplete: str) -> list[str]:
    """The factors of the run or sweep folder given before (``tabsim compare RUN --by``): its config.json's
    swept fields and ``arm``; every field name when the folder has none to read."""
    names: list = []
    source = ctx.params.get("source")
    try:
        sweep = json.loads((Path(source) / "config.json").read_text()).get("sweep") if source else None
        names = list(sweep) if isinstance(sweep, dict) else []
    except (OSError, ValueError, AttributeError):
        names = []
    if not names:
        from tabsim.config.models import field_names  # lazy: the config's models

        names = field_names()
    return [n for n in ("arm", *names) if n.startswith(incomplete)]
