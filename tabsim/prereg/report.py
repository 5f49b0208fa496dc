"""``report.md`` and ``report.json`` of a complete pre-registered run.

Every hypothesis appears with its verdict (SUPPORTED / NOT SUPPORTED / INCONCLUSIVE), estimate,
interval and the rule that decided it, whatever the outcome. Amendments and other departures from
the plan are listed as deviations; exploratory results are labelled as such.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from tabsim.io import atomic_write_text, write_json
from tabsim.prereg.runner import RESULTS, STATUS, file_sha256, read_status
from tabsim.prereg.schema import PreregError


def load_complete(out: str | Path) -> dict:
    """``results.json`` of a run folder, after checking that the run completed and is unaltered."""
    out = Path(out)
    status = read_status(out)
    if status is None:
        raise PreregError(f"{out}: no {STATUS}; not a pre-registered run folder")
    state = status.get("state")
    if state != "complete":
        extra = f" ({status.get('error')})" if status.get("error") else ""
        raise PreregError(f"{out}: the run is not complete (state {state!r}{extra}); an incomplete run has no "
                          f"report. Rerun `tabsim prereg run` into this folder")
    for name, digest in (status.get("files") or {}).items():
        p = out / name
        if not p.is_file():
            raise PreregError(f"{out}: {name} is missing although the run was marked complete")
        if file_sha256(p) != digest:
            raise PreregError(f"{out}: {name} changed after the run completed (sha256 mismatch)")
    if not status.get("files"):
        raise PreregError(f"{out}: {STATUS} lists no result files; not a complete run")
    return json.loads((out / RESULTS).read_text())


def _f(x, spec: str = ".4f") -> str:
    if x is None:
        return "n/a"
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:{spec}}"


def _cond(c: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in c.items()) or "all"


def _p(x, floor: float = 0.0) -> str:
    if x is None:
        return "n/a"
    return f"<={max(floor, 1e-9):.2g}" if x <= max(floor, 1e-9) else f"{x:.3g}"


def deviations(results: dict) -> list[dict]:
    """Departures from the locked plan: amendments, unlocked runs, failed checks, timeline problems."""
    out = []
    pre = results["prereg"]
    if results["mode"] != "confirmatory":
        out.append({"kind": "unlocked run", "text": "run in exploratory mode without a verified lock: no result "
                                                    "below is confirmatory"})
    for a in pre.get("amendments") or []:
        out.append({"kind": "amendment", "n": a["n"], "time_utc": a["amended_at_utc"], "reason": a["reason"],
                    "changed_fields": a["changed_fields"], "old_sha256": a["old_sha256"],
                    "new_sha256": a["new_sha256"],
                    "text": f"amendment {a['n']} ({a['amended_at_utc']}): {a['reason']} -- changed "
                            f"{', '.join(a['changed_fields'])}"})
    lk = pre.get("lock")
    if lk and lk["locked_at_utc"] >= results["started_utc"]:
        out.append({"kind": "timeline", "text": f"the lock ({lk['locked_at_utc']}) does not precede the run "
                                                f"({results['started_utc']})"})
    for c in results["analysis"]["checks"]:
        if not c["passed"]:
            out.append({"kind": "failed check", "text": f"manipulation check {c['id']} failed: {c['rule']} "
                                                        f"(observed {_f(c['value'])})"})
    return out


def build_report(results: dict) -> dict:
    """The report as a JSON-ready dict."""
    pre = results["prereg"]
    lk = pre.get("lock") or {}
    hyps = results["analysis"]["hypotheses"]
    labelled = []
    for h in hyps:
        label = "CONFIRMATORY" if (h["kind"] == "confirmatory" and results["mode"] == "confirmatory") else "EXPLORATORY"
        labelled.append({k: h[k] for k in ("id", "statement", "estimand", "condition", "prediction", "rule",
                                           "rule_text", "estimate", "ci_low", "ci_high", "ci_level", "ci_method",
                                           "n_seeds", "p_rule", "p_floor", "p_adjusted", "verdict", "reason", "source",
                                           "detail")
                         if k in h} | {"label": label})
    counts = {v: sum(1 for h in labelled if h["verdict"] == v and h["label"] == "CONFIRMATORY")
              for v in ("SUPPORTED", "NOT SUPPORTED", "INCONCLUSIVE")}
    return {
        "schema": "tabsim.prereg.report/1",
        "title": results["title"],
        "mode": results["mode"],
        "prereg_file": pre["file"],
        "prereg_sha256": pre["sha256"],
        "locked_at_utc": lk.get("locked_at_utc"),
        "lock_git_commit": lk.get("git_commit"),
        "lock_tabsim_version": lk.get("tabsim_version"),
        "run_started_utc": results["started_utc"],
        "run_finished_utc": results["finished_utc"],
        "run_git_commit": results["provenance"].get("git_commit"),
        "run_tabsim_version": results["provenance"].get("tabsim_version"),
        "confirmatory_counts": counts,
        "hypotheses": labelled,
        "exploratory": [dict(e, label="EXPLORATORY") for e in results["analysis"]["exploratory"]],
        "checks": results["analysis"]["checks"],
        "deviations": deviations(results),
        "arm_means": results["analysis"]["arm_means"],
        "analysis_plan": {k: results["analysis_settings"][k]
                          for k in ("metric", "alpha", "correction", "ci_method", "n_resamples", "random_state")},
    }


def render_markdown(rep: dict) -> str:
    """Markdown text of :func:`build_report`'s dict."""
    ln = [f"# Pre-registration report: {rep['title']}", ""]
    ln += [f"- plan: `{rep['prereg_file']}`, sha256 `{rep['prereg_sha256']}`",
           f"- locked: {rep['locked_at_utc'] or 'NOT LOCKED'} (git {rep['lock_git_commit'] or 'n/a'}, "
           f"tabsim {rep['lock_tabsim_version'] or 'n/a'})",
           f"- run: {rep['run_started_utc']} -> {rep['run_finished_utc']} (git {rep['run_git_commit'] or 'n/a'}, "
           f"tabsim {rep['run_tabsim_version']})",
           f"- mode: **{rep['mode']}**",
           f"- analysis: metric {rep['analysis_plan']['metric']}, alpha {rep['analysis_plan']['alpha']}, correction "
           f"{rep['analysis_plan']['correction']}, intervals {_interval_method(rep['analysis_plan'])}",
           ""]
    c = rep["confirmatory_counts"]
    ln += [f"Confirmatory hypotheses: {c['SUPPORTED']} SUPPORTED, {c['NOT SUPPORTED']} NOT SUPPORTED, "
           f"{c['INCONCLUSIVE']} INCONCLUSIVE.", ""]
    for label in ("CONFIRMATORY", "EXPLORATORY"):
        hs = [h for h in rep["hypotheses"] if h["label"] == label]
        if not hs:
            continue
        ln += [f"## {'Confirmatory hypotheses' if label == 'CONFIRMATORY' else 'Exploratory hypotheses (EXPLORATORY: not confirmatory)'}",
               "", "| id | estimand | condition | estimate | interval | rule | p (adjusted) | verdict |",
               "|---|---|---|---|---|---|---|---|"]
        for h in hs:
            p = "n/a" if h["p_rule"] is None else f"{_p(h['p_rule'], h.get('p_floor', 0))} ({_p(h['p_adjusted'])})"
            ln.append(f"| {h['id']} | {h['estimand']} | {_cond(h['condition'])} | {_f(h['estimate'])} | "
                      f"{round(100 * h['ci_level'])}% [{_f(h['ci_low'])}, {_f(h['ci_high'])}] | {h['rule_text']} | "
                      f"{p} | **{h['verdict']}** |")
        ln.append("")
        for h in hs:
            src = f" (source: {h['source']})" if h.get("source") else ""
            ln += [f"- **{h['id']}** ({label.lower()}){src}: {h['statement']}",
                   f"  - **{h['verdict']}**: {h['reason']}. Interval: {h['ci_method']}, {h['n_seeds']} seeds"
                   f"{' per cell' if h['estimand'] == 'interaction_ratio' or h['estimand'].startswith('coefficient:') else ''}."]
        ln.append("")
    if rep["exploratory"]:
        ln += ["## Exploratory analyses (EXPLORATORY: not confirmatory, no correction)", "",
               "| id | estimand | condition | estimate | interval | description |", "|---|---|---|---|---|---|"]
        for e in rep["exploratory"]:
            ln.append(f"| {e['id']} | {e['estimand']} | {_cond(e['condition'])} | {_f(e['estimate'])} | "
                      f"{round(100 * e['ci_level'])}% [{_f(e['ci_low'])}, {_f(e['ci_high'])}] | {e['description']} |")
        ln.append("")
    if rep["checks"]:
        ln += ["## Manipulation checks", "", "| id | condition | rule | observed | passed |", "|---|---|---|---|---|"]
        for ch in rep["checks"]:
            ln.append(f"| {ch['id']} | {_cond(ch.get('condition', {}))} | {ch['rule']} | {_f(ch['value'])} | "
                      f"{'yes' if ch['passed'] else '**NO**'} |")
        ln.append("")
    ln += ["## Deviations from the plan", ""]
    if rep["deviations"]:
        for d in rep["deviations"]:
            ln.append(f"- **{d['kind']}**: {d['text']}")
    else:
        ln.append("None: the run used the locked plan unchanged.")
    ln.append("")
    if rep["arm_means"]:
        keys = [k for k in rep["arm_means"][0] if k not in ("arm", "mean", "sem", "count")]
        ln += ["## Descriptive: final metric per condition and arm (mean +/- s.e. over seeds)", "",
               "| " + " | ".join(keys + ["arm", "mean", "s.e.", "seeds"]) + " |",
               "|" + "---|" * (len(keys) + 4)]
        for r in rep["arm_means"]:
            ln.append("| " + " | ".join([str(r[k]) for k in keys] + [r["arm"], _f(r["mean"]), _f(r["sem"], ".2g"),
                                                                      str(r["count"])]) + " |")
        ln.append("")
    return "\n".join(ln)


def write_report(out: str | Path) -> dict:
    """Write ``report.md`` and ``report.json`` for a complete run folder; return the report dict."""
    out = Path(out)
    rep = build_report(load_complete(out))
    write_json(out / "report.json", rep)
    atomic_write_text(out / "report.md", render_markdown(rep))
    return rep


def _interval_method(plan: dict) -> str:
    """The interval method, with its resampling settings only where it resamples."""
    method = plan["ci_method"]
    if method == "t":
        return "t (Student t over seeds)"
    return f"{method} ({plan['n_resamples']} resamples, random_state {plan['random_state']})"
