"""The run-folder status protocol: the file names of a pre-registered run and the reader of its status.

``status.json`` is written first with ``state: running``; ``data.parquet`` and ``results.json``
follow; only then is ``status.json`` rewritten with ``state: complete`` and the SHA-256 of every
result file (:data:`RESULT_FILES`), signed when a key is given (:mod:`tabsim.prereg.runner`
writes it, :mod:`tabsim.prereg.report` checks it).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

STATUS = "status.json"
RESULTS = "results.json"
DATA = "data.parquet"
REPORT_FILES = ("report.md", "report.json")
RESULT_FILES = (RESULTS, DATA)


def read_status(out: str | Path) -> Optional[dict]:
    """``status.json`` of the run folder ``out``: None when absent, ``{"state": "corrupted"}`` when not JSON."""
    p = Path(out) / STATUS
    if not p.is_file():
        return None
    try:
        return json.loads(p.read_text())
    except json.JSONDecodeError:
        return {"state": "corrupted"}
