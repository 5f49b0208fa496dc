"""What a lock records besides the plan: the code, the plan's git commit, and seeds used earlier.

* **Code digest.** The SHA-256 of the manifest of tabsim's ``.py`` files: one line
  ``<sha256 of the file>  <path>`` per file, paths relative to the folder holding the package
  (``tabsim/runtime/run.py``), sorted. It equals ``cd <site> && find tabsim -name '*.py' -not -path
  '*/__pycache__/*' | LC_ALL=C sort | xargs sha256sum | sha256sum``. The lock keeps each file's
  digest too, so a changed file can be named, and the versions of tabsim and its numerical
  libraries (jax, jaxlib, numpy, scipy, statsmodels).
* **What runs.** Python may run cached bytecode instead of a source; :mod:`tabsim.prereg.bytecode`
  refuses cached bytecode that was not compiled from the present source, and compiled files that
  could be imported instead of one, so that the digest covers what executes (``lock`` and a
  confirmatory ``run`` refuse such a tree, ``validate`` reports it).
* **Plan commit.** The oldest commit (reachable from HEAD) in which the plan file has content that
  hashes to the locked hash; its commit time must precede the run. Outside a git repository the
  check cannot be made, and the record says so.
* **Earlier seeds.** Seeds of a pilot (``pilot.json`` beside the plan: ``seeds`` as a list, or
  ``first_seed`` with ``pilot_seeds`` / ``pilot_seeds_per_cell``) and of exploratory runs of the
  plan (logged in ``FILE.exploratory.json``), compared with the confirmatory seeds.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import re
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Optional

import tabsim
from tabsim.files.atomic import write_json
from tabsim.prereg.bytecode import bytecode_problems
from tabsim.prereg.hashing import plan_hash, read_json
from tabsim.prereg.schema import PreregError, read_document

LIBRARIES = ("tabsim", "jax", "jaxlib", "numpy", "scipy", "statsmodels")
EXPLORATORY_SCHEMA = "tabsim.prereg.exploratory/1"
PILOT_FILE = "pilot.json"
_GIT_TIMEOUT = 10
_MAX_COMMITS = 500
_COMMIT = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


# ----------------------------------------------------------------------------- code


def code_root() -> Path:
    """The folder of the installed tabsim package (its ``.py`` files are what the digest covers)."""
    return Path(tabsim.__file__).resolve().parent


def executed_code_problems() -> list[str]:
    """How the code this process runs differs from the sources of the tabsim it imported (cached bytecode
    not compiled from them, compiled files importable instead of them): :func:`bytecode_problems`."""
    return bytecode_problems(Path(tabsim.__file__).resolve().parent, "tabsim")


def refuse_stale_code(what: str) -> None:
    """Raise :class:`PreregError` when the code Python runs is not the source a code digest covers."""
    problems = executed_code_problems()
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise PreregError(f"{what}: the code Python runs is not the tabsim source the code digest covers: "
                          f"{problems[0]}{more}. Delete the __pycache__ folders under {code_root()} (or reinstall "
                          f"tabsim) and try again")


def library_versions() -> dict:
    """Installed versions of tabsim and the numerical libraries (None where not installed)."""
    out = {}
    for name in LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def code_digest(root: Optional[str | Path] = None) -> dict:
    """Digest of the package source under ``root`` (default: the installed tabsim) and library versions.

    Returns:
      ``{"sha256", "n_files", "files": {relative path: sha256}, "versions": {...}}``.
    """
    root = Path(root) if root is not None else code_root()
    files = {}
    for p in root.rglob("*.py"):
        rel = p.relative_to(root.parent)
        if "__pycache__" in rel.parts or not p.is_file():
            continue
        files[rel.as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    files = dict(sorted(files.items()))
    manifest = "".join(f"{digest}  {rel}\n" for rel, digest in files.items())
    return {"sha256": hashlib.sha256(manifest.encode()).hexdigest(), "n_files": len(files), "files": files,
            "versions": library_versions()}


def code_changes(locked: dict, current: dict) -> dict:
    """What differs between two :func:`code_digest` records: files changed/added/removed, versions."""
    a, b = locked.get("files") or {}, current.get("files") or {}
    va, vb = locked.get("versions") or {}, current.get("versions") or {}
    return {
        "changed": sorted(k for k in a.keys() & b.keys() if a[k] != b[k]),
        "added": sorted(b.keys() - a.keys()),
        "removed": sorted(a.keys() - b.keys()),
        "versions": {k: [va.get(k), vb.get(k)] for k in sorted(va.keys() | vb.keys()) if va.get(k) != vb.get(k)},
        "locked_sha256": locked.get("sha256"),
        "run_sha256": current.get("sha256"),
    }


def code_same(diff: dict) -> bool:
    return diff["locked_sha256"] == diff["run_sha256"] and not diff["versions"]


def describe_changes(diff: dict, limit: int = 8) -> str:
    """One line naming the changed files and versions of :func:`code_changes`."""
    parts = []
    for kind in ("changed", "added", "removed"):
        names = diff[kind]
        if names:
            more = f" and {len(names) - limit} more" if len(names) > limit else ""
            parts.append(f"{kind} {', '.join(names[:limit])}{more}")
    for name, (old, new) in diff["versions"].items():
        parts.append(f"{name} {old} -> {new}")
    if not parts:
        parts.append(f"source sha256 {str(diff['locked_sha256'])[:12]} -> {str(diff['run_sha256'])[:12]}")
    return "; ".join(parts)


# ----------------------------------------------------------------------------- git


def _git(args: list[str], cwd: Path) -> Optional[str]:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=_GIT_TIMEOUT)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.decode("utf-8", "replace") if out.returncode == 0 else None


def _git_bytes(args: list[str], cwd: Path) -> Optional[bytes]:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=_GIT_TIMEOUT)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def repo_root(path: str | Path) -> Optional[Path]:
    """The top folder of the git work tree holding ``path``, or None."""
    path = Path(path).resolve()
    where = path if path.is_dir() else path.parent
    if not where.is_dir():
        return None
    top = _git(["rev-parse", "--show-toplevel"], where)
    return Path(top.strip()) if top and top.strip() else None


def _utc(epoch: int) -> str:
    return _dt.datetime.fromtimestamp(epoch, _dt.timezone.utc).isoformat()


def _hash_blob(data: bytes, name: str) -> Optional[str]:
    """The plan hash of a plan file's content read from git (None if it does not parse)."""
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / Path(name).name
        p.write_bytes(data)
        try:
            return plan_hash(read_document(p))
        except (PreregError, ValueError):
            return None


