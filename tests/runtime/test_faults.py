"""Faults against the run store: existing outputs, concurrent writers, real SIGINT / SIGKILL, a full disk,
a read-only or impossible target, corrupted checkpoints. Each fault must leave earlier results intact, and
``--resume`` must give the same bytes as an uninterrupted run.

Signals and kills are real: the run is a subprocess (``python -m tabsim.cli``) and the test waits until
it has written some chunks into its staging folder before ``os.kill``.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tabsim.cli import main
from tabsim.runtime.chunklog import PACK, saved_chunks
from tabsim.runtime.store import MARKER, RunStore, lock_path, staging_path

# 10 conditions in chunks of one (about 0.1 s each on 2 cores, one compiled call). The tests stop the process
# (SIGSTOP) once it has saved the chunks they wait for, so that their signal lands mid-run however busy the
# machine is, and let it go on (SIGCONT) to receive it: the chunks need only outlast the 20 ms poll.
SLOW = """\
preset = "paper"
[train]
seeds = 2
steps = 300
chunk_conditions = 1
[sweep]
prior_strength = [0.2, 0.27, 0.34, 0.41, 0.48, 0.55, 0.62, 0.69, 0.76, 0.8]
"""
TINY = ["sweep", "--vary", "prior_strength=0.3,0.6", "--seeds", "2", "--steps", "10", "-q"]


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def tree_bytes(folder: Path) -> dict:
    """Every file under ``folder`` (hidden ones included) -> its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def assert_clean_refusal(res, *words):
    assert res.exit_code != 0, res.output
    assert isinstance(res.exception, SystemExit), repr(res.exception)  # not a traceback
    assert "Traceback" not in res.output
    for w in words:
        assert w in res.output, (w, res.output)


@pytest.fixture(scope="module")
def slow_config(tmp_path_factory):
    d = tmp_path_factory.mktemp("slow")
    (d / "slow.toml").write_text(SLOW)
    return d / "slow.toml"


@pytest.fixture(scope="module")
def reference(slow_config, tmp_path_factory):
    """The uninterrupted run's folder (written in-process; its results are compared, so no figure)."""
    out = tmp_path_factory.mktemp("ref") / "ref"
    res = cli("run", slow_config, "--out", out, "-q", "--no-figure")
    assert res.exit_code == 0, res.output
    return out


