"""Audit benchmark, end to end: ``tabsim audit`` on generated tables of 300, 3,000 and 30,000 rows.

    python experiments/bench_audit.py [--rows 300 3000 30000] [--tabsim PATH] [--pythonpath DIR]

Each table is the CSV format of docs/audit.md (every arm present, distinct models, MATH-500 greedy:
:func:`bench_audit_rows.write_table`), so no calibration runs. The command runs as a subprocess from
a scratch folder (not this checkout, so ``--pythonpath`` can point at another copy of tabsim), once per
size, and is timed whole: start-up, reading, statistics, fragility, tables, report and figure. Peak
RSS is the child's (``resource.getrusage(RUSAGE_CHILDREN)`` read in a fresh wrapper process per size,
since that figure is the maximum over every child a process has waited for).

Prints one line per size (wall seconds, peak RSS, rows per second, the audit's own estimate), the
ratio of wall seconds per 10x rows (linear in rows: about 10; start-up makes the small sizes' ratio
lower), and a last line with the figures as JSON.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_audit_rows import write_table  # noqa: E402  (the generated table shared with the phase benchmark)

# Runs the command given as its arguments and prints the child's peak RSS (KiB on Linux) as its last line.
WRAPPER = ("import resource, subprocess, sys\n"
           "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=open(sys.argv[0] + '.err', 'w')"
           ").returncode\n"
           "print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")


def measure(n: int, folder: Path, tabsim: str, env: dict) -> dict:
    """One ``tabsim audit`` of an ``n``-row table: wall seconds, peak RSS, the estimate it printed."""
    table = folder / f"rows{n}.csv"
    write_table(table, n)
    wrapper = folder / f"wrap{n}.py"
    wrapper.write_text(WRAPPER)
    cmd = [sys.executable, str(wrapper), tabsim, "audit", str(table), "--out", str(folder / f"out{n}")]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - t0
    rc, rss_kib = (int(x) for x in out.split()[-2:])
    err = Path(str(wrapper) + ".err").read_text()
    if rc != 0:
        raise SystemExit(f"tabsim audit of {n} rows exited {rc}:\n{err[-2000:]}")
    m = re.search(r"expected about ([^(]+?) \(", err)
    return {"rows": n, "bytes": table.stat().st_size, "wall_s": round(wall, 2), "peak_rss_mib": round(rss_kib / 1024, 1),
            "rows_per_s": round(n / wall, 1), "estimate": m.group(1) if m else ""}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[300, 3000, 30000])
    ap.add_argument("--tabsim", default=str(Path(sys.executable).parent / "tabsim"), help="the tabsim executable")
    ap.add_argument("--pythonpath", default=None, help="PYTHONPATH of the command (another copy of tabsim)")
    args = ap.parse_args()
    env = dict(os.environ)
    if args.pythonpath:
        env["PYTHONPATH"] = args.pythonpath
    with tempfile.TemporaryDirectory() as tmp:
        runs = [measure(n, Path(tmp), args.tabsim, env) for n in sorted(args.rows)]
    for r in runs:
        print(f"{r['rows']:>7} rows ({r['bytes'] / 2 ** 20:.2f} MiB): {r['wall_s']:.1f} s wall, peak RSS "
              f"{r['peak_rss_mib']:.0f} MiB, {r['rows_per_s']:.0f} rows/s (estimate printed: {r['estimate']})")
    ratios = []
    for a, b in zip(runs, runs[1:]):
        per10 = (b["wall_s"] / a["wall_s"]) ** (1.0 / math.log10(b["rows"] / a["rows"]))
        ratios.append({"from": a["rows"], "to": b["rows"], "wall_ratio_per_10x_rows": round(per10, 2)})
        print(f"{a['rows']} -> {b['rows']} rows: wall x{b['wall_s'] / a['wall_s']:.2f}, "
              f"{per10:.2f}x per 10x rows (linear: about 10)")
    print(json.dumps({"runs": runs, "ratios": ratios}))


if __name__ == "__main__":
    main()
