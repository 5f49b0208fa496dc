"""``algo``'s knobs of the loss components added in round two (HölderPO's ratio, Clip-Cov), with their bounds.

Each knob is written to a config only when set away from its default or when the component that reads it is chosen
(:data:`LOSS_KNOB_OF`, merged into :mod:`tabsim.config.models`' tables), so a config written before it existed keeps
its digest.
"""
from __future__ import annotations

from pydantic import Field, model_validator

from tabsim.base.hyper_defaults import HYPER_DEFAULTS as D
from tabsim.config.base import BIG, Section

# knob -> (field, component): shown in a written config whenever that component is chosen
LOSS_KNOB_OF = {"holder_p": ("ratio", "holder"), "clip_cov_ratio": ("surrogate", "clip_cov"),
                "clip_cov_lb": ("surrogate", "clip_cov"), "clip_cov_ub": ("surrogate", "clip_cov"),
                "opmd_coef": ("surrogate", "opmd")}


class LossKnobs(Section):
    """``algo``'s fields of the round-two loss components (a base of ``AlgoConfig``)."""

    holder_p: float = Field(D["holder_p"], ge=-100.0, le=100.0, description="holder ratio: the power mean's "
                            "exponent over an answer's token ratios (1: arithmetic, 0: geometric, -1: harmonic)")
    clip_cov_ratio: float = Field(D["clip_cov_ratio"], gt=0.0, le=1.0, description="clip_cov: share of the batch's "
                                  "valid tokens whose gradient is cut (at least one)")
    clip_cov_lb: float = Field(D["clip_cov_lb"], ge=-BIG, le=BIG, description="clip_cov: the covariance band's "
                               "lower end (exclusive)")
    clip_cov_ub: float = Field(D["clip_cov_ub"], ge=-BIG, le=BIG, description="clip_cov: the covariance band's "
                               "upper end (exclusive)")
    opmd_coef: float = Field(D["opmd_coef"], ge=0.0, le=BIG, description="opmd: the coefficient of the squared "
                             "log-ratio added to the REINFORCE loss (arXiv 2509.24203's OPMD)")

    @model_validator(mode="after")
    def _clip_cov_band(self):
        if self.clip_cov_lb >= self.clip_cov_ub:
            raise ValueError(f"algo.clip_cov_lb: the covariance band needs clip_cov_lb < clip_cov_ub = "
                             f"{self.clip_cov_ub:g}, got {self.clip_cov_lb:g}")
        return self