def plan_commit(path: str | Path, sha256: str) -> dict:
    """Find the oldest commit whose copy of the plan at ``path`` hashes to ``sha256``.

    Returns:
      ``{"state": "committed", "commit", "commit_time_utc", "repo_path", "sha256"}``;
      ``{"state": "not committed", "repo_path", "sha256"}`` when no commit holds that content; or
      ``{"state": "no repository"}`` outside a git work tree.
    """
    path = Path(path).resolve()
    top = repo_root(path)
    if top is None:
        return {"state": "no repository", "sha256": sha256}
    rel = path.relative_to(top.resolve()).as_posix()
    log = _git(["log", f"--max-count={_MAX_COMMITS}", "--format=%H %ct", "--", rel], top) or ""
    for line in reversed(log.split("\n")):
        if not line.strip():
            continue
        commit, epoch = line.split()
        blob = _git_bytes(["show", f"{commit}:{rel}"], top)
        if blob is not None and _hash_blob(blob, rel) == sha256:
            return {"state": "committed", "commit": commit, "commit_time_utc": _utc(int(epoch)), "repo_path": rel,
                    "sha256": sha256}
    return {"state": "not committed", "repo_path": rel, "sha256": sha256}


def recheck_commit(record: dict, where: str | Path) -> dict:
    """Re-verify a recorded plan commit in the repository holding ``where``.

    Returns:
      ``{"state": "confirmed" | "mismatch" | "unknown commit" | "no repository", "text"}``.
    """
    commit, rel = record.get("commit"), record.get("repo_path")
    if not (isinstance(commit, str) and _COMMIT.match(commit) and isinstance(rel, str) and rel
            and not rel.startswith(("-", "/")) and ".." not in rel.split("/")
            and isinstance(record.get("sha256"), str) and isinstance(record.get("commit_time_utc"), str)):
        return {"state": "mismatch", "text": "the recorded plan commit is malformed"}
    top = repo_root(where)
    if top is None:
        return {"state": "no repository", "text": "the recorded commit was not re-checked (no git repository here)"}
    info = _git(["show", "-s", "--format=%ct", commit, "--"], top)
    if info is None or not info.strip():
        return {"state": "unknown commit", "text": f"the recorded plan commit {commit[:10]} is not in the repository "
                                                   f"holding the run folder"}
    blob = _git_bytes(["show", f"{commit}:{rel}"], top)
    got = _hash_blob(blob, rel) if blob is not None else None
    if got != record["sha256"]:
        return {"state": "mismatch", "text": f"the plan at commit {commit[:10]} ({rel}) hashes to "
                                             f"{str(got)[:12]}, not to the recorded {record['sha256'][:12]}"}
    if _utc(int(info.split()[0])) != record["commit_time_utc"]:
        return {"state": "mismatch", "text": f"commit {commit[:10]} has time {_utc(int(info.split()[0]))}, not the "
                                             f"recorded {record['commit_time_utc']}"}
    return {"state": "confirmed", "text": "re-checked in the repository holding the run folder"}


