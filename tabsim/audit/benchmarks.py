"""Known evaluation benchmarks: their item counts, and what a score on n items can be.

An interval is only as honest as its item count: an AIME row audited as if it had 500 items gets an
interval four times too narrow. A benchmark named here fills ``n_items`` of an entry; a different
count is refused unless the entry says why (``n_items_override``). Each count's source is cited in
``docs/audit.md`` (section "Known benchmarks").
"""
from __future__ import annotations

import dataclasses
import math
import re
from typing import Optional


@dataclasses.dataclass(frozen=True)
class Benchmark:
    """One evaluation set.

    Attributes:
      name: the canonical name written in the outputs.
      n_items: number of items (problems).
      aliases: other spellings (matched after lower-casing and dropping spaces, ``-``, ``_``, ``.``).
      source: where the count comes from (dataset card or paper).
      easier_than: benchmarks on which a model scores lower than here when it answers in the expected
        format (a base far below its score there points to format failures, not missing skill).
    """

    name: str
    n_items: int
    aliases: tuple = ()
    source: str = ""
    easier_than: tuple = ()


BENCHMARKS = (
    Benchmark("MATH-500", 500, ("math500", "math-500 test"),
              "HuggingFaceH4/MATH-500 dataset card: the 500-problem test subset of MATH chosen by Lightman et al., "
              "Let's Verify Step by Step, arXiv 2305.20050"),
    Benchmark("AIME 2024", 30, ("aime24", "aime2024", "aime 24"),
              "HuggingFaceH4/aime_2024 dataset card: the 30 problems of AIME I and II 2024"),
    Benchmark("AIME 2025", 30, ("aime25", "aime2025", "aime 25"),
              "opencompass/AIME2025 dataset card: the 30 problems of AIME I and II 2025 (15 each)"),
    Benchmark("AMC", 83, ("amc", "amc 2022-2023", "aimo-validation-amc", "amc22-23"),
              "AI-MO/aimo-validation-amc dataset card: 83 problems of AMC12 2022 and 2023, the AMC set "
              "evaluated by Spurious Rewards (arXiv 2506.10947) and TTRL (arXiv 2504.16084)"),
    Benchmark("GPQA-Diamond", 198, ("gpqa diamond", "gpqa_diamond", "gpqadiamond", "gpqa-d"),
              "Rein et al., GPQA, arXiv 2311.12022 (Idavidrein/gpqa dataset card): the Diamond subset of 198 "
              "questions"),
    Benchmark("GSM8K", 1319, ("gsm8k test", "gsm8k-test"),
              "Cobbe et al., Training Verifiers to Solve Math Word Problems, arXiv 2110.14168 (openai/gsm8k "
              "dataset card): the test split of 1,319 problems", easier_than=("MATH-500",)),
)


def _norm(name: str) -> str:
    return re.sub(r"[\s_.\-]+", "", str(name).strip().lower())


_BY_NAME = {}
for _b in BENCHMARKS:
    for _n in (_b.name,) + _b.aliases:
        _BY_NAME[_norm(_n)] = _b


def lookup(name) -> Optional[Benchmark]:
    """The registered benchmark called ``name`` (any registered spelling), else None."""
    if not isinstance(name, str):
        return None
    return _BY_NAME.get(_norm(name))


def canonical(name) -> str:
    """The registered name of ``name``, else ``name`` lower-cased without spaces or punctuation."""
    b = lookup(name)
    return b.name if b is not None else _norm(str(name))


def names() -> str:
    """``MATH-500 (500), AIME 2024 (30), ...`` for messages."""
    return ", ".join(f"{b.name} ({b.n_items})" for b in BENCHMARKS)


def greedy_feasible(score: float, n_items: int, below: float, above: float) -> tuple[bool, float, float]:
    """Whether a percent ``score`` can be ``100 x / n`` for an integer ``x``, given how it was rounded.

    A greedy (one sample per item) score on ``n`` items is a multiple of ``100 / n``; a written value
    stands for an exact score in ``[score - below, score + above]`` (``below`` = half a unit of its last
    decimal for rounding, ``above`` = a whole unit, since some papers truncate). A score with no
    multiple in that range was averaged over several samples per item (avg@k), or ``n`` is wrong.

    Returns:
      ``(feasible, nearest_below, nearest_above)`` in percent.
    """
    step = 100.0 / n_items
    lo = math.floor((score + 1e-9) / step) * step
    hi = lo + step
    slack = 1e-6
    ok = (score - below - slack <= lo) or (hi < score + above - slack)
    if abs(hi - score) < 1e-9 or abs(lo - score) < 1e-9:
        ok = True
    return ok, lo, hi
