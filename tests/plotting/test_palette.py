"""The palette gives each name of one figure a colour of its own."""
from __future__ import annotations

from tabsim.plotting.palette import ALGO_COLORS, FALLBACK_COLORS, colors_for


def test_names_without_a_project_colour_do_not_take_one_already_drawn():
    """grpo and gpg were both red in profile.png (gpg fell back to a cycle colour that grpo held); likewise
    opo and grpo, reinforce_pp and rloo, paper and cispo."""
    for names in (["grpo", "gpg"], ["gpg", "grpo"], ["opo", "grpo"], ["rloo", "reinforce_pp", "x", "y"],
                  ["paper", "cispo", "a", "b", "c", "d", "e", "f"], ["true", "dr_grpo"]):
        got = colors_for(names)
        assert len(set(got.values())) == len(names), got
    assert colors_for(["gpg", "grpo"])["grpo"] == ALGO_COLORS["grpo"]  # a project colour stays its name's
    assert set(colors_for([f"g{i}" for i in range(10)]).values()) == set(FALLBACK_COLORS)
