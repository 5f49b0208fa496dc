"""A skeptic cannot fool the pre-registration: the code digest covers what Python runs, amendments are
signed by the lock's key, a lock from the future is refused, ``--strict`` fails on every deviation, a signed
lock demands signed results, and ``report`` recomputes the analysis from ``data.parquet``.

Each attack goes through the files and the CLI and must end in a named error with a non-zero exit.
The stale-bytecode attack edits a copy of the package and runs it in subprocesses (``PYTHONPATH``),
so the tree under test is never modified.
"""
from __future__ import annotations

import datetime as dt
import importlib.machinery
import importlib.util
import json
import os
import py_compile
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

import tabsim
from tabsim.cli.prereg import command as prereg_command
from tabsim.prereg import bytecode, hashing, integrity, locking, signing
from tiny_plan import tiny_plan  # tests/prereg: the one-cell plan

PLAN = tiny_plan("Skeptic test")
FUTURE = "2099-01-01T00:00:00+00:00"


def cli(*args):
    return CliRunner().invoke(prereg_command, [str(a) for a in args])


def ok(res):
    assert res.exit_code == 0, res.output
    return res.output


def refused(res, *needles):
    assert res.exit_code != 0, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    for n in needles:
        assert n in res.output, (n, res.output)
    return res.output


