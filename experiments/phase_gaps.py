"""Silences of a command: run it, stamp what it writes on stderr, report its longest silences and wall time.

    python experiments/phase_gaps.py tabsim sweep --vary prior_strength=0.2,0.5,0.8 --out results/gaps

Each stderr segment (a line, or a progress bar's redraw: tqdm writes ``\\r`` and then its text) is
stamped with the arrival of its first byte, in seconds since the command started (stamping at the
separator would date every bar redraw one redraw late). Prints every segment with its time, stdout's
lines, the wall time, and each silence longer than ``--gap`` seconds (default 2) with the segment that
ended it. The issue-34 check: a command's printed time against this wall time, and no silence over 2 s
that no line announced.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time


def main(argv: list[str]) -> int:
    gap = 2.0
    if argv[:1] == ["--gap"]:
        gap, argv = float(argv[1]), argv[2:]
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, stdout=subprocess.PIPE)
    out: list[tuple[float, str]] = []

    def read_stdout():
        for line in proc.stdout:
            out.append((time.monotonic() - t0, line.decode(errors="replace").rstrip()))

    reader = threading.Thread(target=read_stdout)
    reader.start()
    events: list[tuple[float, str]] = []
    buf, started = b"", None
    while chunk := os.read(proc.stderr.fileno(), 4096):
        now = time.monotonic() - t0
        for byte in chunk:
            if byte in (10, 13):  # \n, \r
                if buf.strip():
                    events.append((started, buf.decode(errors="replace").strip()))
                buf, started = b"", None
            else:
                started = now if started is None else started
                buf += bytes([byte])
    if buf.strip():
        events.append((started, buf.decode(errors="replace").strip()))
    proc.wait()
    reader.join()
    wall = time.monotonic() - t0
    for t, text in events:
        print(f"[{t:7.2f}] {text[:150]}")
    for t, text in out:
        print(f"[{t:7.2f}] stdout: {text[:150]}")
    marks = [(0.0, "<start>")] + events + [(wall, "<exit>")]
    silences = [(b[0] - a[0], a[0], b[1]) for a, b in zip(marks, marks[1:])]
    print(f"wall {wall:.2f} s, exit status {proc.returncode}, longest silence {max(silences)[0]:.2f} s")
    for length, since, ended_by in silences:
        if length > gap:
            print(f"  silent {length:.2f} s from {since:.2f} s, until: {ended_by[:100]}")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
