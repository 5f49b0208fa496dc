"""The partition's vocabulary, written once: its arms, its terms as contrasts of the arms, their shares.

With ``acc`` the final expected pass@1 of an arm (docs/science.md, estimands)::

    d_null     = acc(random)   - acc(frozen)
    d_elicit   = acc(majority) - acc(random)
    d_rd       = acc(true)     - acc(majority)
    d_naive    = acc(true)     - acc(random)  = d_elicit + d_rd
    d_total    = acc(true)     - acc(frozen)  = d_null + d_elicit + d_rd
    d_majority = acc(majority) - acc(frozen)  = d_null + d_elicit
    bias       = d_naive - d_rd = d_elicit

and the ratios ``rd_fraction = d_rd / d_naive``; ``elicitation_share = d_majority / d_total`` (the reference
rule's share: what a majority-vote reward gains of the total, d_null included); and the three shares of
``d_total`` that sum to 1, ``null_share = d_null / d_total``, ``sharpening_share = d_elicit / d_total`` (the
self-consistency sharpening alone) and ``rd_share = d_rd / d_total``. The sharpening share was called
``elicit_share`` before, a name one letter-run away from ``elicitation_share``; :func:`canonical` still takes it,
with a DeprecationWarning. :mod:`tabsim.stats.partition` (per seed), :mod:`tabsim.audit.estimate` (published
tables) and the runtime's expected-flow root (:data:`TERM_ARMS`) read these tables.
"""
from __future__ import annotations

import warnings

ARMS = ("frozen", "random", "majority", "true")  # the contrasts' axis (f, r, m, t)
ACC_COLUMNS = tuple(f"acc_{a}" for a in ARMS)
# term -> its coefficients on (frozen, random, majority, true)
CONTRASTS = {
    "d_null": (-1, 1, 0, 0),
    "d_elicit": (0, -1, 1, 0),
    "d_rd": (0, 0, -1, 1),
    "d_naive": (0, -1, 0, 1),
    "d_total": (-1, 0, 0, 1),
    "d_majority": (-1, 0, 1, 0),
    "bias": (0, -1, 1, 0),
}
# ratio -> (numerator term, denominator term)
RATIOS = {
    "rd_fraction": ("d_rd", "d_naive"),
    "elicitation_share": ("d_majority", "d_total"),
    "null_share": ("d_null", "d_total"),
    "sharpening_share": ("d_elicit", "d_total"),
    "rd_share": ("d_rd", "d_total"),
}
SHARES = ("null_share", "sharpening_share", "rd_share")  # the three terms' shares of d_total; they sum to 1
DEPRECATED = {"elicit_share": "sharpening_share"}  # old name -> its name now
HELP = {
    "d_null": "acc(RANDOM) - acc(FROZEN): what training with no information does",
    "d_elicit": "acc(MAJORITY) - acc(RANDOM): self-consistency sharpening",
    "d_rd": "acc(TRUE) - acc(MAJORITY): the reward-design signal",
    "d_naive": "acc(TRUE) - acc(RANDOM) = d_elicit + d_rd: the naive reward-design estimate",
    "d_total": "acc(TRUE) - acc(FROZEN) = d_null + d_elicit + d_rd",
    "d_majority": "acc(MAJORITY) - acc(FROZEN) = d_null + d_elicit: the elicitation share's numerator",
    "bias": "d_naive - d_rd = d_elicit: bias of the naive estimator",
    "rd_fraction": "d_rd / d_naive",
    "elicitation_share": "d_majority / d_total = (d_null + d_elicit) / d_total: the reference rule's share",
    "null_share": "d_null / d_total: the share a random reward gives",
    "sharpening_share": "d_elicit / d_total: the share of self-consistency sharpening (formerly elicit_share)",
    "rd_share": "d_rd / d_total: the share of the reward-design signal",
}


def arms_of(term: str) -> tuple[str, str]:
    """A difference's (minuend arm, subtrahend arm): ``d_elicit`` -> ``("majority", "random")``."""
    coef = CONTRASTS[term]
    return ARMS[coef.index(1)], ARMS[coef.index(-1)]


def value(term: str, f, r, m, t):
    """The term from the arms' accuracies (scalars or arrays); a ratio is the ratio of its two differences."""
    if term in RATIOS:
        a, b = RATIOS[term]
        return value(a, f, r, m, t) / value(b, f, r, m, t)
    acc = dict(zip(ARMS, (f, r, m, t)))
    plus, minus = arms_of(term)
    return acc[plus] - acc[minus]  # every difference is one arm less another: exactly the subtraction


def canonical(term: str) -> str:
    """``term`` as named now; an old name (``elicit_share``) gives its new one with a DeprecationWarning."""
    if term in DEPRECATED:
        warnings.warn(f"{term!r} is now called {DEPRECATED[term]!r} (d_elicit / d_total); the old name will go",
                      DeprecationWarning, stacklevel=2)
        return DEPRECATED[term]
    return term


# the differences of two arms, as (minuend, subtrahend): what the expected flow's root reads
TERM_ARMS = {t: arms_of(t) for t in ("d_null", "d_elicit", "d_rd", "d_naive", "d_total")}