def write_plan(folder: Path, doc=None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "plan.yaml"
    path.write_text(yaml.safe_dump(doc or PLAN, sort_keys=False))
    return path


def rehash_status(out: Path, *, key=None, strip=False):
    status = json.loads((out / "status.json").read_text())
    status["files"] = {n: hashing.file_sha256(out / n) for n in status["files"]}
    if strip or key is not None:
        status.pop("signature", None)
    if key is not None:
        status["signature"] = signing.sign(signing.load_private_key(key), signing.STATUS_DOMAIN, status)
    (out / "status.json").write_text(json.dumps(status, indent=2))


def edit_results(out: Path, fn):
    results = json.loads((out / "results.json").read_text())
    fn(results)
    (out / "results.json").write_text(json.dumps(results, indent=2))


def flip_h1(results):
    h = results["analysis"]["hypotheses"][0]
    h["verdict"] = "NOT SUPPORTED" if h["verdict"] == "SUPPORTED" else "SUPPORTED"


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    d = tmp_path_factory.mktemp("keys")
    ok(cli("keygen", "--out", d / "owner.key"))
    ok(cli("keygen", "--out", d / "forger.key"))
    return d


@pytest.fixture(scope="module")
def signed_run(keys, tmp_path_factory):
    """A plan locked and run with the owner's key (outside git)."""
    base = tmp_path_factory.mktemp("signed")
    plan = write_plan(base / "study")
    ok(cli("lock", plan, "--key", keys / "owner.key"))
    ok(cli("run", plan, "--out", base / "study" / "results", "--key", keys / "owner.key", "-q"))
    return base / "study"


@pytest.fixture
def study(signed_run, tmp_path):
    """A private copy of the signed study for one attack."""
    shutil.copytree(signed_run, tmp_path / "study")
    return tmp_path / "study"


@pytest.fixture(scope="module")
def unsigned_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("unsigned")
    plan = write_plan(base / "study")
    ok(cli("lock", plan))
    ok(cli("run", plan, "--out", base / "study" / "results", "-q"))
    return base / "study"


@pytest.fixture
def unsigned(unsigned_run, tmp_path):
    shutil.copytree(unsigned_run, tmp_path / "study")
    return tmp_path / "study"


# ----------------------------------------------------------------------------- what Python runs


def _python(site: Path, *args, cwd: Path):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env.update(PYTHONPATH=str(site), MPLBACKEND="Agg", TABSIM_PREREG_PUBKEY="")
    return subprocess.run([sys.executable, "-m", "tabsim.cli", "prereg", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_attack_stale_bytecode_of_the_analysis_is_refused(tmp_path, keys):
    """The issue's attack: a modified prereg/analysis.py compiled into __pycache__, the source restored
    byte for byte with its recorded mtime. Python would run the modified bytecode (the verdict rule
    flipped) while every source file hashes as at the lock."""
    site = tmp_path / "site"
    shutil.copytree(Path(tabsim.__file__).parent, site / "tabsim", ignore=shutil.ignore_patterns("__pycache__"))
    plan = write_plan(tmp_path / "study")
    r = _python(site, "lock", plan, "--key", keys / "owner.key", cwd=tmp_path)
    assert r.returncode == 0 and "signed by key" in r.stdout, r.stdout + r.stderr

    source = site / "tabsim" / "prereg" / "analysis.py"
    original, st = source.read_bytes(), source.stat()
    honest, evil = b"        if p_adj < alpha:\n", b"        if p_adj > alpha:\n"  # same size: the pyc header holds
    assert original.count(honest) == 1
    source.write_bytes(original.replace(honest, evil))
    os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns))
    py_compile.compile(str(source), cfile=importlib.util.cache_from_source(str(source)), doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
    source.write_bytes(original)
    os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert source.read_bytes() == original and source.stat().st_mtime_ns == st.st_mtime_ns

    r = _python(site, "validate", plan, "--public-key", keys / "owner.key.pub", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "code: same as at the lock" not in r.stdout
    assert "BYTECODE DOES NOT MATCH THE SOURCE" in r.stdout and "tabsim/prereg/analysis.py" in r.stdout
    assert "Traceback" not in r.stderr and "__pycache__" in r.stderr
    out = tmp_path / "study" / "results"
    r = _python(site, "run", plan, "--out", out, "--key", keys / "owner.key", "-q", cwd=tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert "tabsim/prereg/analysis.py" in r.stderr and "refuses to start" in r.stderr
    assert not out.exists()
    # the remedy the message names: without the stale cache the tree is what the lock says
    shutil.rmtree(source.parent / "__pycache__")
    r = _python(site, "validate", plan, "--public-key", keys / "owner.key.pub", cwd=tmp_path)
    assert r.returncode == 0 and "code: same as at the lock" in r.stdout, r.stdout + r.stderr


def _package_copy(tmp_path) -> Path:
    root = tmp_path / "tabsim"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "sub" / "__init__.py").write_text("")
    (root / "sub" / "mod.py").write_text("def f():\n    return 1\n")
    return root


@pytest.mark.parametrize("mode", list(py_compile.PycInvalidationMode))
def test_bytecode_compiled_from_other_source_is_named_whatever_its_header(tmp_path, mode):
    root = _package_copy(tmp_path)
    src = root / "sub" / "mod.py"
    cached = importlib.util.cache_from_source(str(src))
    py_compile.compile(str(src), cfile=cached, doraise=True, invalidation_mode=mode)
    assert bytecode.bytecode_problems(root) == []  # honest bytecode
    data, st = src.read_bytes(), src.stat()
    src.write_bytes(data.replace(b"return 1", b"return 2"))
    # the forger gives the edited source the original's mtime before compiling it, so a timestamp-mode
    # header records the original's (mtime, size) however much wall-clock time the writes take
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    py_compile.compile(str(src), cfile=cached, doraise=True, invalidation_mode=mode)
    header = Path(cached).read_bytes()
    if mode is py_compile.PycInvalidationMode.CHECKED_HASH:  # a forger also rewrites the header's source hash
        header = header[:8] + importlib.util.source_hash(data) + header[16:]
        Path(cached).write_bytes(header)
    src.write_bytes(data)
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    problems = bytecode.bytecode_problems(root)
    assert len(problems) == 1 and problems[0].startswith("tabsim/sub/mod.py: its cached bytecode does not match")


def test_stale_cache_that_python_would_recompile_is_no_problem(tmp_path):
    root = _package_copy(tmp_path)
    src = root / "sub" / "mod.py"
    py_compile.compile(str(src), cfile=importlib.util.cache_from_source(str(src)), doraise=True)
    src.write_text("def f():\n    return 22\n")  # edited later: size and mtime differ, so Python recompiles
    assert bytecode.bytecode_problems(root) == []


@pytest.mark.parametrize("name", ["sub/mod" + importlib.machinery.EXTENSION_SUFFIXES[0], "sub/other.pyc"])
def test_compiled_files_importable_instead_of_a_source_are_named(tmp_path, name):
    root = _package_copy(tmp_path)
    (root / name).write_bytes(b"\0")
    problems = bytecode.bytecode_problems(root)
    assert problems == [f"tabsim/{name}: a compiled file that Python can import instead of a source the digest "
                        f"covers"]


def test_lock_refuses_a_tree_whose_bytecode_is_not_its_source(tmp_path, monkeypatch):
    monkeypatch.setattr(integrity, "executed_code_problems", lambda: ["tabsim/x.py: its cached bytecode does not "
                                                                      "match it (...)"])
    plan = write_plan(tmp_path)
    refused(cli("lock", plan), "cannot lock", "tabsim/x.py", "__pycache__")
    assert not locking.lock_path(plan).exists()


# ----------------------------------------------------------------------------- amendments


def _weaken(plan: Path):
    plan.write_text(plan.read_text().replace("ci_lower_gt: 0", "ci_lower_gt: -1"))


def _unsigned_amendment(plan: Path, reason="weaker rule"):
    """What `prereg amend` wrote before amendments were signed: a chained, self-hashed, unsigned record."""
    lk = locking.read_lock(plan)
    doc = yaml.safe_load(plan.read_text())
    rec = {"n": 1, "reason": reason, "old_sha256": lk["sha256"], "new_sha256": hashing.plan_hash(doc),
           "changed_fields": locking.changed_fields(lk["normalized"], hashing.normalise(doc)),
           "normalized": hashing.normalise(doc), "amended_at_utc": dt.datetime.now(dt.timezone.utc).isoformat(),
           "git_commit": None, "tabsim_version": tabsim.__version__}
    rec["self_sha256"] = locking._self_digest(rec)
    locking.amendments_path(plan).write_text(json.dumps({"schema": locking.AMENDMENTS_SCHEMA, "file": plan.name,
                                                         "amendments": [rec]}))


def test_attack_unsigned_amendment_of_a_signed_lock(study, keys):
    plan = study / "plan.yaml"
    _weaken(plan)
    refused(cli("amend", plan, "--reason", "weaker rule"), "--key", "signed by key", "only that key can amend")
    refused(cli("amend", plan, "--reason", "weaker rule", "--key", keys / "forger.key"), "the key given is")
    assert not locking.amendments_path(plan).exists()
    _unsigned_amendment(plan)  # written by hand, as anyone without the key could
    refused(cli("validate", plan, "--public-key", keys / "owner.key.pub"), "lock: BAD SIGNATURE",
            "amendment 1 is unsigned")
    refused(cli("validate", plan), "amendment 1 is unsigned")
    refused(cli("run", plan, "--out", study / "again", "--key", keys / "owner.key", "-q"), "amendment 1 is unsigned")
    assert not (study / "again").exists()


def test_attack_amendment_signed_by_another_key(study, keys):
    plan = study / "plan.yaml"
    _weaken(plan)
    lk = locking.read_lock(plan)
    _unsigned_amendment(plan)
    data = json.loads(locking.amendments_path(plan).read_text())
    rec = data["amendments"][0]
    rec["after"] = lk["self_sha256"]
    rec["signature"] = signing.sign(signing.load_private_key(keys / "forger.key"), signing.AMENDMENT_DOMAIN,
                                    locking.amendment_body(rec))
    rec["self_sha256"] = locking._self_digest(rec)
    locking.amendments_path(plan).write_text(json.dumps(data))
    refused(cli("validate", plan), "amendment 1 is signed by key", "not by the lock's key")
    refused(cli("run", plan, "--out", study / "again", "--key", keys / "owner.key", "-q"), "not by the lock's key")


def test_signed_amendment_runs_and_strict_report_fails_on_it(study, keys, tmp_path):
    plan = study / "plan.yaml"
    _weaken(plan)
    out = ok(cli("amend", plan, "--reason", "weaker rule", "--key", keys / "owner.key"))
    assert "signed by key" in out
    assert "1 amendment(s)" in ok(cli("validate", plan, "--public-key", keys / "owner.key.pub"))
    ok(cli("run", plan, "--out", study / "v2", "--key", keys / "owner.key", "-q"))
    ok(cli("report", study / "v2", "--public-key", keys / "owner.key.pub"))
    refused(cli("report", study / "v2", "--strict"), "--strict", "amendment 1")
    # the results' copy of the amendment with its signature stripped: even the owner's re-signed status cannot
    # bless it
    edit_results(study / "v2", lambda r: r["prereg"]["amendments"][0].pop("signature"))
    rehash_status(study / "v2", key=keys / "owner.key")
    refused(cli("report", study / "v2"), "amendment 1 is unsigned")
    refused(cli("report", study / "v2", "--strict"), "amendment 1 is unsigned")


# ----------------------------------------------------------------------------- the timeline


def _redate_lock(plan: Path, when: str, key=None):
    lp = locking.lock_path(plan)
    lock = json.loads(lp.read_text())
    lock["locked_at_utc"] = when
    if key is not None:
        lock["signature"] = signing.sign(signing.load_private_key(key), signing.LOCK_DOMAIN, locking.signed_body(lock))
    lock["self_sha256"] = locking._self_digest(lock)
    lp.write_text(json.dumps(lock))


def test_a_lock_from_the_future_is_refused(study, keys):
    plan = study / "plan.yaml"
    _redate_lock(plan, FUTURE, key=keys / "owner.key")  # a key holder can sign any date
    refused(cli("validate", plan), "lock: REFUSED", "dated 2099-01-01", "clock skew")
    refused(cli("run", plan, "--out", study / "again", "--key", keys / "owner.key", "-q"), "dated 2099-01-01")
    _weaken(plan)
    refused(cli("amend", plan, "--reason", "x", "--key", keys / "owner.key"), "dated 2099-01-01")
    assert not (study / "again").exists()
    # within the clock-skew allowance, a lock a minute ahead (another machine's clock) is accepted
    plan.write_text(yaml.safe_dump(PLAN, sort_keys=False))
    soon = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=1)).isoformat()
    _redate_lock(plan, soon, key=keys / "owner.key")
    assert "lock: matches" in ok(cli("validate", plan))


def test_strict_fails_on_a_lock_dated_after_the_run(unsigned):
    """An unsigned record edited to a lock of 2099: a deviation, and --strict fails on it."""
    edit_results(unsigned / "results", lambda r: r["prereg"]["lock"].update(locked_at_utc=FUTURE))
    rehash_status(unsigned / "results")
    # the lock beside the plan tells the copy was edited ...
    refused(cli("report", unsigned / "results"), "its copy of the lock is not")
    # ... and without the plan within reach, the deviation is listed and --strict fails on it
    shutil.move(unsigned / "plan.yaml", unsigned.parent / "elsewhere.yaml")
    edit_results(unsigned / "results", lambda r: r["prereg"].update(file="nowhere/plan.yaml"))
    rehash_status(unsigned / "results")
    ok(cli("report", unsigned / "results"))
    rep = json.loads((unsigned / "results" / "report.json").read_text())
    assert [d["kind"] for d in rep["deviations"]] == ["timeline"]
    refused(cli("report", unsigned / "results", "--strict"), "--strict", "timeline", "does not precede the run")


def test_strict_fails_on_every_deviation_not_only_integrity_ones(tmp_path):
    plan = write_plan(tmp_path / "study")
    (tmp_path / "study" / "pilot.json").write_text(json.dumps({"seeds": [101]}))
    ok(cli("lock", plan))
    ok(cli("run", plan, "--out", tmp_path / "study" / "results", "-q"))
    ok(cli("report", tmp_path / "study" / "results"))
    rep = json.loads((tmp_path / "study" / "results" / "report.json").read_text())
    assert [d["kind"] for d in rep["deviations"]] == ["seed reuse"]
    refused(cli("report", tmp_path / "study" / "results", "--strict"), "--strict", "1 deviation(s)", "seed reuse")


# ----------------------------------------------------------------------------- no downgrade


def test_attack_signatures_stripped_everywhere_verdict_flipped(study):
    """The issue's downgrade: a signed lock, results re-written unsigned with the verdict flipped and the
    digests recomputed, no key pinned."""
    out = study / "results"
    edit_results(out, flip_h1)
    rehash_status(out, strip=True)
    refused(cli("report", out, "--strict"), "the results are unsigned", "the lock is signed by key")
    # the lock's copy in results.json unsigned as well: the lock beside the plan tells
    edit_results(out, lambda r: r["prereg"]["lock"].pop("signature"))
    rehash_status(out, strip=True)
    refused(cli("report", out, "--strict"), "its copy of the lock is not", "plan.yaml.lock.json")
    # and with the plan out of reach, the data tell
    shutil.move(study / "plan.yaml", study.parent / "elsewhere.yaml")
    edit_results(out, lambda r: r["prereg"].update(file="nowhere/plan.yaml"))
    rehash_status(out, strip=True)
    refused(cli("report", out, "--strict"), "disagrees with the analysis recomputed from data.parquet",
            "hypotheses[H1].verdict")


def test_a_signed_lock_refuses_a_run_without_its_key(study, keys):
    plan = study / "plan.yaml"
    refused(cli("run", plan, "--out", study / "again", "-q"), "--key", "must be signed by the same key")
    refused(cli("run", plan, "--out", study / "again", "--key", keys / "forger.key", "-q"), "the key given is")
    assert not (study / "again").exists()


# ----------------------------------------------------------------------------- the report comes from the data


@pytest.mark.parametrize("attack, words", [
    ("estimate", "hypotheses[H1].estimate"),
    ("interval", "hypotheses[H1].ci_low"),
    ("verdict", "hypotheses[H1].verdict"),
    ("check", "arm_means"),
    ("data", "disagrees"),
    ("plan", "does not hash to its plan hash"),
])
def test_report_recomputes_the_analysis_from_the_data(unsigned, attack, words):
    out = unsigned / "results"
    if attack == "estimate":
        edit_results(out, lambda r: r["analysis"]["hypotheses"][0].update(estimate=1.248))
    elif attack == "interval":
        edit_results(out, lambda r: r["analysis"]["hypotheses"][0].update(ci_low=0.5))
    elif attack == "verdict":
        edit_results(out, flip_h1)
    elif attack == "check":
        edit_results(out, lambda r: r["analysis"]["arm_means"][0].update(mean=0.99))
    elif attack == "data":
        frame = pd.read_parquet(out / "data.parquet")
        frame["pass1"] = 1.0 - frame["pass1"]
        frame.to_parquet(out / "data.parquet", index=False)
    else:
        edit_results(out, lambda r: r["plan"]["hypotheses"][0]["rule"].update(ci_lower_gt=-1))
    rehash_status(out)
    for strict in ([], ["--strict"]):
        refused(cli("report", out, *strict), words)


def test_an_honest_report_says_nothing_new(unsigned):
    """The recomputation agrees with an untouched run (the report is written as before)."""
    before = (unsigned / "results" / "report.json").read_bytes()
    ok(cli("report", unsigned / "results"))
    assert (unsigned / "results" / "report.json").read_bytes() == before


# ----------------------------------------------------------------------------- the shipped signed study


def test_the_signed_shipped_study_passes_strict_with_its_pinned_key(tmp_path):
    """preregistration/clipping_priors: plan and signed lock committed before the run, results signed by the
    same key; its report holds with the key pinned and no deviation (read from a copy, rewritten there)."""
    root = Path(__file__).resolve().parents[2] / "preregistration" / "clipping_priors"
    pin = root / "owner.key.pub"
    out = ok(cli("validate", root / "plan.yaml", "--public-key", pin))
    assert "lock: matches" in out and "signature: verified" in out and "(the pinned key)" in out
    copy = tmp_path / "clipping_priors"
    shutil.copytree(root, copy)
    ok(cli("report", copy / "results", "--public-key", pin, "--strict"))
    rep = json.loads((copy / "results" / "report.json").read_text())
    assert rep["deviations"] == [] and rep["integrity"]["code"]["state"] == "same"
    assert [h["verdict"] for h in rep["hypotheses"]] == ["SUPPORTED", "SUPPORTED"]
    fp = signing.parse_pin(str(pin))
    assert rep["integrity"]["lock_signature"]["fingerprint"] == rep["integrity"]["results_signature"]["fingerprint"] == fp
    shipped = json.loads((root / "results" / "report.json").read_text())
    assert rep["hypotheses"] == shipped["hypotheses"] and shipped["deviations"] == []
    assert shipped["integrity"]["plan_commit"]["state"] == "before the run"  # checked in this repository
