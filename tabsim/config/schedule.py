"""The evaluation schedule a run gets when its config leaves ``train.eval_every`` unset."""
from __future__ import annotations

import math

EVAL_POINTS = (20, 50)  # the evaluation intervals a default eval_every aims at (so 21-51 points per curve)


def default_eval_every(steps: int) -> int:
    """An ``eval_every`` for a run of ``steps`` steps that gives its curves 20 to 50 intervals: the largest
    divisor of ``steps`` that leaves at least 20 (every step below 20 steps); where no divisor gives 20 to 50
    (``steps`` prime, say) the one whose count of intervals is nearest the range, by ratio."""
    lo, hi = EVAL_POINTS
    if steps <= lo:
        return 1
    divisors = sorted({x for d in range(1, math.isqrt(steps) + 1) if steps % d == 0 for x in (d, steps // d)})
    inside = [d for d in divisors if lo <= steps // d <= hi]
    if inside:
        return max(inside)
    return min(divisors, key=lambda d: max(lo / (steps // d), (steps // d) / hi))
