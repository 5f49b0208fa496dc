"""The report is computed from the data: ``results.json``'s analysis re-derived from ``data.parquet``.

``results.json`` records every estimate, interval, p and verdict of a run; a digest or signature
over it says who wrote it, not that the numbers follow from the data. :func:`recheck_analysis`
recomputes the whole analysis (:func:`tabsim.prereg.analysis.analyse`) from the run's
``data.parquet`` under the plan recorded in ``results.json`` (which must hash to the run's plan
hash) and refuses when any number, verdict or check differs beyond floating-point noise.
The sentence that explains a verdict (``reason``) is left out of the comparison: its wording may
differ between tabsim versions while the numbers it quotes do not.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from tabsim.prereg.analysis import analyse
from tabsim.prereg.hashing import plan_hash
from tabsim.prereg.schema import PreregError, validate_document
from tabsim.prereg.status import DATA, RESULTS

IGNORED = frozenset({"reason"})
RTOL, ATOL = 1e-7, 1e-10  # far below any reported digit; above BLAS differences between machines


def _plain(obj):
    return json.loads(json.dumps(obj, default=lambda o: o.item() if hasattr(o, "item") else o.tolist()))


def differences(recorded, fresh, where: str = "analysis") -> list[str]:
    """Dotted paths at which two analysis records differ (numbers compared with a small tolerance)."""
    if isinstance(recorded, dict) and isinstance(fresh, dict):
        out = []
        for k in sorted(set(recorded) | set(fresh), key=str):
            if k in IGNORED:
                continue
            if k not in recorded or k not in fresh:
                out.append(f"{where}.{k} ({'missing' if k not in recorded else 'not in the recomputation'})")
            else:
                out += differences(recorded[k], fresh[k], f"{where}.{k}")
        return out
    if isinstance(recorded, list) and isinstance(fresh, list):
        if len(recorded) != len(fresh):
            return [f"{where} ({len(recorded)} entries, recomputed {len(fresh)})"]
        out = []
        for i, (a, b) in enumerate(zip(recorded, fresh)):
            name = b.get("id") if isinstance(b, dict) and isinstance(b.get("id"), str) else i
            out += differences(a, b, f"{where}[{name}]")
        return out
    numbers = (int, float)
    if isinstance(recorded, numbers) and isinstance(fresh, numbers) and not isinstance(recorded, bool) \
            and not isinstance(fresh, bool):
        a, b = float(recorded), float(fresh)
        if (math.isnan(a) and math.isnan(b)) or a == b or math.isclose(a, b, rel_tol=RTOL, abs_tol=ATOL):
            return []
        return [f"{where} ({recorded!r}, recomputed {fresh!r})"]
    return [] if recorded == fresh else [f"{where} ({recorded!r}, recomputed {fresh!r})"]


def recheck_analysis(results: dict, out: str | Path) -> dict:
    """Recompute the analysis of the run folder ``out`` from its data and compare it with ``results``.

    Returns:
      ``{"state": "agrees", "text"}``.

    Raises:
      PreregError: the recorded plan does not hash to the run's plan hash or is invalid, the data
        cannot be read, or a recomputed number, verdict or check differs (the message names the
        first differences).
    """
    out = Path(out)
    doc, sha = results.get("plan"), results["prereg"].get("sha256")
    if not isinstance(doc, dict) or plan_hash(doc) != sha:
        raise PreregError(f"{out / RESULTS}: the plan it records does not hash to its plan hash {str(sha)[:12]}; the "
                          f"analysis cannot be recomputed from the locked plan")
    plan, problems = validate_document(doc)
    if plan is None:
        raise PreregError(f"{out / RESULTS}: the plan it records is not valid ({problems[0] if problems else '?'})")
    try:
        frame = pd.read_parquet(out / DATA)
    except Exception as err:  # noqa: BLE001 - any unreadable data file is one refusal naming it
        raise PreregError(f"{out / DATA}: cannot be read to recompute the analysis ({type(err).__name__}: {err})") \
            from None
    try:
        fresh = _plain(analyse(plan, frame))
    except (KeyError, ValueError, TypeError, IndexError) as err:
        raise PreregError(f"{out / DATA}: the analysis cannot be recomputed from it ({type(err).__name__}: {err})") \
            from None
    diff = differences(results.get("analysis"), fresh)
    if diff:
        more = f" and {len(diff) - 4} more" if len(diff) > 4 else ""
        raise PreregError(f"{out / RESULTS} disagrees with the analysis recomputed from {DATA}: "
                          + "; ".join(diff[:4]) + more)
    n = len(fresh["hypotheses"])
    return {"state": "agrees", "text": f"the {n} hypotheses, {len(fresh['exploratory'])} exploratory estimates and "
                                       f"{len(fresh['checks'])} checks recomputed from {DATA} agree with {RESULTS}"}


__all__ = ["recheck_analysis", "differences"]
