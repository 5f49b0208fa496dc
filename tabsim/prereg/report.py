"""``report.md`` and ``report.json`` of a complete pre-registered run.

Every hypothesis appears with its verdict (SUPPORTED / NOT SUPPORTED / INCONCLUSIVE), estimate,
interval and the rule that decided it, whatever the outcome. Amendments and other departures from
the plan are listed as deviations; exploratory results are labelled as such.

An "Integrity" section says what vouches for the record: the signatures of the lock and of the
results (verified; a bad one refuses the report), the code compared with the locked code, the git
commit holding the plan and whether it precedes the run, and seeds shared with a pilot or an
exploratory run. What could not be checked is listed under "Limitations".
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

from tabsim.files.atomic import atomic_write_text, write_json
from tabsim.files.markdown import md
from tabsim.prereg import signing
from tabsim.prereg.assessment import assess
from tabsim.prereg.locking import parse_time
from tabsim.prereg.manipulation import level_text
from tabsim.prereg.results import load_complete, load_run

__all__ = ["assess", "build_report", "deviations", "load_complete", "load_run", "render_markdown",
           "strict_failures", "write_report"]


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
    return ", ".join(f"{k}={level_text(v)}" for k, v in c.items()) or "all"


def _p(x, floor: float = 0.0) -> str:
    if x is None:
        return "n/a"
    return f"<={max(floor, 1e-9):.2g}" if x <= max(floor, 1e-9) else f"{x:.3g}"


def deviations(results: dict, checks: Optional[dict] = None) -> list[dict]:
    """Departures from the locked plan: amendments, unlocked runs, failed checks, timeline problems,
    and those of :func:`assess` (``checks``): changed code, a plan committed late, reused seeds."""
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
    started = parse_time(results["started_utc"], "results.json started_utc")
    if lk and parse_time(lk["locked_at_utc"], "the lock's locked_at_utc") >= started:
        out.append({"kind": "timeline", "text": f"the lock ({lk['locked_at_utc']}) does not precede the run "
                                                f"({results['started_utc']})"})
    for a in pre.get("amendments") or []:
        if parse_time(a["amended_at_utc"], f"amendment {a['n']}'s amended_at_utc") >= started:
            out.append({"kind": "timeline", "text": f"amendment {a['n']} ({a['amended_at_utc']}) does not precede "
                                                    f"the run ({results['started_utc']})"})
    for c in results["analysis"]["checks"]:
        if not c["passed"]:
            out.append({"kind": "failed check", "text": f"manipulation check {c['id']} failed: {c['rule']} "
                                                        f"(observed {_f(c['value'])})"})
    if checks:
        code = [d for d in checks["deviations"] if d["kind"] == "code change"]
        out = code + out + [d for d in checks["deviations"] if d["kind"] != "code change"]
    return out


def strict_failures(rep: dict) -> list[dict]:
    """What ``--strict`` refuses: every deviation, and a plan commit that could not be checked (a plan in
    no git repository, or one not found): nothing then shows that the plan preceded the results."""
    unchecked = [dict(d, kind="commit not checked") for d in rep["limitations"] if d["kind"] == "commit check"]
    return list(rep["deviations"]) + unchecked


def build_report(results: dict, checks: Optional[dict] = None) -> dict:
    """The report as a JSON-ready dict; ``checks`` from :func:`assess` (default: from ``results`` alone)."""
    if checks is None:
        checks = assess(results)
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
        "integrity": {k: v for k, v in checks.items() if k not in ("deviations", "limitations")},
        "deviations": deviations(results, checks),
        "limitations": checks["limitations"],
        "arm_means": results["analysis"]["arm_means"],
        "analysis_plan": {k: results["analysis_settings"][k]
                          for k in ("metric", "alpha", "correction", "ci_method", "n_resamples", "random_state")},
    }


def render_markdown(rep: dict) -> str:
    """Markdown text of :func:`build_report`'s dict."""
    ln = _header_lines(rep) + _integrity_lines(rep)
    for label in ("CONFIRMATORY", "EXPLORATORY"):
        ln += _hypothesis_lines(rep, label)
    ln += _exploratory_lines(rep) + _check_lines(rep) + _deviation_lines(rep) + _arm_mean_lines(rep)
    return "\n".join(ln)


def _header_lines(rep: dict) -> list[str]:
    """Title, plan, lock, run, mode and analysis settings; a warning when the code changed after the lock."""
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
    if any(d["kind"] == "code change" for d in rep["deviations"]):
        ln += ["> **WARNING: the code changed after the lock.** " + rep["integrity"]["code"]["text"]
               + ". The estimates below come from code other than the locked code.", ""]
    return ln


def _integrity_lines(rep: dict) -> list[str]:
    """The Integrity section and the count of confirmatory verdicts."""
    ln = ["## Integrity", ""]
    names = {"lock_signature": "lock signature", "results_signature": "results signature", "code": "code",
             "plan_commit": "plan commit", "seeds": "seeds"}
    for key, name in names.items():
        if key in rep["integrity"]:
            ln.append(f"- {name}: {rep['integrity'][key]['text']}")
    pin = rep["integrity"].get("public_key_pinned")
    ln += [f"- pinned public key: {signing.short(pin) if pin else 'none'}", ""]
    c = rep["confirmatory_counts"]
    ln += [f"Confirmatory hypotheses: {c['SUPPORTED']} SUPPORTED, {c['NOT SUPPORTED']} NOT SUPPORTED, "
           f"{c['INCONCLUSIVE']} INCONCLUSIVE.", ""]
    return ln


