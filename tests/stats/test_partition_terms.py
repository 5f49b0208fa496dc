"""The partition's vocabulary is written once (tabsim.stats.partition_terms) and read by every reader."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tabsim.audit import estimate
from tabsim.audit.verdict import term_verdict
from tabsim.stats import partition_terms as pt
from tabsim.stats.partition import seed_partition, summarize_partition


def test_every_reader_takes_the_terms_from_one_table():
    from tabsim.runtime import run

    assert run.TERM_ARMS is pt.TERM_ARMS
    assert run.TERM_ARMS["d_elicit"] == ("majority", "random") and run.TERM_ARMS["d_null"] == ("random", "frozen")
    assert estimate.RATIO_TERMS is pt.RATIOS and estimate.TERM_HELP is pt.HELP and estimate.SHARES is pt.SHARES
    assert set(pt.HELP) == set(pt.CONTRASTS) | set(pt.RATIOS)


def test_the_two_shares_have_names_that_cannot_be_confused():
    """elicitation_share = (d_null + d_elicit) / d_total; the sharpening share = d_elicit / d_total."""
    assert pt.RATIOS["elicitation_share"] == ("d_majority", "d_total")
    assert pt.RATIOS["sharpening_share"] == ("d_elicit", "d_total")
    assert "elicit_share" not in estimate.TERMS
    f, r, m, t = 10.0, 14.0, 20.0, 30.0  # by hand: d_null 4, d_elicit 6, d_rd 10, d_total 20
    assert pt.value("elicitation_share", f, r, m, t) == 0.5
    assert pt.value("sharpening_share", f, r, m, t) == 0.3
    assert sum(pt.value(s, f, r, m, t) for s in pt.SHARES) == pytest.approx(1.0)


def test_the_old_share_name_still_works_with_a_warning():
    shares = {"null_share": (0.1, 0.0, 0.2), "elicit_share": (0.8, 0.6, 0.9), "rd_share": (0.1, 0.0, 0.2)}
    with pytest.warns(DeprecationWarning, match="sharpening_share"):
        old = term_verdict(shares)
    new = term_verdict({"sharpening_share" if k == "elicit_share" else k: v for k, v in shares.items()})
    assert old == new and old.verdict == "ELICITATION_DOMINATED"


def test_the_partition_reads_the_definitions():
    rng = np.random.default_rng(0)
    acc = {a: rng.uniform(0, 1, 5) for a in pt.ARMS}
    df = pd.DataFrame([{"seed": s, "arm": a, "pass1": acc[a][s]} for s in range(5) for a in pt.ARMS])
    out = seed_partition(df, step=None)
    for term in ("d_null", "d_elicit", "d_rd", "d_naive", "d_total"):
        plus, minus = pt.arms_of(term)
        assert np.array_equal(out[term].to_numpy(), acc[plus] - acc[minus]), term
    s = summarize_partition(out, method="t").set_index("term")["estimate"]
    means = {a: acc[a].mean() for a in pt.ARMS}
    assert s["elicitation_share"] == pytest.approx((means["majority"] - means["frozen"]) / (means["true"] - means["frozen"]))
