"""No committed file (results, studies, docs, code, metadata) holds an absolute path of the machine that
wrote it (``/work/...``, ``/root/...``, ``/home/NAME/...``, ``/Users/NAME/...``)."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIPPED = "tests"  # whose fixtures write made-up machine paths on purpose
MACHINE_PATH = re.compile(r"(?<![\w.:/~-])/(?:work|root|home/[^/\s\"'`]+|Users/[^/\s\"'`]+)/")


def committed_files() -> list[str]:
    """The committed files outside :data:`SKIPPED` (outside a git checkout, every file but those in hidden
    folders and build leftovers)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--", ".", f":(exclude){SKIPPED}"], cwd=ROOT,
                             capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        out = None
    if out is not None and out.returncode == 0 and out.stdout:
        return sorted(p for p in out.stdout.decode().split("\0") if p)
    found = (p.relative_to(ROOT) for p in ROOT.rglob("*") if p.is_file())
    return sorted(p.as_posix() for p in found if p.parts[0] != SKIPPED
                  and not any(x.startswith(".") or x == "__pycache__" or x.endswith(".egg-info") for x in p.parts[:-1]))


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
    found = {rel: hits for rel in committed_files() if (hits := machine_paths(rel))}
    assert not found, ("absolute machine paths in committed files (record paths relative to the repository):\n"
                       + "\n".join(f"{rel}: {hits[0]}" for rel, hits in found.items()))

