"""``algo``'s knobs of the loss components added in round two (HölderPO's ratio), with their bounds.

Each knob is written to a config only when set away from its default or when the component that reads it is chosen
(:data:`LOSS_KNOB_OF`, merged into :mod:`tabsim.config.models`' tables), so a config written before it existed keeps
its digest.
"""
from __future__ import annotations

from pydantic import Field

from tabsim.base.hyper_defaults import HYPER_DEFAULTS as D
from tabsim.config.base import Section

# knob -> (field, component): shown in a written config whenever that component is chosen
LOSS_KNOB_OF = {"holder_p": ("ratio", "holder")}


class LossKnobs(Section):
    """``algo``'s fields of the round-two loss components (a base of ``AlgoConfig``)."""

    holder_p: float = Field(D["holder_p"], ge=-100.0, le=100.0, description="holder ratio: the power mean's "
                            "exponent over an answer's token ratios (1: arithmetic, 0: geometric, -1: harmonic)")
