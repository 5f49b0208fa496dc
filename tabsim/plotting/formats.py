"""The file formats a figure is written in: PNG by default, PDF or SVG when asked."""
from __future__ import annotations

from tabsim.base import defaults

FIGURE_FORMATS = ("png", "pdf", "svg")


def figure_formats(formats=None) -> tuple[str, ...]:
    """``formats`` checked, or the user's default (:func:`tabsim.base.defaults.figure_formats`:
    ``$TABSIM_FIGURE_FORMATS``), else PNG only. A command passes its ``--pdf`` here as ``formats``."""
    if formats is None:
        formats = defaults.figure_formats()
    elif isinstance(formats, str):
        formats = [formats]
    out = tuple(dict.fromkeys(str(f).strip().lower().lstrip(".") for f in formats))
    bad = [f for f in out if f not in FIGURE_FORMATS]
    if bad or not out:
        raise ValueError(f"figure format {bad[0] if bad else ''!r}: allowed: {', '.join(FIGURE_FORMATS)}")
    return out
