"""Checks shared by the claim studies' tests (imported by them; not a test module)."""
from __future__ import annotations

from tabsim.prereg import claims


def regions_follow_their_intervals(folder, threshold: float, *, above: bool = True) -> list:
    """The recorded confirmatory run's regions of the claim study in ``folder``, each checked to say "holds" when
    its interval lies above ``threshold`` (below it with ``above=False``), "fails" when at or beyond it on the
    other side and "unsettled" otherwise."""
    run = claims.read_claim_run(claims.load_claim(folder))
    assert run is not None, f"{folder.name}: no complete confirmatory run"
    for r in run.verdict.regions:
        if above:
            inside, outside = r.ci_low > threshold, r.ci_high <= threshold
        else:
            inside, outside = r.ci_high < threshold, r.ci_low >= threshold
        assert r.claim == ("holds" if inside else "fails" if outside else "unsettled"), r
    return run
