"""Audit notes that say no more than their intervals, on every shipped table: a sign or a share above 1
is stated only when the interval excludes the boundary, every ratio in a note carries its interval,
and each note quotes the interval of its own row."""
import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from tabsim.audit import load_entries
from tabsim.audit.claims import SHARE_TERMS, share_notes
from tabsim.audit.core import audit
from tabsim.audit.estimate import binomial_var
from tabsim.audit.report import render_report

AUDITS = Path(__file__).resolve().parents[2] / "experiments" / "audits"
SHIPPED = sorted(p for p in AUDITS.iterdir() if p.suffix in (".yaml", ".csv"))
NUM = r"-?(?:\d+\.\d+|inf)"
# "<quantity> <estimate> [<low>, <high>] is below 0" and the like, as the report prints a claim
STATED = re.compile(rf"(\w+) ({NUM}) \[({NUM}), ({NUM})\] is (below 0|above 1|negative)(:| at its estimate only| \()")
RATIO = re.compile(r"(-?\d+)% \[(-?\d+%|-?inf), (-?\d+%|-?inf)\] of the true arm's")


@pytest.fixture(scope="module")
def shipped():
    res = audit(load_entries(SHIPPED), calibrate=False)
    return res, render_report(res, files=SHIPPED, command="tabsim audit experiments/audits")


def _blocks(res, report: str) -> dict:
    """Row index -> the report's paragraph on that row (its list item and the indented lines under it)."""
    lines, out = report.splitlines(), {}
    for i, r in res.audit.iterrows():
        head = f"- **{r['model']} / {r['benchmark']}" + (f" (trained on {r['train_set']})" if r["train_set"] else "")
        section = next(k for k, ln in enumerate(lines) if ln.endswith(f"source id `{r['source']}`."))
        start = next(k for k in range(section, len(lines)) if lines[k].startswith(head + "**"))
        end = next((k for k in range(start + 1, len(lines)) if not lines[k].startswith("  ")), len(lines))
        out[i] = "\n".join(lines[start:end])
    return out


def _f(x: str) -> float:
    return float(x.rstrip("%"))


def test_every_stated_sign_or_share_above_1_excludes_its_boundary_on_the_shipped_tables(shipped):
    res, report = shipped
    # every "is below 0 / above 1 / negative" in a note quotes the interval it rests on
    bare = re.findall(r"is (?:below 0|above 1|negative)", report.split("## Summary")[1])
    found = []
    for i, block in _blocks(res, report).items():
        row = res.audit.loc[i]
        for q, est, lo, hi, what, how in STATED.findall(block):
            nd = 2 if q.endswith("share") else 1
            # the interval quoted is the row's own
            assert (est, lo, hi) == tuple(f"{row[c]:.{nd}f}" for c in (q, f"{q}_low", f"{q}_high")), (q, block)
            boundary = 1.0 if what == "above 1" else 0.0
            low, high = row[f"{q}_low"], row[f"{q}_high"]
            if how != " at its estimate only":  # stated: the interval lies wholly on that side
                assert (high < boundary if what != "above 1" else low > boundary), block
            else:  # the boundary in the interval of the share or of its term
                d = SHARE_TERMS.get(q, q)
                assert low <= boundary <= high or row[f"{d}_low"] <= 0.0 <= row[f"{d}_high"], block
            found.append((i, q, how))
    assert len(found) == len(bare) and len(found) >= 11, (len(found), len(bare))
    # on the shipped tables most estimates outside [0, 1] have intervals that span the boundary
    assert sum(how != ":" for *_, how in found) >= 8


def test_every_ratio_in_a_note_carries_its_fieller_interval(shipped):
    res, report = shipped
    n = 0
    z = stats.norm.ppf(0.975)
    for i, block in _blocks(res, report).items():
        row = res.audit.loc[i]
        assert len(RATIO.findall(block)) == len(re.findall(r"\d+%(?: \[[^]]*\])? of the true arm's", block)), block
        for est, lo, hi in RATIO.findall(block):
            # independently: g_f / g_t, the two gains sharing the base (their covariance is var(base))
            vb, vt = row["se_frozen"] ** 2, row["se_true"] ** 2
            vf = float(binomial_var(row["acc_format"], row["n_items"]))
            a, b = row["acc_format"] - row["acc_frozen"], row["acc_true"] - row["acc_frozen"]
            roots = np.roots([b * b - z * z * (vt + vb), -2 * (a * b - z * z * vb), a * a - z * z * (vf + vb)])
            assert int(est) == round(100 * a / b)
            assert (_f(lo), _f(hi)) == tuple(float(round(100 * x)) for x in sorted(roots.real)), block
            n += 1
    assert n == 2  # Spurious Rewards' Qwen2.5-Math-7B and Llama3.1-8B-Instruct


def test_notes_are_built_from_claims_on_the_rows_own_intervals(shipped):
    res, report = shipped
    terms = {(r["source"], r["model"], r["benchmark"], r["train_set"], r["term"]): r for _, r in res.terms.iterrows()}
    n = 0
    for _, row in res.audit.iterrows():
        key = (row["source"], row["model"], row["benchmark"], row["train_set"])
        for note in share_notes({t: terms[key + (t,)] for t in (*SHARE_TERMS, *SHARE_TERMS.values())}):
            assert note.text in report
            for c in note.claims:
                assert (c.estimate, c.low, c.high) == (row[c.quantity], row[f"{c.quantity}_low"],
                                                       row[f"{c.quantity}_high"])
                assert c.quoted() in note.text
            if any(c.side == "spans" for c in note.claims):
                assert "estimate only" in note.text and "not established" in note.text
            else:
                assert "estimate only" not in note.text
            n += 1
    assert n == 11


def test_a_share_whose_interval_is_unbounded_states_nothing():
    """One item of 50 apart: d_null's interval spans 0 and the shares' are unbounded (d_total spans 0)."""
    inf = math.inf
    by = {"null_share": {"identified": "point", "estimate": 3.0, "low": -inf, "high": inf},
          "sharpening_share": {"identified": "point", "estimate": -2.0, "low": -inf, "high": inf},
          "rd_share": {"identified": "point", "estimate": 0.0, "low": -inf, "high": inf},
          "d_null": {"estimate": 2.0, "low": -17.6, "high": 21.6},
          "d_elicit": {"estimate": -1.3, "low": -20.9, "high": 18.3}, "d_rd": {"estimate": 0.0, "low": -19.6, "high": 19.6}}
    texts = [n.text for n in share_notes(by)]
    assert len(texts) == 2
    assert texts[0].startswith("null_share 3.00 [-inf, inf] is above 1 at its estimate only") and "spans 1" in texts[0]
    assert "sign of d_elicit (-1.3 [-20.9, 18.3]) is not established" in texts[1]