def commit_precedes(record: dict, started_utc: str) -> bool:
    return _dt.datetime.fromisoformat(record["commit_time_utc"]) < _dt.datetime.fromisoformat(started_utc)


# ----------------------------------------------------------------------------- seeds


def design_seeds(doc: dict) -> list[int]:
    """The seeds of a plan's design: ``first_seed`` .. ``first_seed + seeds - 1``."""
    d = doc["design"]
    return list(range(int(d.get("first_seed", 0)), int(d.get("first_seed", 0)) + int(d["seeds"])))


def exploratory_log_path(path: str | Path) -> Path:
    path = Path(path)
    return path.with_name(path.name + ".exploratory.json")


def log_exploratory_run(path: str | Path, entry: dict) -> None:
    """Append an exploratory run (its folder, start time, plan hash, seeds) to ``FILE.exploratory.json``."""
    lp = exploratory_log_path(path)
    runs = _exploratory_runs(path) if lp.is_file() else []
    key = (entry["out"], entry["started_utc"])
    if any((r.get("out"), r.get("started_utc")) == key for r in runs):
        return
    write_json(lp, {"schema": EXPLORATORY_SCHEMA, "file": Path(path).name, "runs": [*runs, entry]})


def _exploratory_runs(path: str | Path) -> list[dict]:
    lp = exploratory_log_path(path)
    data = read_json(lp, "exploratory-runs log")
    if not isinstance(data, dict) or data.get("schema") != EXPLORATORY_SCHEMA or not isinstance(data.get("runs"), list):
        raise PreregError(f"{lp}: corrupted exploratory-runs log (expected schema {EXPLORATORY_SCHEMA!r} with a "
                          f"list of runs)")
    return [r for r in data["runs"] if isinstance(r, dict)]


def pilot_seeds(data) -> Optional[list[int]]:
    """The seeds a ``pilot.json`` records: a ``seeds`` list, or ``first_seed`` and a seed count."""
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("seeds"), list) and all(isinstance(s, int) for s in data["seeds"]):
        return list(data["seeds"])
    first = data.get("first_seed")
    for key in ("pilot_seeds", "pilot_seeds_per_cell", "seeds"):
        n = data.get(key)
        if isinstance(first, int) and isinstance(n, int) and not isinstance(n, bool) and n > 0:
            return list(range(first, first + n))
    return None


def earlier_seeds(path: str | Path, before_utc: Optional[str] = None) -> list[dict]:
    """Seed sources beside the plan at ``path``: its pilot and its exploratory runs started before ``before_utc``.

    Returns:
      ``[{"source", "kind": "pilot" | "exploratory", "seeds": [...] or None, ...}]``; ``seeds`` is
      None for a pilot file that records no seeds.
    """
    path = Path(path)
    out = []
    pilot = path.with_name(PILOT_FILE)
    if pilot.is_file():
        try:
            seeds = pilot_seeds(read_json(pilot, "pilot record"))
        except PreregError:
            seeds = None
        out.append({"source": PILOT_FILE, "kind": "pilot", "seeds": seeds})
    if exploratory_log_path(path).is_file():
        for r in _exploratory_runs(path):
            if before_utc is not None and str(r.get("started_utc", "")) >= before_utc:
                continue
            seeds = r.get("seeds")
            out.append({"source": f"exploratory run into {r.get('out')} ({r.get('started_utc')})",
                        "kind": "exploratory", "seeds": seeds if isinstance(seeds, list) else None})
    return out


def seed_ranges(seeds: list[int]) -> str:
    """``[1, 2, 3, 7]`` -> ``'1-3, 7'``."""
    s = sorted(set(seeds))
    if not s:
        return "none"
    parts, start, prev = [], s[0], s[0]
    for x in s[1:] + [None]:
        if x is not None and x == prev + 1:
            prev = x
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if x is not None:
            start = prev = x
    return ", ".join(parts)
