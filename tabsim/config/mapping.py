"""A resolved config as a mapping that resolves back to the same config.

``Config.model_dump`` leaves some fields out at their model default (knobs added after configs were written, so
those configs keep their digests). Resolving such a dump applies the preset it names again, and a preset that
sets one of those fields to something else wins over the left-out default: ``{"preset": "lambda_grpo", "algo":
{"token_weight": "none"}}`` dumps without ``token_weight`` and resolves back to ``lambda_grpo``.
:func:`config_mapping` writes those fields back, so code that edits a resolved config through its dump (the
factorial runner's programs, a run without its FROZEN arm) keeps what was given. The dump itself, and every
digest made from it, is unchanged.
"""
from __future__ import annotations

from tabsim.config.presets import PRESETS


def config_mapping(cfg) -> dict:
    """``cfg.model_dump(mode="json")`` plus each field its preset sets that the dump leaves out (at its value)."""
    out = cfg.model_dump(mode="json")
    for section, given in (PRESETS.get(cfg.preset) or {}).items() if cfg.preset else ():
        model = getattr(cfg, section, None)
        if not isinstance(given, dict) or not isinstance(out.get(section), dict) or model is None:
            continue
        for key in given:
            if key not in out[section] and key in type(model).model_fields:
                value = getattr(model, key)
                out[section][key] = value.model_dump(mode="json") if hasattr(value, "model_dump") else value
    return out
