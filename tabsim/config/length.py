"""``algo``'s knobs of the length-reward loss components (DRPO), with their bounds.

Each knob is written to a config only when set away from its default or when the component that reads it is chosen
(:data:`LENGTH_KNOB_OF`, merged into :mod:`tabsim.config.models`' tables), so a config written before it existed keeps
its digest.
"""
from __future__ import annotations

from pydantic import Field

from tabsim.base.hyper_defaults import HYPER_DEFAULTS as D
from tabsim.config.base import BIG, Section

# knob -> (field, component): shown in a written config whenever that component is chosen
LENGTH_KNOB_OF = {"drpo_lambda": ("surrogate", "drpo")}


class LengthKnobs(Section):
    """``algo``'s fields of the length-reward loss components (a base of ``AlgoConfig``)."""

    drpo_lambda: float = Field(D["drpo_lambda"], ge=1e-3, le=BIG, description="drpo: the length reward's "
                               "temperature; each positive answer weighs exp((1 - length / max length) / drpo_lambda), "
                               "normalised over its group's positives (arXiv 2510.04474)")
