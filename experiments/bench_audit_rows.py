"""Audit benchmark: how an audit's phases grow with the rows of its table.

    python experiments/bench_audit_rows.py [--rows 500 2000]

Writes a generated table of each size (every arm present, distinct models, MATH-500 greedy: the CSV
format of docs/audit.md), then times the statistics (:func:`tabsim.audit.core.audit`, no calibration),
the tables and report, and the figure. The last line printed is a JSON object with each phase's
seconds per size, and ``growth``: each phase's seconds per row at the largest size over those at the
smallest (1.0 = linear in rows; a phase that scans the table per row grows with the size ratio).
"""
from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

HEAD = "source_id,paper,table,model,benchmark,samples_per_item,values,gamma,majority_kind,base,random,majority,true\n"


def write_table(path: Path, n: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        b = rng.randint(200, 600) / 10
        rows.append(f"gen,Generated,T1,Model-{i:05d},MATH-500,greedy,absolute,0.5,online,{b:.1f},"
                    f"{b + rng.randint(-20, 40) / 10:.1f},{b + rng.randint(0, 80) / 10:.1f},"
                    f"{b + rng.randint(50, 150) / 10:.1f}")
    path.write_text(HEAD + "\n".join(rows) + "\n", encoding="utf-8")


def measure(n: int, folder: Path) -> dict:
    import matplotlib.pyplot as plt

    from tabsim.audit import load_entries
    from tabsim.audit.core import audit
    from tabsim.audit.figure import plot_terms
    from tabsim.audit.report import csv_safe, render_report

    path = folder / f"rows{n}.csv"
    write_table(path, n)
    entries = load_entries(path)
    t0 = time.perf_counter()
    res = audit(entries, calibrate=False)
    t1 = time.perf_counter()
    for frame in (res.audit, res.terms, res.entries):
        csv_safe(frame).to_csv(folder / "out.csv")
    render_report(res, files=[path], command="bench")
    t2 = time.perf_counter()
    fig = plot_terms(res)
    fig.savefig(folder / "terms.png", dpi=130)
    plt.close(fig)
    t3 = time.perf_counter()
    return {"rows": n, "statistics_s": round(t1 - t0, 3), "tables_report_s": round(t2 - t1, 3),
            "figure_s": round(t3 - t2, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[500, 2000])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runs = [measure(n, Path(tmp)) for n in sorted(args.rows)]
    for r in runs:
        print(f"{r['rows']:>7} rows: statistics {r['statistics_s']:.2f} s, tables and report "
              f"{r['tables_report_s']:.2f} s, figure {r['figure_s']:.2f} s")
    lo, hi = runs[0], runs[-1]
    growth = {k: round((hi[k] / hi["rows"]) / max(lo[k] / lo["rows"], 1e-12), 2)
              for k in ("statistics_s", "tables_report_s", "figure_s")}
    print(json.dumps({"runs": runs, "growth": growth}))


if __name__ == "__main__":
    main()
