"""Committed results, studies and docs hold no absolute path of the machine that wrote them
(``/work/...``, ``/root/...``, ``/home/NAME/...``, ``/Users/NAME/...``)."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ("preregistration", "experiments", "docs", "notebooks", "README.md")
MACHINE_PATH = re.compile(r"(?<![\w.:/~-])/(?:work|root|home/[^/\s\"'`]+|Users/[^/\s\"'`]+)/")

# Run records signed by a key the repository does not hold, written before runs recorded portable paths:
# rewriting them needs the key holder to rerun the study. Each listed file must still hold such a path
# and its run must still be signed, so the entry goes once the run is redone.
SIGNED_RECORDS = {
    "preregistration/clipping_priors/results": ("report.json", "report.md", "results.json", "status.json"),
}


def committed_files() -> list[str]:
    """The committed files under :data:`CHECKED` (every file there, outside a git checkout)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--", *CHECKED], cwd=ROOT, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        out = None
    if out is not None and out.returncode == 0 and out.stdout:
        return sorted(p for p in out.stdout.decode().split("\0") if p)
    found = [p for name in CHECKED for p in ([ROOT / name] if (ROOT / name).is_file() else (ROOT / name).rglob("*"))]
    return sorted(p.relative_to(ROOT).as_posix() for p in found if p.is_file())


def machine_paths(rel: str) -> list[str]:
    """The machine paths in a committed text file (none in a binary one)."""
    path = ROOT / rel
    if not path.is_file():  # deleted in the work tree, not yet in git
        return []
    data = path.read_bytes()
    if b"\0" in data:
        return []
    return [line.strip()[:160] for line in data.decode("utf-8", "replace").splitlines() if MACHINE_PATH.search(line)]


def test_the_pattern_finds_machine_paths_and_nothing_else():
    for text in ('"file": "/work/main/plan.yaml"', "`/root/.cache/x`", "/home/alice/tabsim", "'/Users/bob/x'"):
        assert MACHINE_PATH.search(text), text
    for text in ("https://example.org/work/x", "docs/work/notes", "~/work/x", "/tmp/rerun", "/home/", "a /work"):
        assert not MACHINE_PATH.search(text), text


def test_no_committed_file_holds_a_machine_path():
    exempt = {f"{folder}/{name}" for folder, names in SIGNED_RECORDS.items() for name in names}
    found = {rel: hits for rel in committed_files() if rel not in exempt and (hits := machine_paths(rel))}
    assert not found, ("absolute machine paths in committed files (record paths relative to the repository):\n"
                       + "\n".join(f"{rel}: {hits[0]}" for rel, hits in found.items()))


def test_signed_records_exempted_still_need_the_exemption():
    for folder, names in SIGNED_RECORDS.items():
        status = json.loads((ROOT / folder / "status.json").read_text())
        assert status.get("signature"), f"{folder}: no longer signed; rewrite it and drop it from SIGNED_RECORDS"
        for name in names:
            assert machine_paths(f"{folder}/{name}"), f"{folder}/{name}: holds no machine path now; drop it"
