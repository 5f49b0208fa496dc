"""A claim's verdict from the verdicts of its plan's hypotheses.

Each confirmatory hypothesis tests the claim in one region of the design (a prior strength, a group
size, ...), and the claim file says whether a SUPPORTED hypothesis means the claim holds or fails
there; a NOT SUPPORTED one (its interval entirely outside the predicted region) means the opposite,
and an INCONCLUSIVE one settles nothing. Then:

* SUPPORTED       the claim holds in every region that was settled;
* NOT SUPPORTED   it fails in every region that was settled;
* DEPENDS         it holds in some regions and fails in others (both listed);
* INCONCLUSIVE    no region was settled.

A verdict names the regions that were not settled, so it says no more than its intervals support.
"""
from __future__ import annotations

import dataclasses
import math

from tabsim.prereg.analysis import INCONCLUSIVE, NOT_SUPPORTED, SUPPORTED
from tabsim.prereg.claims.catalog import Claim
from tabsim.prereg.errors import PreregError

DEPENDS = "DEPENDS"
NOT_TESTABLE = "NOT TESTABLE IN A TABLE"
CLAIM_VERDICTS = (SUPPORTED, NOT_SUPPORTED, DEPENDS, INCONCLUSIVE, NOT_TESTABLE)


@dataclasses.dataclass(frozen=True)
class RegionResult:
    """One hypothesis read as the claim's quantity in its region (estimate and interval scaled)."""

    hypothesis: str
    region: str
    estimate: float
    ci_low: float
    ci_high: float
    verdict: str  # the hypothesis's
    claim: str  # holds | fails | unsettled
    reason: str
    predicted: str  # the region the rule predicts, on the same scale: "> +0.0200"
    level: float = 0.95  # the interval's level (a TOST rule is judged on the 1 - 2 alpha interval)


@dataclasses.dataclass(frozen=True)
class ClaimVerdict:
    claim_id: str
    verdict: str
    regions: tuple[RegionResult, ...]

    def where(self, outcome: str) -> list[str]:
        return [r.region for r in self.regions if r.claim == outcome]

    @property
    def region_text(self) -> str:
        """``holds at p_s 0.20, 0.50; fails at p_s 0.05; unsettled at p_s 0.80`` (the parts that apply)."""
        parts = [f"{word} at {', '.join(self.where(word))}" for word in ("holds", "fails", "unsettled")
                 if self.where(word)]
        return "; ".join(parts)


def _predicted(region, scale: float) -> str:
    """``[a, inf]`` -> ``> a``, ``[-inf, b]`` -> ``< b``, ``[a, b]`` -> ``in [a, b]``, each times ``scale``."""
    if not region:
        return ""
    lo, hi = (float(x) * scale for x in region)
    lo, hi = min(lo, hi), max(lo, hi)
    if math.isinf(hi):
        return f"> {lo:+.4f}"
    if math.isinf(lo):
        return f"< {hi:+.4f}"
    return f"in [{lo:+.4f}, {hi:+.4f}]"


def _outcome(verdict: str, if_supported: str) -> str:
    if verdict == SUPPORTED:
        return if_supported
    if verdict == NOT_SUPPORTED:
        return "fails" if if_supported == "holds" else "holds"
    return "unsettled"


def claim_verdict(claim: Claim, analysis: dict) -> ClaimVerdict:
    """The claim's verdict from a run's ``analysis`` (``results.json``'s, or :func:`tabsim.prereg.analysis.analyse`'s)."""
    by_id = {h["id"]: h for h in analysis["hypotheses"]}
    missing = [h for h in claim.bearing if h not in by_id]
    if missing:
        raise PreregError(f"claim {claim.id}: bearing names hypothesis {missing[0]!r}, which the plan does not hold; "
                          f"its hypotheses: {', '.join(by_id)}")
    regions = []
    for hid, bearing in claim.bearing.items():
        h = by_id[hid]
        s = claim.headline.scale
        lo, hi = sorted((h["ci_low"] * s, h["ci_high"] * s))
        regions.append(RegionResult(hid, bearing.region, h["estimate"] * s, lo, hi, h["verdict"],
                                    _outcome(h["verdict"], bearing.if_supported), h.get("reason", ""),
                                    _predicted(h.get("region"), s), float(h.get("ci_level", 0.95))))
    outcomes = {r.claim for r in regions} - {"unsettled"}
    verdict = {frozenset({"holds"}): SUPPORTED, frozenset({"fails"}): NOT_SUPPORTED,
               frozenset({"holds", "fails"}): DEPENDS, frozenset(): INCONCLUSIVE}[frozenset(outcomes)]
    return ClaimVerdict(claim.id, verdict, tuple(regions))
