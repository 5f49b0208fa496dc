"""The two halves of the Spurious Rewards claim (arXiv 2506.10947): SR-clip (the clip's own effect on a
random-reward run) and SR-net (the random reward's net effect under the same recipe).

The pair is checked to be one design split in two (SR-net's design is SR-clip's clip cell), and the
committed confirmatory runs to say what their intervals say; their reduced versions run with every other
study's in tests/studies/test_claims.py.
"""
from __future__ import annotations

from pathlib import Path

from tabsim.prereg import claims
from tabsim.prereg.schema import read_document

ROOT = Path(__file__).resolve().parents[2] / "preregistration" / "claims"
IDS = ["SR-clip", "SR-net"]


def test_net_study_is_the_clip_cell_of_the_clip_study():
    """Same preset, task, gamma, lr, steps, priors and reward arms; SR-net drops the surrogate factor (clip only)."""
    clip, net = (read_document(ROOT / i / "plan.yaml")["design"] for i in IDS)
    assert (clip["preset"], clip["config"], clip["steps"], clip["arms"]) == \
        (net["preset"], net["config"], net["steps"], net["arms"])
    factors = {f["name"]: f for f in clip["factors"]}
    assert factors.pop("surrogate")["levels"] == ["clip", "importance"]
    assert factors == {f["name"]: f for f in net["factors"]}
    # disjoint confirmatory seeds, both disjoint from the shared pilot's
    seeds = [set(range(d["first_seed"], d["first_seed"] + d["seeds"])) for d in (clip, net)]
    assert not seeds[0] & seeds[1] and not (seeds[0] | seeds[1]) & set(range(90000, 90008))


def test_recorded_verdicts_follow_their_intervals():
    """Each region's verdict is where its scaled interval lies against the +-0.01 thresholds."""
    for cid in IDS:
        run = claims.read_claim_run(claims.load_claim(ROOT / cid))
        assert run is not None, f"{cid}: no complete confirmatory run"
        for r in run.verdict.regions:
            predicted_up = r.predicted.startswith(">")
            inside = r.ci_low > 0.01 if predicted_up else r.ci_high < -0.01
            outside = r.ci_high <= 0.01 if predicted_up else r.ci_low >= -0.01
            assert r.claim == ("holds" if inside else "fails" if outside else "unsettled"), (cid, r)

