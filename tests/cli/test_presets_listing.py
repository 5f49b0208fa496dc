"""``tabsim presets`` shows every section a preset sets: presets that differ only in ``train`` (a group stage, a
refill), ``task`` or ``arms``, or in an algo choice beyond the composition (a tracker, a prompt skip), read apart."""
from __future__ import annotations

from click.testing import CliRunner

from tabsim.cli import main
from tabsim.config.presets import PRESETS


def listing() -> dict[str, str]:
    res = CliRunner().invoke(main, ["presets"])
    assert res.exit_code == 0, res.output
    return {line.split()[0]: line.split(None, 1)[1] for line in res.stdout.splitlines() if line.strip()}


def test_every_section_a_preset_sets_is_shown():
    shown = listing()
    assert set(shown) == set(PRESETS)
    for name, preset in PRESETS.items():
        for section in ("task", "arms", "train"):
            for key, value in (preset.get(section) or {}).items():
                text = "[" + ", ".join(map(str, value)) + "]" if isinstance(value, list) else str(value)
                assert f"{key} {text}" in shown[name].split(f"{section}: ", 1)[1], (name, section, key)
    assert "train: group_size 16, group_stage cppo, group_keep 8" in shown["cppo"]
    assert "prompt_skip greso" in shown["greso"] and "tracker spo_stream" in shown["spo_stream"]
    assert "reward_terms [overlong]" in shown["dapo_overlong"]
    assert shown["cppo"] != shown["gfpo"]
