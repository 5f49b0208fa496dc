"""What a comparison's table says beside its numbers: the settings every row depends on (metric, arm,
normalisation, interval method, level, what was resampled), the statistics left out for a metric and
why, and a note where an estimate needs one (an IQM equal to the median, a probability of
improvement that no resample moves)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from tabsim.stats.partition import DIFFERENCE_TERMS

# statistics that mean nothing for a metric, with why: they are not computed for it
NOT_APPLICABLE = {t: {"optimality_gap": "a difference of two arms has no best attainable value"}
                  for t in DIFFERENCE_TERMS}
RESAMPLED = {False: "seeds within conditions", True: "conditions, then seeds within each"}


def annotate(table: pd.DataFrame, s: dict) -> pd.DataFrame:
    """The settings every row depends on, and a note where an estimate needs one."""
    est = table.set_index(["statistic", "group"])["estimate"]
    notes = []
    for stat, group, e, lo, hi in table[["statistic", "group", "estimate", "low", "high"]].itertuples(index=False):
        note = ""
        if stat == "iqm" and ("median", group) in est.index and np.isclose(e, est["median", group], atol=1e-12):
            note = ("equals the median: the middle half of the runs is as symmetric as the conditions' means, "
                    "or there are too few runs to tell them apart")
        elif stat == "probability_of_improvement" and lo == hi:
            note = (f"every resample gives {e:g}: the groups' runs do not overlap in any condition, so the "
                    "interval cannot say how sure this is; more seeds or conditions can")
        notes.append(note)
    out = table.assign(method=s["method"], ci=s["ci"], resampled=s["resampled"], n_resamples=s["n_resamples"],
                       note=notes)
    out.insert(0, "normalization", s["normalize"])
    out.insert(0, "arm", s["arm"])
    out.insert(0, "metric", s["metric"])
    out["n_conditions"] = s["n_conditions"]
    out["n_seeds"] = out["group"].map(s["n_seeds"])
    out["n_seeds_versus"] = out["versus"].map(s["n_seeds"]).astype("Int64")
    return out
