"""What a lock proves, tested by attacking it: forged plans with recomputed hashes and backdated locks,
edited results with rehashed status, re-signing with another key, code changed after the lock,
seeds reused from a pilot, and the shipped studies' old-format records.

Every attack goes through the files and the CLI and must end in a named error with a non-zero exit
(or, where only a pinned key or ``--strict`` can tell, in a deviation the report shows).
"""
import datetime as dt
import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tabsim.cli.prereg import command as prereg_command
from tabsim.prereg import hashing, integrity, locking, signing
from tiny_plan import tiny_plan  # tests/prereg: the one-cell plan

ROOT = Path(__file__).resolve().parents[2]

PLAN = tiny_plan("Lock test")
PAST = "2020-01-02T03:04:05+00:00"


def cli(*args, env=None):
    return CliRunner().invoke(prereg_command, [str(a) for a in args], env=env)


def ok(res):
    assert res.exit_code == 0, res.output
    return res.output


def refused(res, *needles):
    """The attempt ends in a named error (no traceback) with a non-zero exit."""
    assert res.exit_code != 0, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    for n in needles:
        assert n in res.output, (n, res.output)
    return res.output


def git(repo, *args, date=None):
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    if date:
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "commit.gpgsign=false",
                           *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout


def write_plan(folder, doc=None):
    path = folder / "plan.yaml"
    path.write_text(yaml.safe_dump(doc or PLAN, sort_keys=False))
    return path


def forge_lock(plan, change, *, key=None, keep_signature=False):
    """What a forger does: edit the plan, recompute the lock's hashes, backdate it, re-sign or strip the signature."""
    doc = yaml.safe_load(plan.read_text())
    change(doc)
    plan.write_text(yaml.safe_dump(doc, sort_keys=False))
    lp = locking.lock_path(plan)
    lock = json.loads(lp.read_text())
    lock.update(sha256=hashing.plan_hash(doc), normalized=hashing.normalise(doc), locked_at_utc=PAST)
    if not keep_signature:
        lock.pop("signature", None)
    if key is not None:
        lock["signature"] = signing.sign(signing.load_private_key(key), signing.LOCK_DOMAIN, locking.signed_body(lock))
    lock["self_sha256"] = locking._self_digest(lock)
    lp.write_text(json.dumps(lock, indent=2))
    return doc, lock


def rehash_status(out, *, key=None, strip=False):
    """Recompute status.json's digests of the result files; keep, strip or re-sign its signature."""
    status = json.loads((out / "status.json").read_text())
    status["files"] = {n: hashing.file_sha256(out / n) for n in status["files"]}
    if strip or key is not None:
        status.pop("signature", None)
    if key is not None:
        status["signature"] = signing.sign(signing.load_private_key(key), signing.STATUS_DOMAIN, status)
    (out / "status.json").write_text(json.dumps(status, indent=2))


def edit_results(out, fn):
    results = json.loads((out / "results.json").read_text())
    fn(results)
    (out / "results.json").write_text(json.dumps(results, indent=2))


