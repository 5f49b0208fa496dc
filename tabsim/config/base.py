"""The pieces every config section shares: the strict pydantic base, the float32 bounds and the
messages that name a field and suggest the closest allowed name."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, field_validator

from tabsim.base.registry import suggest, unknown  # suggest: for the config's other modules


class ConfigError(ValueError):
    """A configuration value is missing, malformed or out of range (the message names the field)."""


# The smallest normal float32: a nonzero float below it is a denormal or zero in the engine's float32
# arithmetic (``lr = 5e-324`` ran as ``lr = 0`` without a word), so it is refused.
TINY = 2.0**-126  # numpy.finfo(numpy.float32).tiny, written out: validation loads no NumPy (a test checks it)


class Section(BaseModel):
    # strict: no coercion (a float or a string where an integer is meant, 1 or "yes" for a boolean);
    # every float finite (a float field also takes an integer)
    model_config = ConfigDict(extra="forbid", validate_assignment=True, strict=True, allow_inf_nan=False)

    @field_validator("*", mode="after")
    @classmethod
    def _not_denormal(cls, v):
        if isinstance(v, float) and 0.0 < abs(v) < TINY:
            raise ValueError(f"{v!r} is below the smallest float32 number, {TINY:.4g} (the engine computes in "
                             "float32, where it is zero or a denormal); give 0 where 0 is allowed, or a value "
                             f">= {TINY:.4g}")
        return v


def one_of(field: str, value: str, allowed) -> str:
    if value not in allowed:
        raise ValueError(unknown(field, value, allowed))
    return value


# Upper bounds of the float fields: far beyond any useful value, low enough that float32 arithmetic in
# the engine stays finite (1e308 would become inf there and turn every metric into NaN).
BIG = 1e3
# Lower bound of the learning rate: below it an update moves float32 logits of order 1 by less than their
# last bit (float32 resolves 6e-8 relative), so training would silently do nothing.
LR_MIN = 1e-12

SEED_END = 2**31  # seeds are int32 in the engine: every seed of a run is in [0, SEED_END)
