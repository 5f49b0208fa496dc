"""The run store trusts only what it wrote: chunks carry their run's key, job and chunk id and their SHA-256
sits in a manifest; ``--resume`` recomputes any chunk that fails and says how many. A published folder
carries the digest of every file, and ``tabsim verify`` names what changed since.

Each attack edits the staging folder of a real, interrupted ``tabsim run`` and must end with the same
bytes as an uninterrupted run (or, for a published folder, with a refusal naming the file).
"""
from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from tabsim.cli import main
from tabsim.runtime import store as store_mod
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
    """``tabsim run`` stopped (as by Ctrl-C) after all four chunks were saved, before it published."""
    out = tmp_path / "o"

    def stop(self):
        raise KeyboardInterrupt

    with monkeypatch.context() as mp:
        mp.setattr(RunStore, "publish", stop)
        res = cli("run", config, "--out", out, "-q")
    assert res.exit_code == 130, res.output
    chunks = sorted((staging_path(out) / "chunks").glob("*.parquet"))
    assert len(chunks) == 4 and (staging_path(out) / "chunks" / CHUNK_MANIFEST).is_file()
    return out, chunks


def resume(config, out, reference, recomputed: int):
    res = cli("run", config, "--out", out, "-q", "--resume")
    assert res.exit_code == 0, res.output
    assert (out / "results.parquet").read_bytes() == (reference / "results.parquet").read_bytes()
    marker = json.loads((out / MARKER).read_text())
    assert marker["chunks_recomputed"] == recomputed and marker["chunks_reused"] == 4 - recomputed
    if recomputed:
        assert f"resume: {recomputed} saved chunk(s) failed verification and are recomputed" in res.output
    else:
        assert "failed verification" not in res.output
    return res.output


def test_untouched_chunks_are_all_reused(config, interrupted, reference):
    out, _ = interrupted
    resume(config, out, reference, 0)


def test_a_chunk_copied_over_another_is_recomputed(config, interrupted, reference):
    out, chunks = interrupted
    shutil.copyfile(chunks[0], chunks[1])
    said = resume(config, out, reference, 1)
    assert chunks[1].name in said


def test_a_chunk_copied_with_its_manifest_entry_is_still_recomputed(config, interrupted, reference):
    """Even with the manifest made to agree, the copy carries another chunk id."""
    out, chunks = interrupted
    shutil.copyfile(chunks[0], chunks[1])
    mf = staging_path(out) / "chunks" / CHUNK_MANIFEST
    data = json.loads(mf.read_text())
    data["chunks"][chunks[1].name]["sha256"] = data["chunks"][chunks[0].name]["sha256"]
    mf.write_text(json.dumps(data))
    assert "carries key/job/chunk" in resume(config, out, reference, 1)


def test_pass1_edited_with_pyarrow_is_recomputed_never_published(config, interrupted, reference):
    out, chunks = interrupted
    table = pq.read_table(chunks[2])
    i = table.schema.get_field_index("pass1")
    table = table.set_column(i, "pass1", pa.array([1.248] * table.num_rows, table.column(i).type))
    pq.write_table(table, chunks[2])
    resume(config, out, reference, 1)
    assert json.loads((out / MARKER).read_text())["chunks_recomputed"] == 1
    assert pq.read_table(out / "results.parquet").column("pass1").to_numpy().max() <= 1.0


@pytest.mark.parametrize("damage", ["manifest removed", "manifest of another run", "manifest not json",
                                    "chunk of another run"])
def test_chunks_without_a_trustworthy_manifest_entry_are_recomputed(config, interrupted, reference, damage, tmp_path):
    out, chunks = interrupted
    mf = staging_path(out) / "chunks" / CHUNK_MANIFEST
    if damage == "manifest removed":
        mf.unlink()
        n = 4
    elif damage == "manifest of another run":
        mf.write_text(mf.read_text().replace(json.loads(mf.read_text())["key"], "another-run"))
        n = 4
    elif damage == "manifest not json":
        mf.write_text("{")
        n = 4
    else:  # a chunk that another store wrote under the same job name and id, with its manifest entry
        other = RunStore(tmp_path / "other", key="another-run").open()
        name = chunks[3].name
        job, index = name[:-len("-00003.parquet")], int(name[-13:-8])
        path = other.save_chunk(job, index, {"pass1": pq.read_table(chunks[3]).column("pass1").to_numpy()})
        other.release()
        shutil.copyfile(path, chunks[3])
        data = json.loads(mf.read_text())
        data["chunks"][name]["sha256"] = store_mod.file_sha256(chunks[3])
        mf.write_text(json.dumps(data))
        n = 1
    resume(config, out, reference, n)


def test_a_chunk_is_named_in_the_manifest_before_it_appears(tmp_path, monkeypatch):
    """A kill between the manifest and the rename leaves an entry without a file, never a file without one."""
    st = RunStore(tmp_path / "o", key="k").open()
    seen = {}
    real = st._record

    def record(name, entry):
        real(name, entry)
        seen["file there"] = (st.dir / "chunks" / name).exists()

    monkeypatch.setattr(st, "_record", record)
    st.save_chunk("job", 0, {"x": __import__("numpy").arange(3.0)})
    assert seen == {"file there": False}
    st.release()


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
    from tabsim.runtime.manifest import file_sha256

    out, chunks = interrupted
    t = pq.read_table(chunks[0])
    col = t.column("pass1").to_numpy().copy()
    col[0] = 1.249
    pq.write_table(t.set_column(t.schema.get_field_index("pass1"), "pass1", pa.array(col)), chunks[0])
    manifest = staging_path(out) / "chunks" / CHUNK_MANIFEST
    data = json.loads(manifest.read_text())
    data["chunks"][chunks[0].name]["sha256"] = file_sha256(chunks[0])
    manifest.write_text(json.dumps(data))
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