@pytest.fixture(scope="module", autouse=True)
def frozen_code(tmp_path_factory):
    """The code digest read from a copy of the package, so that edits to the working tree while these
    tests run do not count as code changes (the code-change test edits its own copy)."""
    site = tmp_path_factory.mktemp("site")
    shutil.copytree(integrity.code_root(), site / "tabsim", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(integrity, "code_root", lambda: site / "tabsim")
        yield site / "tabsim"


@pytest.fixture(scope="module")
def study(tmp_path_factory, frozen_code):
    """A signed study in a git repository: plan committed, locked with a key, lock committed, run and signed."""
    base = tmp_path_factory.mktemp("signed")
    keys, repo = base / "keys", base / "repo"
    keys.mkdir()
    repo.mkdir()
    ok(cli("keygen", "--out", keys / "owner.key"))
    ok(cli("keygen", "--out", keys / "forger.key"))
    git(repo, "init", "-q")
    plan = write_plan(repo)
    git(repo, "add", "plan.yaml")
    git(repo, "commit", "-q", "-m", "plan", date=PAST)
    out = ok(cli("lock", plan, "--key", keys / "owner.key"))
    assert "signed by key sha256:" in out
    git(repo, "add", "plan.yaml.lock.json")
    git(repo, "commit", "-q", "-m", "lock", date=PAST)
    ok(cli("run", plan, "--out", repo / "results", "--key", keys / "owner.key",
           "--public-key", keys / "owner.key.pub", "-q"))
    return {"keys": keys, "repo": repo, "plan": plan, "out": repo / "results",
            "pin": str(keys / "owner.key.pub"), "fingerprint": signing.parse_pin(str(keys / "owner.key.pub"))}


@pytest.fixture
def forged(study, tmp_path):
    """A private copy of the signed study (with its git history) for one attack."""
    repo = tmp_path / "repo"
    shutil.copytree(study["repo"], repo, symlinks=True)
    return {**study, "repo": repo, "plan": repo / "plan.yaml", "out": repo / "results"}


# ----------------------------------------------------------------------------- the honest record


def test_signed_study_verifies_and_reports_every_check(study):
    pin = study["pin"]
    out = ok(cli("validate", study["plan"], "--public-key", pin))
    assert "lock: matches" in out and "signature: verified" in out and "(the pinned key)" in out
    assert "code: same as at the lock" in out and "git: plan committed in" in out
    ok(cli("report", study["out"], "--public-key", pin, "--strict"))
    rep = json.loads((study["out"] / "report.json").read_text())
    md = (study["out"] / "report.md").read_text()
    fp = study["fingerprint"]
    assert rep["integrity"]["lock_signature"]["fingerprint"] == fp == rep["integrity"]["results_signature"]["fingerprint"]
    assert rep["integrity"]["code"]["state"] == "same"
    assert rep["integrity"]["code"]["sha256"] == integrity.code_digest()["sha256"]
    commit = rep["integrity"]["plan_commit"]
    assert commit["state"] == "before the run" and commit["commit_time_utc"] == PAST
    assert commit["commit"] == git(study["repo"], "log", "--format=%H", "--", "plan.yaml").strip()
    assert rep["deviations"] == [] and rep["limitations"] == []
    assert f"plan committed in {commit['commit'][:7]} at 2020-01-02T03:04:05Z, before the run started" in md
    assert "None: every check above could be made." in md
    lock = json.loads(locking.lock_path(study["plan"]).read_text())
    assert set(lock["code"]["versions"]) == set(integrity.LIBRARIES)
    assert lock["code"]["n_files"] == len(lock["code"]["files"]) > 10
    status = json.loads((study["out"] / "status.json").read_text())
    assert status["seeds"] == [100, 101, 102] and status["signature"]["fingerprint"] == fp


def test_the_code_digest_is_the_sha256sum_manifest():
    """The documented shell recipe gives the same digest (sha256 over sorted '<sha256>  <path>' lines)."""
    if shutil.which("sha256sum") is None:
        pytest.skip("no sha256sum")
    root = integrity.code_root()
    shell = subprocess.run("find tabsim -name '*.py' -not -path '*/__pycache__/*' | LC_ALL=C sort | xargs sha256sum "
                           "| sha256sum", shell=True, cwd=root.parent, capture_output=True, text=True, check=True)
    assert shell.stdout.split()[0] == integrity.code_digest()["sha256"]


# ----------------------------------------------------------------------------- attacks on the lock


def test_attack_forged_plan_recomputed_hashes_backdated_lock_old_signature(forged):
    """Edit the plan, recompute every hash of the lock and backdate it, keeping the owner's signature."""
    forge_lock(forged["plan"], lambda d: d["hypotheses"][0]["rule"].update(ci_lower_gt=-1), keep_signature=True)
    lock_name = locking.lock_path(forged["plan"]).name
    refused(cli("validate", forged["plan"]), "lock: BAD SIGNATURE", lock_name, "bad signature")
    refused(cli("run", forged["plan"], "--out", forged["repo"] / "again", "-q"), lock_name, "bad signature")
    assert not (forged["repo"] / "again").exists()


def test_attack_forged_lock_with_signature_stripped(forged):
    forge_lock(forged["plan"], lambda d: d["hypotheses"][0].update(prediction="less", rule={"ci_upper_lt": 0}))
    out = ok(cli("validate", forged["plan"]))               # without a pin the hashes are all there is ...
    assert "warning: unsigned lock" in out                  # ... and validate says so
    refused(cli("validate", forged["plan"], "--public-key", forged["pin"]), "unsigned", "is pinned")
    env_res = cli("validate", forged["plan"], env={signing.PIN_VARIABLE: forged["fingerprint"]})
    refused(env_res, "unsigned", "is pinned")
    refused(cli("run", forged["plan"], "--out", forged["repo"] / "again", "--key", forged["keys"] / "owner.key",
                "--public-key", forged["pin"], "-q"), "the lock is unsigned")


def test_attack_forged_lock_resigned_with_another_key(forged):
    forge_lock(forged["plan"], lambda d: d["design"].update(seeds=4), key=forged["keys"] / "forger.key")
    out = ok(cli("validate", forged["plan"]))                # a valid signature, by someone
    assert "signature: verified" in out and "no key pinned" in out
    refused(cli("validate", forged["plan"], "--public-key", forged["pin"]), "not by the pinned key")
    refused(cli("validate", forged["plan"], "--public-key", forged["fingerprint"]), "not by the pinned key")
    refused(cli("run", forged["plan"], "--out", forged["repo"] / "again", "--key", forged["keys"] / "owner.key",
                "--public-key", forged["pin"], "-q"), "not by the pinned key")


def test_validate_exits_nonzero_when_the_plan_does_not_match(forged):
    plan = forged["plan"]
    plan.write_text(plan.read_text().replace("ci_lower_gt: 0", "ci_lower_gt: -0.5"))
    refused(cli("validate", plan), "lock: DOES NOT MATCH", "hypotheses[H1].rule.ci_lower_gt",
            "the plan does not match its lock")


def test_a_key_file_others_can_read_or_a_wrong_pin_is_refused(forged, tmp_path):
    key = tmp_path / "k"
    shutil.copy(forged["keys"] / "owner.key", key)
    os.chmod(key, 0o644)
    plan = write_plan(tmp_path)
    refused(cli("lock", plan, "--key", key), "readable by other users", "chmod 600")
    refused(cli("lock", plan, "--key", tmp_path / "missing.key"), "--key", "not found")
    refused(cli("validate", forged["plan"], "--public-key", "sha256:12"), "--public-key", "fingerprint")
    refused(cli("validate", forged["plan"], "--public-key", forged["keys"] / "owner.key"), "is a private key")
    assert not locking.lock_path(plan).exists()


# ----------------------------------------------------------------------------- attacks on the results


def _flip_verdict(results):
    h = results["analysis"]["hypotheses"][0]
    h["verdict"] = "NOT SUPPORTED" if h["verdict"] == "SUPPORTED" else "SUPPORTED"


def test_attack_edited_results_rehashed_status_keeps_signature(forged):
    edit_results(forged["out"], _flip_verdict)
    rehash_status(forged["out"])
    refused(cli("report", forged["out"]), "status.json", "bad signature")


def test_attack_edited_results_rehashed_status_signature_stripped(forged):
    edit_results(forged["out"], _flip_verdict)
    rehash_status(forged["out"], strip=True)
    refused(cli("report", forged["out"], "--public-key", forged["pin"]), "status.json", "unsigned", "is pinned")
    # without a pin, too: a signed lock demands results signed by its key (no downgrade to unsigned)
    for strict in ([], ["--strict"]):
        refused(cli("report", forged["out"], *strict), "status.json", "the results are unsigned",
                "the lock is signed by key")


def test_attack_edited_results_resigned_with_another_key(forged):
    edit_results(forged["out"], _flip_verdict)
    rehash_status(forged["out"], key=forged["keys"] / "forger.key")
    refused(cli("report", forged["out"], "--public-key", forged["pin"]), "status.json", "not by the pinned key")
    refused(cli("report", forged["out"]), "status.json", "the lock by another key")
    refused(cli("report", forged["out"], "--strict"), "status.json", "the lock by another key")
    # the forger also re-signs the lock's copy inside results.json: the pinned key tells, and so does the
    # lock beside the plan
    forger = signing.load_private_key(forged["keys"] / "forger.key")

    def resign_lock(results):
        lock = results["prereg"]["lock"]
        lock["signature"] = signing.sign(forger, signing.LOCK_DOMAIN, locking.signed_body(lock))

    edit_results(forged["out"], resign_lock)
    rehash_status(forged["out"], key=forged["keys"] / "forger.key")
    refused(cli("report", forged["out"], "--public-key", forged["pin"]), "not by the pinned key")
    refused(cli("report", forged["out"]), "its copy of the lock is not", "plan.yaml.lock.json")


def test_attack_posthoc_plan_rehashed_backdated_and_committed_after_the_run(forged):
    """Change the prediction after seeing the results: plan, lock, results and status all rewritten
    consistently and unsigned, the forged plan committed (at its real, later time)."""
    repo, out = forged["repo"], forged["out"]
    doc, lock = forge_lock(forged["plan"], lambda d: d["hypotheses"][0].update(statement="TRUE beats FROZEN a lot"))
    finished = json.loads((out / "results.json").read_text())["finished_utc"]
    later = (dt.datetime.fromisoformat(finished) + dt.timedelta(minutes=5)).isoformat()
    git(repo, "add", "plan.yaml", "plan.yaml.lock.json")
    git(repo, "commit", "-q", "-m", "plan", date=later)
    record = integrity.plan_commit(forged["plan"], lock["sha256"])
    assert record["state"] == "committed"

    def rewrite(results):
        results["prereg"].update(sha256=lock["sha256"], lock={k: v for k, v in lock.items() if k != "normalized"})
        results["plan"] = hashing.normalise(doc)
        results["analysis"]["hypotheses"][0]["statement"] = doc["hypotheses"][0]["statement"]
        results["integrity"]["plan_commit"] = record

    edit_results(out, rewrite)
    status = json.loads((out / "status.json").read_text())
    status["prereg_sha256"] = lock["sha256"]
    (out / "status.json").write_text(json.dumps(status))
    rehash_status(out, strip=True)
    ok(cli("validate", forged["plan"]))                      # the forged plan matches the forged lock
    refused(cli("validate", forged["plan"], "--public-key", forged["pin"]), "unsigned")
    refused(cli("report", out, "--public-key", forged["pin"]), "unsigned")
    refused(cli("report", out, "--strict"), "integrity check failed", "commit check", "after the run started")
    md = (out / "report.md").read_text()
    assert "after the run started" in md and "None: the run used the locked plan unchanged" not in md

    # the same forgery keeping the honest commit record: its plan does not hash to the forged hash
    edit_results(out, lambda r: r["integrity"].update(plan_commit={**r["integrity"]["plan_commit"],
                                                                   **_first_commit(repo)}))
    rehash_status(out, strip=True)
    refused(cli("report", out, "--strict"), "commit check", "does not hold up", "hashes to")


def _first_commit(repo):
    commit = git(repo, "log", "--format=%H", "--reverse", "--", "plan.yaml").split()[0]
    return {"commit": commit, "commit_time_utc": PAST}


def test_attack_lock_copy_in_results_edited(forged):
    """The lock recorded inside results.json is backdated; its signature no longer verifies."""
    edit_results(forged["out"], lambda r: r["prereg"]["lock"].update(locked_at_utc=PAST))
    rehash_status(forged["out"], key=forged["keys"] / "owner.key")  # even the owner's key cannot bless it
    refused(cli("report", forged["out"]), "results.json", "copy of the lock", "bad signature")


# ----------------------------------------------------------------------------- code after the lock


def test_code_changed_after_the_lock_is_refused_or_reported(tmp_path, monkeypatch, frozen_code):
    site = tmp_path / "site"
    shutil.copytree(frozen_code, site / "tabsim")
    monkeypatch.setattr(integrity, "code_root", lambda: site / "tabsim")
    plan = write_plan(tmp_path)
    ok(cli("lock", plan))
    locked = json.loads(locking.lock_path(plan).read_text())["code"]
    assert locked["sha256"] == integrity.code_digest(site / "tabsim")["sha256"]
    # a preset's code changes after the lock
    presets = site / "tabsim" / "config" / "presets.py"
    presets.write_text(presets.read_text() + "\n# changed after the lock\n")
    (site / "tabsim" / "extra_module.py").write_text("X = 1\n")
    out = ok(cli("validate", plan))
    assert "warning: code: differs from the lock" in out and "tabsim/config/presets.py" in out
    refused(cli("run", plan, "--out", tmp_path / "r1", "-q"), "the code changed since the lock",
            "changed tabsim/config/presets.py", "added tabsim/extra_module.py", "--allow-code-change")
    assert not (tmp_path / "r1").exists()
    ok(cli("run", plan, "--out", tmp_path / "r2", "-q", "--allow-code-change"))
    rep = json.loads((tmp_path / "r2" / "report.json").read_text())
    assert rep["deviations"][0]["kind"] == "code change"
    assert rep["deviations"][0]["changes"]["changed"] == ["tabsim/config/presets.py"]
    md = (tmp_path / "r2" / "report.md").read_text()
    assert "**WARNING: the code changed after the lock.**" in md
    assert md.index("WARNING: the code changed") < md.index("## Confirmatory hypotheses")
    assert "- **code change**: the code differed from the locked code (changed tabsim/config/presets.py" in md
    refused(cli("report", tmp_path / "r2", "--strict"), "integrity check failed", "code change")
    # a library upgrade is a code change too
    presets.write_text(presets.read_text().replace("\n# changed after the lock\n", ""))
    (site / "tabsim" / "extra_module.py").unlink()
    real = integrity.library_versions
    monkeypatch.setattr(integrity, "library_versions", lambda: {**real(), "jax": "0.0.1"})
    refused(cli("run", plan, "--out", tmp_path / "r3", "-q"), "the code changed since the lock", "-> 0.0.1")


# ----------------------------------------------------------------------------- seeds


def test_seeds_of_a_pilot_and_an_exploratory_run_reused_in_the_confirmatory_run(tmp_path):
    plan = write_plan(tmp_path)
    ok(cli("run", plan, "--exploratory", "--out", tmp_path / "dry", "-q"))
    for name in ("status.json", "results.json"):
        assert json.loads((tmp_path / "dry" / name).read_text())["seeds"] == [100, 101, 102]
    log = json.loads(integrity.exploratory_log_path(plan).read_text())
    assert [r["seeds"] for r in log["runs"]] == [[100, 101, 102]]
    (tmp_path / "pilot.json").write_text(json.dumps({"pilot_seeds": 2, "first_seed": 101}))
    ok(cli("lock", plan))
    ok(cli("run", plan, "--out", tmp_path / "conf", "-q"))
    rep = json.loads((tmp_path / "conf" / "report.json").read_text())
    reuse = [d for d in rep["deviations"] if d["kind"] == "seed reuse"]
    assert {d["source"]: d["seeds"] for d in reuse} == {
        "pilot.json": [101, 102], f"exploratory run into dry ({log['runs'][0]['started_utc']})":
            [100, 101, 102]}
    md = (tmp_path / "conf" / "report.md").read_text()
    assert "- **seed reuse**: seeds 101-102 of the confirmatory run were already used by the pilot pilot.json" in md
    assert "seeds 100-102 of the confirmatory run were already used by the exploratory run" in md
    # outside git the commit check is reported as impossible, not as passed
    assert rep["integrity"]["plan_commit"]["state"] == "no repository"
    assert "could not be made" in md


def test_pilot_seeds_are_read_from_the_recorded_fields():
    assert integrity.pilot_seeds({"pilot_seeds": 3, "first_seed": 7}) == [7, 8, 9]
    assert integrity.pilot_seeds({"pilot_seeds_per_cell": 2, "first_seed": 90000}) == [90000, 90001]
    assert integrity.pilot_seeds({"seeds": [5, 1]}) == [5, 1]
    assert integrity.pilot_seeds({"cells": []}) is None
    assert integrity.seed_ranges([3, 1, 2, 7, 9, 8]) == "1-3, 7-9"


# ----------------------------------------------------------------------------- keys


def test_keygen_writes_a_private_key_0600_and_never_overwrites(tmp_path):
    key = tmp_path / "k.key"
    out = ok(cli("keygen", "--out", key))
    fp = signing.parse_pin(str(tmp_path / "k.key.pub"))
    assert fp in out and stat.S_IMODE(key.stat().st_mode) == 0o600
    assert b"PRIVATE KEY" in key.read_bytes() and b"PUBLIC KEY" in (tmp_path / "k.key.pub").read_bytes()
    before = (key.read_bytes(), (tmp_path / "k.key.pub").read_bytes())
    refused(cli("keygen", "--out", key), "already exists", "never overwritten")
    assert (key.read_bytes(), (tmp_path / "k.key.pub").read_bytes()) == before
    # only the public half exists: refused, and no private key appears
    (tmp_path / "other.key.pub").write_text("not mine")
    refused(cli("keygen", "--out", tmp_path / "other.key"), "other.key.pub already exists")
    assert not (tmp_path / "other.key").exists()
    refused(cli("keygen", "--out", tmp_path / "no" / "such" / "k"), "does not exist")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.key", "k.key.pub", "other.key.pub"]


# ----------------------------------------------------------------------------- the shipped studies


@pytest.mark.parametrize("study", ["reference_factorial", "clipping_null"])
def test_shipped_studies_validate_and_report_as_old_format(study, tmp_path):
    root = ROOT / "preregistration" / study
    out = ok(cli("validate", root / "plan.yaml"))
    assert "lock: matches" in out and "old-format lock: unsigned, no code digest" in out
    copy_root = tmp_path / study
    shutil.copytree(root, copy_root)
    ok(cli("report", copy_root / "results"))
    rep = json.loads((copy_root / "results" / "report.json").read_text())
    assert rep["integrity"]["lock_signature"]["state"] == "unsigned"
    assert {d["kind"] for d in rep["limitations"]} >= {"unsigned lock", "unsigned results", "code"}
    assert rep["integrity"]["seeds"]["state"] == "no overlap" and "pilot.json" in rep["integrity"]["seeds"]["text"]
    md = (copy_root / "results" / "report.md").read_text()
    assert "old-format lock, unsigned, no code digest" in md
    # a pinned key cannot be satisfied by an unsigned record
    refused(cli("report", copy_root / "results", "--public-key", "sha256:" + "ab" * 32), "unsigned", "is pinned")
