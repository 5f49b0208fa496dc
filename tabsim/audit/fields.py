"""What an audited entry holds: the arms it may report, the allowed values of its fields, and the
:class:`Entry` record that :func:`tabsim.audit.entry.build_entry` makes of them.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from tabsim.stats.partition_terms import ARMS as PARTITION_ARMS

# Arms an entry may report. The first four make the partition (tabsim.stats.partition_terms); the rest are
# reported as gains.
EXTRA_ARMS = ("format", "incorrect", "self_certainty", "entropy")
ARMS = PARTITION_ARMS + EXTRA_ARMS
ARM_ALIASES = {"base": "frozen", "before_rl": "frozen", "ground_truth": "true", "majority_vote": "majority"}
VALUE_MODES = ("absolute", "gains")
MAJORITY_KINDS = ("online", "offline")
PROTOCOLS = ("greedy", "avg", "pass")
# k values whose base-model pass@k / maj@k the simulator calibration can match (exact metrics).
PASS_K = (2, 4, 8, 16, 32, 64)
MAJ_K = (4, 8)
ENTRY_FIELDS = ("model", "benchmark", "train_set", "n_items", "n_items_override", "samples_per_item", "values",
                "scale", "majority_kind", "gamma", "arms", "other", "base_pass_at_k", "base_maj_at_k", "known_base",
                "per_item", "notes", "source")


class AuditInputError(ValueError):
    """One or more published-result files are malformed; ``problems`` lists every message."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("invalid audit input:\n  " + "\n  ".join(self.problems))


class Problems:
    """Every problem of every file, collected so that one run reports them all."""

    def __init__(self):
        self.items: list[str] = []

    def add(self, where: str, msg: str):
        self.items.append(f"{where}: {msg}")


@dataclasses.dataclass(frozen=True)
class ArmValue:
    """One arm's accuracy in percent: the reported value (mean over seeds) and per-seed values."""

    mean: float
    seeds: Optional[tuple] = None

    @property
    def n_seeds(self) -> int:
        return len(self.seeds) if self.seeds else 1


@dataclasses.dataclass(frozen=True)
class Entry:
    """One model x benchmark (x training set) of one source, with absolute accuracies in percent.

    ``protocol`` is how each item was scored: ``greedy`` (one sample), ``avg`` (avg@k: the mean of k
    samples) or ``pass`` (pass@k: any of k samples correct); ``samples_per_item`` is that k.
    ``per_item`` holds per-item scores of the arms that have them (:mod:`tabsim.audit.items`).
    """

    file: str
    label: str
    source: dict
    model: str
    benchmark: str
    n_items: int
    samples_per_item: int
    decoding: str
    values: str
    majority_kind: Optional[str]
    gamma: Optional[float]
    arms: dict
    other: dict
    base_pass_at_k: dict
    base_maj_at_k: dict
    notes: str = ""
    train_set: str = ""
    protocol: str = "greedy"
    scale: str = "percent"
    n_items_from: str = "entry"
    known_base: Optional[float] = None
    per_item: dict = dataclasses.field(default_factory=dict)
    flags: tuple = ()

    @property
    def key(self) -> tuple:
        return (self.source["id"], self.model, self.benchmark, self.train_set)

    @property
    def n_eff(self) -> int:
        """Bernoulli trials behind each accuracy when samples are independent: ``n_items x k`` for avg@k."""
        return self.n_items * (self.samples_per_item if self.protocol == "avg" else 1)

    @property
    def missing(self) -> tuple:
        return tuple(a for a in PARTITION_ARMS if a not in self.arms)