def spawn(*args, env_extra=None, **kw):
    env = {**os.environ, "MPLBACKEND": "Agg", **(env_extra or {})}
    return subprocess.Popen([sys.executable, "-m", "tabsim.cli", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, **kw)


def wait_for_chunks(proc, out: Path, n: int, timeout: float = 120.0) -> int:
    chunks = staging_path(out) / "chunks"
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        have = saved_chunks(chunks)
        if have >= n:
            return have
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before {n} chunks: {proc.communicate()}")
        time.sleep(0.02)
    proc.kill()
    raise AssertionError("no chunks written in time")


def hold(proc, out: Path, n: int) -> int:
    """Wait for ``n`` saved chunks, then stop the process (SIGSTOP) before it can finish; the chunks saved."""
    wait_for_chunks(proc, out, n)
    os.kill(proc.pid, signal.SIGSTOP)
    have = saved_chunks(staging_path(out) / "chunks")
    assert have < 10, "the run finished before it could be stopped"
    return have


# -- an existing --out ------------------------------------------------------------------------
def test_complete_run_refused_then_overwritten_atomically(tmp_path):
    out = tmp_path / "o"
    assert cli(*TINY, "--out", out, "--no-figure").exit_code == 0  # (a figure costs more than the run)
    first = tree_bytes(out)
    assert MARKER in first and "results.parquet" in first
    assert_clean_refusal(cli(*TINY, "--out", out), "complete tabsim run", "--overwrite")
    assert tree_bytes(out) == first
    res = cli(*TINY, "--steps", "20", "--out", out, "--overwrite", "--no-figure")
    assert res.exit_code == 0, res.output
    assert tree_bytes(out)["results.parquet"] != first["results.parquet"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o"]  # no staging, lock or old copy left behind


def test_overwrite_keeps_old_contents_when_the_new_run_fails(tmp_path, monkeypatch):
    out = tmp_path / "o"
    assert cli(*TINY, "--out", out).exit_code == 0
    first = tree_bytes(out)
    import tabsim.plotting.figures

    monkeypatch.setenv("TABSIM_FIGURE_PROCESS", "0")  # the figure in this process, where the patch applies

    def broken(*a, **k):
        raise OSError(28, "No space left on device", str(out / "pass1.png"))

    monkeypatch.setattr(tabsim.plotting.figures, "save_figure", broken)
    res = cli(*TINY, "--steps", "20", "--out", out, "--overwrite")
    assert_clean_refusal(res, "No space left on device", "unchanged")
    assert tree_bytes(out) == first


def test_resume_and_overwrite_together_refused(tmp_path):
    assert_clean_refusal(cli(*TINY, "--out", tmp_path / "o", "--overwrite", "--resume"), "--overwrite", "--resume")


def test_resume_of_a_complete_run_does_nothing(tmp_path):
    out = tmp_path / "o"
    assert cli(*TINY, "--out", out, "--no-figure").exit_code == 0
    first = tree_bytes(out)
    res = cli(*TINY, "--out", out, "--resume")
    assert res.exit_code == 0 and "nothing to resume" in res.output
    assert tree_bytes(out) == first


def test_resume_refuses_foreign_files(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert_clean_refusal(cli(*TINY, "--out", out, "--resume"), "no interrupted run")
    assert tree_bytes(out) == {"notes.txt": b"mine"}


def test_out_that_is_a_file_or_under_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    assert_clean_refusal(cli(*TINY, "--out", f / "sub"), str(f))
    assert f.read_text() == "x"


def test_unwritable_target_one_line(tmp_path):
    # /proc refuses new entries even to root
    assert_clean_refusal(cli(*TINY, "--out", "/proc/tabsim-out"), "/proc")


# -- concurrent writers -----------------------------------------------------------------------
# heavy: a process of its own; test_sigkill_then_resume_is_byte_identical makes the same refusals of a second
# writer while its stopped run holds the lock, and its resume takes over after the kill
@pytest.mark.heavy
def test_second_writer_is_refused(slow_config, tmp_path):
    out = tmp_path / "o"
    proc = spawn("run", slow_config, "--out", out, "-q")
    try:
        hold(proc, out, 1)  # stopped, it holds the lock while this process tries to take it
        res = cli("run", slow_config, "--out", out, "-q")
        assert_clean_refusal(res, "another tabsim process", f"pid {proc.pid}")
        res = cli("run", slow_config, "--out", out, "-q", "--overwrite")  # not even when asked to overwrite
        assert_clean_refusal(res, "another tabsim process")
    finally:
        proc.kill()
        proc.communicate()
    # after the kill the kernel released the lock: a resume may take over
    assert lock_path(out).exists()
    with RunStore(out, resume=True) as st:
        assert st.dir.is_dir()
        st.published = True  # do not publish this half run
    shutil.rmtree(staging_path(out))


# -- real signals and kills -------------------------------------------------------------------
def test_sigint_stops_with_one_line_keeps_chunks_and_resume_is_byte_identical(slow_config, reference, tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    (out / "old.txt").write_text("earlier results")
    proc = spawn("run", slow_config, "--out", out, "-q", "--overwrite")
    hold(proc, out, 2)
    os.kill(proc.pid, signal.SIGINT)  # pending until the process goes on
    os.kill(proc.pid, signal.SIGCONT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    lines = [ln for ln in err.splitlines() if ln.strip() and "chunk/s" not in ln and "%|" not in ln]
    assert len(lines) == 1 and lines[0].startswith("interrupted:"), err
    assert "Traceback" not in err and "--resume" in lines[0]
    assert tree_bytes(out) == {"old.txt": b"earlier results"}  # untouched
    kept = saved_chunks(staging_path(out) / "chunks")
    assert kept >= 2

    res = cli("run", slow_config, "--out", out, "-q")  # neither flag: the interrupted run is not discarded
    assert_clean_refusal(res, "interrupted run left", "--resume")
    res = cli("run", slow_config, "--out", out, "-q", "--resume")
    assert res.exit_code == 0, res.output
    assert (out / "results.parquet").read_bytes() == (reference / "results.parquet").read_bytes()
    import json

    marker = json.loads((out / MARKER).read_text())
    assert marker["chunks_reused"] == kept and marker["chunks_written"] == 10 - kept
    assert not (out / "old.txt").exists() and not staging_path(out).exists()


def test_sigkill_then_resume_is_byte_identical(slow_config, reference, tmp_path):
    out = tmp_path / "o"
    proc = spawn("run", slow_config, "--out", out, "-q")
    try:
        hold(proc, out, 3)  # stopped, it holds the lock: a second writer is refused, even asked to overwrite
        assert_clean_refusal(cli("run", slow_config, "--out", out, "-q"), "another tabsim process", f"pid {proc.pid}")
        assert_clean_refusal(cli("run", slow_config, "--out", out, "-q", "--overwrite"), "another tabsim process")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert not out.exists()  # nothing that looks complete
    assert lock_path(out).exists()  # the kernel released the lock: the resume below takes over
    # truncated checkpoints (as a power cut could leave them) are recomputed
    pack = staging_path(out) / "chunks" / PACK
    pack.write_bytes(pack.read_bytes()[:100])
    res = cli("run", slow_config, "--out", out, "-q", "--resume")
    assert res.exit_code == 0, res.output
    assert (out / "results.parquet").read_bytes() == (reference / "results.parquet").read_bytes()


@pytest.mark.heavy
def test_resume_with_another_config_is_refused(slow_config, tmp_path):
    out = tmp_path / "o"
    proc = spawn("run", slow_config, "--out", out, "-q")
    hold(proc, out, 1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    before = tree_bytes(staging_path(out))
    res = cli("run", slow_config, "--out", out, "-q", "--resume", "--seeds", "3")
    assert_clean_refusal(res, "computed something else", "--overwrite")
    assert tree_bytes(staging_path(out)) == before


# -- a full disk and a read-only target -------------------------------------------------------
def spawn_limited(nbytes, *args):
    """``python -m tabsim.cli ARGS`` with writes past ``nbytes`` per file failing (EFBIG, as a full disk)."""
    code = ("import resource, runpy, sys; "
            f"resource.setrlimit(resource.RLIMIT_FSIZE, ({nbytes}, {nbytes})); "
            f"sys.argv = ['tabsim'] + {list(map(str, args))!r}; runpy.run_module('tabsim.cli', run_name='__main__')")
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "MPLBACKEND": "Agg"})


def test_disk_full_while_writing_one_line_and_old_results_intact(tmp_path):
    out = tmp_path / "o"
    assert cli(*TINY, "--out", out, "--no-figure").exit_code == 0
    first = tree_bytes(out)
    # every file tabsim writes is larger than 2 kB except the small JSON ones: the results frame fails
    proc = spawn_limited(2048, *TINY, "--steps", "20", "--out", out, "--overwrite")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    assert err.strip().count("\n") == 0 and "File too large" in err and str(tmp_path) in err, err
    assert tree_bytes(out) == first
    assert not any(p.name.endswith(".tmp") for p in staging_path(out).rglob("*"))  # no half-written file


def _can_mount() -> bool:
    if shutil.which("unshare") is None:
        return False
    r = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=16k tmpfs /mnt"], capture_output=True)
    return r.returncode == 0


@pytest.mark.skipif(not _can_mount(), reason="needs unshare -m and mount (root in a mount namespace)")
@pytest.mark.parametrize("opts, words", [
    pytest.param("size=40k", "No space left on device", marks=pytest.mark.heavy),  # RLIMIT_FSIZE covers it by default
    ("ro", "Read-only file system")])
def test_real_full_or_read_only_filesystem(tmp_path, opts, words):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    script = (f"mount -t tmpfs -o {opts} tmpfs {mnt} && "
              f"MPLBACKEND=Agg {sys.executable} -m tabsim.cli {' '.join(TINY)} --out {mnt}/o")
    r = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr and words in r.stderr and str(mnt) in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


# -- study scripts and the Python API -------------------------------------------------------
def test_study_store_refuses_and_publishes(tmp_path):
    from tabsim.studies.scripts import study_args, study_store

    out = tmp_path / "study"
    out.mkdir()
    (out / "keep.txt").write_text("k")
    args = study_args("A study.", "quick", out, ["--out", str(out)])
    with pytest.raises(SystemExit, match="not empty"):
        with study_store(args) as dest:
            (dest / "x.txt").write_text("new")
    assert tree_bytes(out) == {"keep.txt": b"k"}
    args = study_args("A study.", "quick", out, ["--out", str(out), "--overwrite"])
    with study_store(args) as dest:
        (dest / "x.txt").write_text("new")
    assert (out / "x.txt").read_text() == "new" and not (out / "keep.txt").exists()


def test_result_save_never_clobbers(tmp_path):
    import tabsim as ts
    from tabsim.runtime.store import OutputExistsError

    res = ts.run({"preset": "paper", "train": {"seeds": 2, "steps": 10}})
    res.save(tmp_path / "r")
    first = tree_bytes(tmp_path / "r")
    with pytest.raises(OutputExistsError, match="overwrite"):
        res.save(tmp_path / "r")
    assert tree_bytes(tmp_path / "r") == first
    res.save(tmp_path / "r", overwrite=True)
    assert ts.Result.load(tmp_path / "r").frame.equals(res.frame)


ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("command", [
    ["run", ROOT / "experiments" / "configs" / "paper_sweep.toml"],
    ["sweep", "--steps", "10"],
    TINY,
    ["reproduce", "-q"],
    ["audit", ROOT / "experiments" / "audits" / "ttrl.yaml", "--no-calibration", "-q"],
    ["prereg", "run", ROOT / "preregistration" / "clipping_null" / "plan.yaml", "--exploratory", "-q"],
], ids=["run", "sweep", "tiny-sweep", "reproduce", "audit", "prereg-run"])
def test_every_writing_command_refuses_a_non_empty_out(tmp_path, command):
    out = tmp_path / "o"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    res = cli(*command, "--out", out)
    assert_clean_refusal(res, "not empty", "--overwrite")
    assert tree_bytes(out) == {"notes.txt": b"mine"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o"]  # no staging folder or lock left behind


@pytest.mark.heavy
def test_reproduce_interrupted_then_resumed_gives_the_same_data(tmp_path, monkeypatch):
    import tabsim.studies.factorial as fac

    ref = tmp_path / "ref"
    assert cli("reproduce", "--out", ref, "-q").exit_code == 0
    real, calls = fac.run_chunk, {"n": 0}

    def dies_after_three(chunk):
        calls["n"] += 1
        if calls["n"] > 3:
            raise KeyboardInterrupt
        return real(chunk)

    out = tmp_path / "o"
    monkeypatch.setattr(fac, "run_chunk", dies_after_three)
    res = cli("reproduce", "--out", out, "-q")
    assert res.exit_code == 130 and "interrupted" in res.output and not out.exists()
    # chunks run two at a time: the third may or may not finish before the fourth's interrupt is seen,
    # so the count to reuse is what the staging folder holds, and at most the three that ran
    kept = saved_chunks(staging_path(out) / "chunks")
    assert 1 <= kept <= 3
    monkeypatch.setattr(fac, "run_chunk", real)
    res = cli("reproduce", "--out", out, "-q", "--resume")
    assert res.exit_code == 0, res.output
    import json

    assert json.loads((out / MARKER).read_text())["chunks_reused"] == kept
    data = sorted(p.name for p in (ref / "data").iterdir())
    assert data and data == sorted(p.name for p in (out / "data").iterdir())
    for name in data:
        assert (out / "data" / name).read_bytes() == (ref / "data" / name).read_bytes(), name


def test_resume_refuses_a_staging_folder_of_another_run(tmp_path):
    out = tmp_path / "o"
    st = RunStore(out, key="another-run").open()
    st.save_chunk("job", 0, {"x": __import__("numpy").zeros(3)})
    st.release()
    before = tree_bytes(staging_path(out))
    assert_clean_refusal(cli(*TINY, "--out", out, "--resume"), "computed something else", "--overwrite")
    assert tree_bytes(staging_path(out)) == before