def _hypothesis_lines(rep: dict, label: str) -> list[str]:
    """The table and the verdicts of the hypotheses labelled ``label`` (none: no lines)."""
    hs = [h for h in rep["hypotheses"] if h["label"] == label]
    if not hs:
        return []
    ln = [f"## {'Confirmatory hypotheses' if label == 'CONFIRMATORY' else 'Exploratory hypotheses (EXPLORATORY: not confirmatory)'}",
          "", "| id | estimand | condition | estimate | interval | rule | p (adjusted) | verdict |",
          "|---|---|---|---|---|---|---|---|"]
    for h in hs:
        p = "n/a" if h["p_rule"] is None else f"{_p(h['p_rule'], h.get('p_floor', 0))} ({_p(h['p_adjusted'])})"
        ln.append(f"| {md(h['id'])} | {md(h['estimand'])} | {md(_cond(h['condition']))} | {_f(h['estimate'])} | "
                  f"{round(100 * h['ci_level'])}% [{_f(h['ci_low'])}, {_f(h['ci_high'])}] | {md(h['rule_text'])} | "
                  f"{p} | **{h['verdict']}** |")
    ln.append("")
    for h in hs:
        src = f" (source: {h['source']})" if h.get("source") else ""
        ln += [f"- **{h['id']}** ({label.lower()}){src}: {h['statement']}",
               f"  - **{h['verdict']}**: {h['reason']}. Interval: {h['ci_method']}, {h['n_seeds']} seeds"
               f"{' per cell' if h['estimand'] == 'interaction_ratio' or h['estimand'].startswith('coefficient:') else ''}."]
    ln.append("")
    return ln


def _exploratory_lines(rep: dict) -> list[str]:
    if not rep["exploratory"]:
        return []
    ln = ["## Exploratory analyses (EXPLORATORY: not confirmatory, no correction)", "",
          "| id | estimand | condition | estimate | interval | description |", "|---|---|---|---|---|---|"]
    for e in rep["exploratory"]:
        ln.append(f"| {md(e['id'])} | {md(e['estimand'])} | {md(_cond(e['condition']))} | {_f(e['estimate'])} | "
                  f"{round(100 * e['ci_level'])}% [{_f(e['ci_low'])}, {_f(e['ci_high'])}] | {md(e['description'])} |")
    ln.append("")
    return ln


def _check_lines(rep: dict) -> list[str]:
    if not rep["checks"]:
        return []
    ln = ["## Manipulation checks", "", "| id | condition | rule | observed | passed |", "|---|---|---|---|---|"]
    for ch in rep["checks"]:
        ln.append(f"| {md(ch['id'])} | {md(_cond(ch.get('condition', {})))} | {md(ch['rule'])} | {_f(ch['value'])} | "
                  f"{'yes' if ch['passed'] else '**NO**'} |")
    ln.append("")
    return ln


def _deviation_lines(rep: dict) -> list[str]:
    """Deviations from the plan and the limitations of the record, each section saying when it is empty."""
    ln = ["## Deviations from the plan", ""]
    if rep["deviations"]:
        for d in rep["deviations"]:
            ln.append(f"- **{d['kind']}**: {d['text']}")
    else:
        ln.append("None: the run used the locked plan unchanged (see Integrity and Limitations for what vouches "
                  "for this).")
    ln += ["", "## Limitations of this record", ""]
    if rep["limitations"]:
        for d in rep["limitations"]:
            ln.append(f"- **{d['kind']}**: {d['text']}")
    else:
        ln.append("None: every check above could be made.")
    ln.append("")
    return ln


def _arm_mean_lines(rep: dict) -> list[str]:
    if not rep["arm_means"]:
        return []
    keys = [k for k in rep["arm_means"][0] if k not in ("arm", "mean", "sem", "count")]
    ln = ["## Descriptive: final metric per condition and arm (mean +/- s.e. over seeds)", "",
          "| " + " | ".join([md(k) for k in keys] + ["arm", "mean", "s.e.", "seeds"]) + " |",
          "|" + "---|" * (len(keys) + 4)]
    for r in rep["arm_means"]:
        ln.append("| " + " | ".join([md(level_text(r[k])) for k in keys] + [md(r["arm"]), _f(r["mean"]), _f(r["sem"], ".2g"),
                                                                  str(r["count"])]) + " |")
    ln.append("")
    return ln


def write_report(out: str | Path, public_key: Optional[str] = None) -> dict:
    """Write ``report.md`` and ``report.json`` for a complete run folder; return the report dict.

    ``public_key`` pins the key the lock and results must be signed with (a fingerprint, see
    :func:`signing.pinned`; the CLI also reads ``$TABSIM_PREREG_PUBKEY``).
    """
    out = Path(out)
    public_key = signing.parse_pin(public_key) if public_key else None
    results, status = load_run(out, public_key)
    rep = build_report(results, assess(results, status, out, public_key))
    write_json(out / "report.json", rep)
    atomic_write_text(out / "report.md", render_markdown(rep))
    return rep


def _interval_method(plan: dict) -> str:
    """The interval method, with its resampling settings only where it resamples."""
    method = plan["ci_method"]
    if method == "t":
        return "t (Student t over seeds)"
    return f"{method} ({plan['n_resamples']} resamples, random_state {plan['random_state']})"
