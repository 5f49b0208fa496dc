"""What a run store reads and writes besides its folders: the range of every metric (a value outside it is
no result), a saved chunk's bytes checked as they are decoded, bounded JSON reads, and the atomic exchange
of two folders (:mod:`tabsim.runtime.store` publishes with it)."""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import json
import math
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tabsim.runtime.manifest import UntrustedFile, read_regular

MAX_JSON_BYTES = 64 << 20  # staging.json, .tabsim-run.json: a few hundred bytes to a few MiB of file digests

# The range of every metric a run records (names of the frame's columns and of the chunks' arrays): a value
# outside it is not a result (a forged or damaged chunk, a rewritten frame), so it is neither reused nor
# published. NaN is left to the reader (a diverged run reports it); +-inf is out of every range.
METRIC_RANGES = {"pass1": (0.0, 1.0), "mode_correct": (0.0, 1.0), "format_mass": (0.0, 1.0),
                 "entropy": (0.0, math.inf), "kl_ref": (0.0, math.inf), "grad_cosine": (-1.0, 1.0),
                 "log_ratio_range": (0.0, math.inf)}
METRIC_PREFIXES = {"pass@": (0.0, 1.0), "maj@": (0.0, 1.0)}
RANGE_SLACK = 1e-4  # float32 sums of probabilities may end a few ulps above 1 (or a KL a few below 0)
FRAME_FILES = ("results.parquet", "results.csv", "data.parquet", "data.csv", "data/*.parquet", "data/*.csv",
               "prompts.parquet", "prompts.csv")  # the last two: train.prompt_metrics' per-prompt frame
PER_PROMPT = "prompt:"  # a chunk's per-prompt arrays (tabsim.sim.envs.base.PROMPT_PREFIX): the metric's range


def metric_range(name: str) -> tuple[float, float] | None:
    """``(low, high)`` of the metric ``name``, or None when it is not a metric with a known range."""
    name = name.removeprefix(PER_PROMPT)
    if name in METRIC_RANGES:
        return METRIC_RANGES[name]
    for prefix, bounds in METRIC_PREFIXES.items():
        if name.startswith(prefix):
            return bounds
    return None


def out_of_range(name: str, values) -> str | None:
    """``"pass1 = 1.249 is outside [0, 1]"`` for the first value of metric ``name`` outside its range, or None."""
    bounds = metric_range(name)
    if bounds is None:
        return None
    a = np.asarray(values, dtype=np.float64).reshape(-1)
    lo, hi = bounds
    bad = ~np.isnan(a) & ((a < lo - RANGE_SLACK) | (a > hi + RANGE_SLACK) | np.isinf(a))
    if not bad.any():
        return None
    where = "[0, 1]" if hi == 1.0 else f">= {lo:g}"
    return f"{name} = {float(a[bad][0])!r} is outside its range ({name} {'in ' if hi == 1.0 else ''}{where})"


def frame_problem(path: Path) -> str | None:
    """The first metric of the frame file ``path`` outside its range, or None."""
    # lazy: the CSV reader only when a CSV frame is published
    import pyarrow.csv as pacsv

    if path.suffix == ".parquet":
        names = [n for n in pq.read_schema(path).names if metric_range(n) is not None]
        table = pq.read_table(path, columns=names) if names else None
    else:
        table = pacsv.read_csv(path)
        names = [n for n in table.column_names if metric_range(n) is not None]
    for name in names:
        col = table.column(name).to_numpy(zero_copy_only=False)
        if col.dtype.kind in "fiu":
            why = out_of_range(name, col)
            if why:
                return why
    return None


def encode_chunk(arrays: dict, key: str | None, job: str, index: int, default=None):
    """Chunk ``index`` of ``job`` as an Arrow IPC stream (a buffer): one flat column per array (padded to one
    length), and in its metadata the store's ``key``, the job, the chunk id and each array's dtype and shape
    (``default`` serialises what JSON cannot); :func:`decode_chunk` reads it back."""
    arrays = {k: np.asarray(v) for k, v in arrays.items()}
    size = max((a.size for a in arrays.values()), default=0)
    cols, info = {}, {}
    for name, a in arrays.items():
        flat = a.reshape(-1)
        if flat.size != size:  # columns of one table need one length
            flat = np.concatenate([flat, np.zeros(size - flat.size, a.dtype)])
        cols[name] = pa.array(flat)
        info[name] = {"dtype": a.dtype.str, "shape": list(a.shape)}
    carried = {"arrays": info, "key": key, "job": job, "index": index}
    table = pa.table(cols).replace_schema_metadata({"tabsim": json.dumps(carried, default=default)})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:  # microseconds, where Parquet takes a millisecond
        writer.write_table(table)
    return sink.getvalue()


def decode_chunk(data, expected: tuple, entry: dict) -> tuple[dict | None, str | None]:
    """``(arrays, None)`` from a chunk's bytes (an Arrow IPC stream), or ``(None, why)`` when they are not
    chunk ``expected`` = ``(key, job, index)`` or hold a metric outside its range."""
    table = pa.ipc.open_stream(data).read_all()
    table.validate(full=True)
    meta = json.loads(table.schema.metadata[b"tabsim"])
    carried = (meta.get("key"), meta.get("job"), meta.get("index"))
    if carried != expected or (entry.get("job"), entry.get("index")) != expected[1:]:
        return None, f"carries key/job/chunk {carried}, not {expected}"
    out = {}
    for name, info in meta["arrays"].items():
        col = table.column(name).to_numpy()[:math.prod(info["shape"])]  # less the padding of a shorter array
        out[name] = col.astype(info["dtype"], copy=False).reshape(info["shape"])
        why = out_of_range(name, out[name])
        if why:
            return None, why
    return out, None


def read_json(path: Path, why: bool = False):
    """The JSON object in the regular file ``path`` (read without blocking, at most :data:`MAX_JSON_BYTES`),
    or None; with ``why``, ``(object or None, why not)``."""
    try:
        obj, problem = json.loads(read_regular(path, MAX_JSON_BYTES)), None
        if not isinstance(obj, dict):
            obj, problem = None, f"{path.name} is not a JSON object"
    except FileNotFoundError:
        obj, problem = None, f"no {path.name}"
    except UntrustedFile as err:
        obj, problem = None, str(err)
    except (OSError, ValueError) as err:
        obj, problem = None, f"{path.name} is unreadable ({type(err).__name__})"
    return (obj, problem) if why else obj


RENAME_EXCHANGE = 2


def exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``); False where unsupported."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    rc = fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))
