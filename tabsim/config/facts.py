"""The environments' optional facts checked against the rest of a config: the bandit's unequal split of ``p_s``
among a prompt's correct answers (``task.correct_mass_ratio``), refused in one line naming the field where it
would not be read."""
from __future__ import annotations


def check_facts(cfg) -> None:
    """Raise ``ValueError`` (one line naming the field) when ``cfg`` asks for a fact its task does not have."""
    t = cfg.task
    if t.correct_mass_ratio is not None and t.env != "bandit":
        raise ValueError(f"task.correct_mass_ratio: only the bandit splits p_s among its correct answers by a ratio "
                         f"(task.env is {t.env!r}); remove it")
    if "correct_mass_ratio" in cfg.sweep and t.correct_mass_ratio is None:
        raise ValueError("sweep.correct_mass_ratio: the correct answers split p_s equally (task.correct_mass_ratio is "
                         "not set), so the levels would have no effect; set task.correct_mass_ratio (any value > 0) "
                         "to sweep it")
