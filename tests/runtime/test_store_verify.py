"""The run store trusts only what it wrote: chunks carry their run's key, job and chunk id and their SHA-256
sits in an append-only manifest; ``--resume`` recomputes any chunk that fails and says how many. A published folder
carries the digest of every file, and ``tabsim verify`` names what changed since.

Each attack edits the staging folder of a real, interrupted ``tabsim run`` and must end with the same
bytes as an uninterrupted run (or, for a published folder, with a refusal naming the file).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from tabsim.cli import main
from tabsim.runtime.chunklog import PACK
from tabsim.runtime.manifest import CHUNK_MANIFEST, MARKER
from tabsim.runtime.store import RunStore, staging_path

CONFIG = """\
preset = "paper"
[train]
seeds = 2
steps = 10
chunk_conditions = 1
[sweep]
prior_strength = [0.3, 0.45, 0.6, 0.75]
"""


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    path = tmp_path_factory.mktemp("cfg") / "four.toml"
    path.write_text(CONFIG)
    return path


@pytest.fixture(scope="module")
def reference(config, tmp_path_factory):
    out = tmp_path_factory.mktemp("ref") / "ref"
    res = cli("run", config, "--out", out, "-q")
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture
def interrupted(config, tmp_path, monkeypatch):
    """``tabsim run`` stopped (as by Ctrl-C) after all four chunks were saved, before it published (no figure:
    the runs here check the chunks; the verify tests' ``reference`` has one)."""
    out = tmp_path / "o"

    def stop(self):
        raise KeyboardInterrupt

    with monkeypatch.context() as mp:
        mp.setattr(RunStore, "publish", stop)
        res = cli("run", config, "--out", out, "-q", "--no-figure")
    assert res.exit_code == 130, res.output
    names = sorted(entries(out))
    assert len(names) == 4 and (chunk_dir(out) / PACK).is_file()
    return out, names


def chunk_dir(out):
    return staging_path(out) / "chunks"


def entries(out) -> dict:
    """``{chunk name: manifest line}`` of an interrupted run (the last line of a name counts)."""
    lines = (chunk_dir(out) / CHUNK_MANIFEST).read_text().splitlines()
    return {e["name"]: e for e in map(json.loads, lines[1:])}


def chunk_bytes(out, name) -> bytes:
    e = entries(out)[name]
    return (chunk_dir(out) / PACK).read_bytes()[e["offset"]:e["offset"] + e["size"]]


def read_chunk(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(data).read_all()


def chunk_of(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def forge(out, name, data: bytes, sha: str | None = None) -> None:
    """Append ``data`` to the pack and a manifest line naming it chunk ``name`` (with its SHA-256, or ``sha``)."""
    e = dict(entries(out)[name])
    pack = chunk_dir(out) / PACK
    e.update(offset=pack.stat().st_size, size=len(data), sha256=sha or hashlib.sha256(data).hexdigest())
    with open(pack, "ab") as fh:
        fh.write(data)
    with open(chunk_dir(out) / CHUNK_MANIFEST, "a") as fh:
        fh.write(json.dumps(e) + "\n")


def resume(config, out, reference, recomputed: int, reused: int | None = None):
    res = cli("run", config, "--out", out, "-q", "--resume", "--no-figure")
    assert res.exit_code == 0, res.output
    assert (out / "results.parquet").read_bytes() == (reference / "results.parquet").read_bytes()
    marker = json.loads((out / MARKER).read_text())
    reused = 4 - recomputed if reused is None else reused
    assert marker["chunks_recomputed"] == recomputed and marker["chunks_reused"] == reused
    assert marker["chunks_written"] == 4 - reused
    if recomputed:
        assert f"resume: {recomputed} saved chunk(s) failed verification and are recomputed" in res.output
    else:
        assert "failed verification" not in res.output
    return res.output


def test_untouched_chunks_are_all_reused(config, interrupted, reference):
    out, _ = interrupted
    resume(config, out, reference, 0)


def test_pack_bytes_overwritten_by_another_chunk_are_recomputed(config, interrupted, reference):
    out, names = interrupted
    e = entries(out)[names[1]]
    data = (chunk_bytes(out, names[0]) * 2)[:e["size"]]
    with open(chunk_dir(out) / PACK, "r+b") as fh:
        fh.seek(e["offset"])
        fh.write(data)
    said = resume(config, out, reference, 1)
    assert names[1] in said and "SHA-256 differs" in said


def test_a_chunk_copied_with_its_manifest_entry_is_still_recomputed(config, interrupted, reference):
    """Even with the manifest made to agree, the copy carries another chunk id."""
    out, names = interrupted
    forge(out, names[1], chunk_bytes(out, names[0]))
    assert "carries key/job/chunk" in resume(config, out, reference, 1)


def test_pass1_edited_with_arrow_is_recomputed_never_published(config, interrupted, reference):
    out, names = interrupted
    table = read_chunk(chunk_bytes(out, names[2]))
    i = table.schema.get_field_index("pass1")
    table = table.set_column(i, "pass1", pa.array([1.248] * table.num_rows, table.column(i).type))
    forge(out, names[2], chunk_of(table), sha=entries(out)[names[2]]["sha256"])
    resume(config, out, reference, 1)
    assert pq.read_table(out / "results.parquet").column("pass1").to_numpy().max() <= 1.0


@pytest.mark.parametrize("damage", ["manifest removed", "manifest of another run", "manifest not json",
                                    "chunk of another run", "last line torn", "pack truncated", "pack removed"])
def test_chunks_without_a_trustworthy_manifest_entry_are_recomputed(config, interrupted, reference, damage, tmp_path):
    out, names = interrupted
    mf = chunk_dir(out) / CHUNK_MANIFEST
    recomputed, reused, says = 0, 0, None
    if damage == "manifest removed":
        mf.unlink()
        says = "manifest.jsonl is missing"
    elif damage == "manifest of another run":
        mf.write_text(mf.read_text().replace(json.loads(mf.read_text().splitlines()[0])["key"], "another-run"))
        says = "manifest.jsonl was written for another run"
    elif damage == "manifest not json":
        mf.write_text("{")
        says = "manifest.jsonl is not a tabsim chunk manifest"
    elif damage == "chunk of another run":  # another store's chunk under the same job name and id, with its line
        other = RunStore(tmp_path / "other", key="another-run").open()
        job, index = names[3][:-len("-00003")], int(names[3][-5:])
        pass1 = read_chunk(chunk_bytes(out, names[3])).column("pass1").to_numpy()
        other.save_chunk(job, index, {"pass1": pass1})
        other.release()
        e = entries(tmp_path / "other")[names[3]]
        forge(out, names[3], (chunk_dir(tmp_path / "other") / PACK).read_bytes()[e["offset"]:][:e["size"]])
        recomputed, reused = 1, 3
    elif damage == "last line torn":  # as a kill in the middle of its write: that chunk is missing
        text = mf.read_text()
        mf.write_text(text[:-20])
        reused = 3
    elif damage == "pack truncated":
        last = max(entries(out).values(), key=lambda e: e["offset"])
        with open(chunk_dir(out) / PACK, "r+b") as fh:
            fh.truncate(last["offset"] + 100)
        recomputed, reused = 1, 3
    else:
        (chunk_dir(out) / PACK).unlink()
        recomputed = 4
    said = resume(config, out, reference, recomputed, reused)
    if says:
        assert f"resume: chunks/{says}" in said and "recomputed" in said, said


def test_a_manifest_line_names_bytes_already_in_the_pack(tmp_path, monkeypatch):
    """A kill between the two appends leaves bytes that no line names, never a line naming bytes not written."""
    st = RunStore(tmp_path / "o", key="k").open()
    seen = {}
    real = st._record

    def record(name, entry):
        seen["pack holds it"] = (st.dir / "chunks" / PACK).stat().st_size >= entry["offset"] + entry["size"] > 0
        seen["named before"] = (st.dir / "chunks" / CHUNK_MANIFEST).read_text().count(name)
        real(name, entry)

    monkeypatch.setattr(st, "_record", record)
    st.save_chunk("job", 0, {"x": np.arange(3.0)})
    assert seen == {"pack holds it": True, "named before": 0}
    assert st.load_chunk("job", 0)["x"].tolist() == [0.0, 1.0, 2.0]
    st.release()


def test_saving_a_chunk_appends_and_never_rewrites(tmp_path):
    """Constant cost per chunk: the manifest grows by one line and the pack by one chunk's bytes."""
    st = RunStore(tmp_path / "o", key="k").open()
    mf, pack = st.dir / "chunks" / CHUNK_MANIFEST, st.dir / "chunks" / PACK
    st.save_chunk("job", 0, {"x": np.arange(3.0)})
    ino, before, size = mf.stat().st_ino, mf.read_bytes(), pack.stat().st_size
    for i in range(1, 4):
        st.save_chunk("job", i, {"x": np.arange(3.0) + i})
    assert mf.stat().st_ino == ino and mf.read_bytes().startswith(before)
    assert len(mf.read_bytes().splitlines()) == 1 + 4 and pack.stat().st_size > size
    assert [st.load_chunk("job", i)["x"][0] for i in range(4)] == [0.0, 1.0, 2.0, 3.0]
    st.release()


def fifo_watchdog(fifo, seconds: float = 60.0):
    """A safety net for a FIFO test, not a timing: if something still waits on ``fifo`` after ``seconds``,
    open and close its other end so that the test ends (and fails) instead of hanging."""
    fired, done = threading.Event(), threading.Event()

    def watch():
        if done.wait(seconds):
            return
        for flags in (os.O_WRONLY | os.O_NONBLOCK, os.O_RDONLY | os.O_NONBLOCK):
            try:
                os.close(os.open(fifo, flags))
                fired.set()
            except OSError:
                pass

    threading.Thread(target=watch, daemon=True).start()
    return fired, done


@pytest.mark.parametrize("victim", ["chunks/manifest.jsonl", "chunks/chunks.pack", "staging.json"])
def test_resume_with_a_fifo_in_the_staging_folder_does_not_hang(config, interrupted, reference, victim):
    out, _ = interrupted
    path = staging_path(out) / victim
    path.unlink()
    os.mkfifo(path)
    fired, done = fifo_watchdog(path)
    try:
        res = cli("run", config, "--out", out, "-q", "--resume", "--no-figure")
    finally:
        done.set()
    assert not fired.is_set(), "the store waited on a FIFO"
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    if victim == "staging.json":
        assert res.exit_code == 1 and "staging.json is a FIFO, not a regular file" in res.output, res.output
        assert len(lines) == 1 and "Traceback" not in res.output
        return
    assert res.exit_code == 0, res.output
    assert (out / "results.parquet").read_bytes() == (reference / "results.parquet").read_bytes()
    marker = json.loads((out / MARKER).read_text())
    assert marker["chunks_written"] == 4 and marker["chunks_reused"] == 0
    if victim == "chunks/manifest.jsonl":
        assert lines == ["resume: chunks/manifest.jsonl is a FIFO, not a regular file; its chunks are not trusted "
                         "and are recomputed"], res.output


# -- published folders ------------------------------------------------------------------------
def test_verify_a_published_folder_names_what_changed(reference, tmp_path):
    out = tmp_path / "pub"
    shutil.copytree(reference, out)
    res = cli("verify", out)
    assert res.exit_code == 0 and "all 4 file(s) as published" in res.output, res.output
    files = json.loads((out / MARKER).read_text())["files"]
    assert sorted(files) == ["config.json", "pass1.png", "provenance.json", "results.parquet"]
    (out / "results.parquet").write_bytes((out / "results.parquet").read_bytes() + b"\0")
    (out / "config.json").unlink()
    (out / "notes.txt").write_text("added later")
    res = cli("verify", out)
    assert res.exit_code == 1 and isinstance(res.exception, SystemExit), res.output
    assert "changed results.parquet" in res.output and "missing config.json" in res.output
    assert "added notes.txt" in res.output and "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) == 1


@pytest.mark.parametrize("case, words", [
    ("not a run", "not a folder published by tabsim"),
    ("no such folder", "not a folder"),
    ("marker not json", "unreadable"),
    ("marker without digests", "records no file digests"),
    ("marker with a bad manifest", "corrupted file manifest"),
])
def test_verify_refuses_what_it_cannot_check(reference, tmp_path, case, words):
    out = tmp_path / "pub"
    shutil.copytree(reference, out)
    marker = json.loads((out / MARKER).read_text())
    if case == "not a run":
        (out / MARKER).unlink()
    elif case == "no such folder":
        out = tmp_path / "missing"
    elif case == "marker not json":
        (out / MARKER).write_text("{")
    elif case == "marker without digests":
        marker.pop("files")
        (out / MARKER).write_text(json.dumps(marker))
    else:
        marker["files"] = ["results.parquet"]
        (out / MARKER).write_text(json.dumps(marker))
    res = cli("verify", out)
    assert res.exit_code == 1 and isinstance(res.exception, SystemExit), res.output
    assert words in res.output and len(res.output.strip().splitlines()) == 1, res.output


def test_a_forged_chunk_outside_the_metric_ranges_is_recomputed(config, reference, interrupted):
    """A chunk rewritten with pass@1 = 1.249 and its manifest entry forged to match was trusted and published."""
    out, names = interrupted
    t = read_chunk(chunk_bytes(out, names[0]))
    col = t.column("pass1").to_numpy().copy()
    col[0] = 1.249
    forge(out, names[0], chunk_of(t.set_column(t.schema.get_field_index("pass1"), "pass1", pa.array(col))))
    output = resume(config, out, reference, recomputed=1)
    assert "pass1" in output and "outside" in output, output


@pytest.mark.parametrize("name, values, words", [
    ("results.parquet", {"pass1": [0.5, 1.249]}, ("pass1", "1.249", "[0, 1]")),
    ("data/runs.csv", {"entropy": [0.3, -0.5]}, ("entropy", "-0.5", ">= 0")),
    ("results.parquet", {"mode_correct": [0.2, float("-inf")]}, ("mode_correct", "-inf")),
])
def test_publish_refuses_a_metric_outside_its_range(tmp_path, name, values, words):
    """Whatever wrote the frame, a metric outside its range is not published (exit 1, ``--out`` untouched)."""
    import pandas as pd

    from tabsim.runtime.store import OutputError

    out = tmp_path / "o"
    frame = pd.DataFrame({"step": [0, 1], "arm": ["true", "true"], **values})
    with pytest.raises(OutputError) as err:
        with RunStore(out, key="k", description="test") as store:
            path = store.dir / name
            path.parent.mkdir(parents=True, exist_ok=True)
            frame.to_csv(path, index=False) if name.endswith(".csv") else frame.to_parquet(path)
    for word in words:
        assert word in str(err.value), str(err.value)
    assert not out.exists()


def test_publish_accepts_metrics_in_range(tmp_path):
    import pandas as pd

    out = tmp_path / "o"
    with RunStore(out, key="k", description="test") as store:
        pd.DataFrame({"pass1": [0.0, 1.0], "entropy": [0.0, 2.0], "kl_ref": [0.0, 3.0],
                      "pass@4": [0.1, 1.0]}).to_parquet(store.dir / "results.parquet")
    assert (out / "results.parquet").is_file()
