"""Chunk checkpoints: the cost of saving a chunk, at the first chunk and at the last.

    python experiments/bench_store.py [--chunks 2200] [--units 32] [--no-reference]

Saves ``--chunks`` chunks of the size ``tabsim reproduce`` writes (32 condition x seed units x 3 arms x
2 evaluation points x 8 metrics, float32: about 7 kB of Parquet) through :class:`tabsim.runtime.store.RunStore`,
then reads every one back as ``--resume`` does. In the same process, the reference: a plain
re-implementation of the earlier store, which wrote each chunk to a Parquet file of its own, hashed it
and rewrote the whole indented JSON manifest (so the n-th chunk cost grows with n).

Prints, for each: the total seconds, the mean seconds of the first and of the last 100 chunks and their
ratio (last / first: 1 for a constant cost per chunk; the ratio of the medians too, which a busy
machine's pauses move less); then a JSON line with every figure. Run it with
``PYTHONPATH=`` pointing at another checkout to measure that checkout's store.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import tabsim.runtime.store as store_mod
from tabsim.runtime.store import RunStore

METRICS = ("clip_frac", "entropy", "format_mass", "kept_frac", "kl_ref", "mode_correct", "pass1", "reward_mean")


def chunk_arrays(units: int, i: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(i)
    return {m: rng.random((units, 3, 2), dtype=np.float32) for m in METRICS}


def summary(times: list[float]) -> dict:
    first, last = statistics.fmean(times[:100]), statistics.fmean(times[-100:])
    med = statistics.median(times[-100:]) / statistics.median(times[:100])
    return {"total_seconds": round(sum(times), 3), "first100_mean_ms": round(first * 1e3, 4),
            "last100_mean_ms": round(last * 1e3, 4), "last_over_first": round(last / first, 3),
            "last_over_first_median": round(med, 3)}


def bench_store(folder: Path, n: int, units: int) -> dict:
    """The store of this checkout: ``save_chunk`` n times, then ``load_chunk`` of each in a resumed store."""
    st = RunStore(folder / "o", key="bench").open()
    times = []
    for i in range(n):
        arrays = chunk_arrays(units, i)
        t = time.perf_counter()
        st.save_chunk("job", i, arrays)
        times.append(time.perf_counter() - t)
    st.release()
    t = time.perf_counter()
    again = RunStore(folder / "o", key="bench", resume=True).open()
    loaded = sum(again.load_chunk("job", i) is not None for i in range(n))
    load = time.perf_counter() - t
    again.release()
    assert loaded == n, f"only {loaded} of {n} chunks read back"
    return {**summary(times), "resume_load_seconds": round(load, 3)}


def _atomic(path: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    write(tmp)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def _sha(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def bench_reference(folder: Path, n: int, units: int) -> dict:
    """The earlier algorithm: a Parquet file per chunk, its SHA-256, and the whole manifest rewritten."""
    chunks = folder / "ref" / "chunks"
    chunks.mkdir(parents=True)
    manifest: dict[str, dict] = {}
    times = []
    for i in range(n):
        arrays = chunk_arrays(units, i)
        t = time.perf_counter()
        info = {k: {"dtype": a.dtype.str, "shape": list(a.shape)} for k, a in arrays.items()}
        carried = {"arrays": info, "key": "bench", "job": "job", "index": i}
        table = pa.table({k: pa.array(a.reshape(-1)) for k, a in arrays.items()})
        table = table.replace_schema_metadata({"tabsim": json.dumps(carried)})
        path = chunks / f"job-{i:05d}.parquet"
        fd, tmp = tempfile.mkstemp(dir=chunks, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
        pq.write_table(table, tmp)
        manifest[path.name] = {"sha256": _sha(tmp), "job": "job", "index": i}
        text = json.dumps({"schema": "tabsim.chunks/1", "key": "bench", "chunks": manifest}, indent=2,
                          sort_keys=True) + "\n"
        _atomic(chunks / "manifest.json", lambda p: Path(p).write_text(text))
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        times.append(time.perf_counter() - t)
    return summary(times)


def show(name: str, r: dict) -> None:
    print(f"{name:10s} total {r['total_seconds']:7.3f} s   first 100: {r['first100_mean_ms']:.3f} ms/chunk   "
          f"last 100: {r['last100_mean_ms']:.3f} ms/chunk   last/first {r['last_over_first']:.2f} "
          f"(medians {r['last_over_first_median']:.2f})"
          + (f"   resume reads all in {r['resume_load_seconds']:.3f} s" if "resume_load_seconds" in r else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=2200)
    ap.add_argument("--units", type=int, default=32, help="condition x seed units per chunk (default 32)")
    ap.add_argument("--no-reference", action="store_true", help="skip the earlier algorithm")
    args = ap.parse_args()
    if args.chunks < 200:
        ap.error("--chunks: at least 200 (first and last 100 are compared)")
    folder = Path(tempfile.mkdtemp(prefix="bench_store."))
    try:
        out = {"chunks": args.chunks, "units": args.units, "store_module": store_mod.__file__,
               "load_average": os.getloadavg()[0]}
        out["store"] = bench_store(folder, args.chunks, args.units)
        show("store", out["store"])
        if not args.no_reference:
            out["reference"] = bench_reference(folder, args.chunks, args.units)
            show("reference", out["reference"])
            out["speedup_total"] = round(out["reference"]["total_seconds"] / out["store"]["total_seconds"], 2)
            print(f"store is {out['speedup_total']:.1f}x the reference over {args.chunks} chunks")
        print(json.dumps(out))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
