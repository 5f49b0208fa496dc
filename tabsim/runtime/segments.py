"""A long chunk run in segments of steps, with its state carried (and checkpointed) between them.

A chunk whose work exceeds :data:`tabsim.runtime.planning.SEGMENTED_ABOVE` is not one call of the compiled
``train`` but a loop over the programs of :func:`tabsim.sim.engine.make_segments`, each advancing every run of
the chunk by about :data:`tabsim.runtime.planning.SEGMENT_UNITS` of work (a fraction of a second). Between
two calls the host:

* lets Ctrl-C through (Python sees a signal only between two calls into XLA): a run stops within about
  a second instead of at the end of a chunk that may take hours;
* keeps a checkpoint of the carried state (the policy tables, the optimizer's moments, the step, the
  diagnostics' sums and the evaluation points so far) in the run store's staging folder: written at once
  when the run is interrupted, and every :data:`CHECKPOINT_SECONDS` otherwise (or less often when
  writing it takes long), so ``--resume`` continues from the last segment, not from the chunk's start;
* ticks the progress bar (in training steps) and, once the first segments are timed, says how long the run will take when
  that is more than a minute.

The numbers are the bits of the uncut program (the draws are addressed by ``(seed, step, tag)``; see
:func:`tabsim.sim.engine.make_segments` and ``tests/runtime/test_segments.py``).
"""
from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from pathlib import Path

import jax
import numpy as np

from tabsim.files.atomic import atomic_path
from tabsim.runtime.executors import INTERRUPTED, UNSAVED
from tabsim.runtime.cuts import calls, progress_segment, steps_done  # noqa: F401  (re-exported: the cut's home)
from tabsim.runtime.progress import describe_seconds

CHECKPOINT_SECONDS = 30.0  # between two checkpoints of a running chunk (at least 20x the time one takes)
ANNOUNCE_ABOVE = 60.0  # seconds: longer runs say how long they will take
FORMAT = "tabsim.segments/1"

STOP = INTERRUPTED  # set by an interrupted executor: chunks in other threads checkpoint and stop


class Interrupted(KeyboardInterrupt):
    """A chunk stopped between two segments because the run was interrupted (its state was checkpointed)."""


class Hooks:
    """What a chunk run in this process does between segments: checkpoints in ``folder`` (None: none),
    progress ticks (``tick(n)``: ``n`` more calls done; the bar's ``tick`` is given the steps they did,
    from ``done``, the steps after each call of a chunk's plan) and the time estimate of the whole run
    (``chunks`` chunks, ``parallel`` at a time)."""

    def __init__(self, folder: Path | None, job: str, *, tick=None, chunks: int = 1, parallel: int = 1,
                 announce: bool = False, desc: str = "tabsim run", say=None, done: list[int] | None = None):
        self.folder, self.job, self._tick = (Path(folder) if folder else None), job, tick
        self.chunks, self.parallel, self.announce, self.desc = chunks, max(1, parallel), announce, desc
        self.lock = threading.Lock()
        self.announced = False
        self.resumed = 0  # segments continued from checkpoints
        self.say = say or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.done = done
        self._at = threading.local()  # calls done in the chunk this thread runs

    def tick(self, n: int) -> None:
        if self._tick is None:
            return
        if self.done is None:
            self._tick(n)
            return
        pos = getattr(self._at, "pos", 0)
        new = min(pos + n, len(self.done) - 1)
        self._at.pos = 0 if new == len(self.done) - 1 else new  # a finished chunk: the thread's next starts at 0
        if self.done[new] > self.done[pos]:
            self._tick(self.done[new] - self.done[pos])

    def path(self, hp_digest: str) -> Path | None:
        return None if self.folder is None else self.folder / f"{self.job}-{hp_digest}.npz"

    def estimate(self, per_call: float, left_calls: int, n_calls: int) -> None:
        """Say how long the run will take (once, when more than :data:`ANNOUNCE_ABOVE`): ``left_calls`` of this
        chunk's ``n_calls`` segments to go, and as many for each chunk still to start."""
        with self.lock:
            if self.announced or not self.announce:
                return
            self.announced = True
        rounds = -(-self.chunks // self.parallel)  # chunks one after another in each thread
        left = per_call * (left_calls + (rounds - 1) * n_calls)
        if left > ANNOUNCE_ABOVE:
            self.say(f"{self.desc}: {describe_seconds(left)} to go ({self.chunks} chunk(s) of {n_calls} segments); "
                     "Ctrl-C stops within about a second and --resume continues from the last segment")


def digest_arrays(tree) -> str:
    """SHA-256 (16 hex digits) of a pytree of arrays: names a chunk by its hyperparameters."""
    h = hashlib.sha256()
    for leaf in jax.tree_util.tree_leaves(tree):
        a = np.asarray(leaf)
        h.update(a.dtype.str.encode() + str(a.shape).encode() + a.tobytes())
    return h.hexdigest()[:16]


def _save(path: Path, meta: dict, arrays: dict) -> None:
    h = hashlib.sha256()
    for name in sorted(arrays):
        h.update(name.encode() + arrays[name].tobytes())
    meta = {**meta, "sha256": h.hexdigest()}
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:  # a file object: np.savez adds no suffix
        np.savez(fh, __meta__=np.frombuffer(json.dumps(meta).encode(), np.uint8), **arrays)


def _load(path: Path, meta: dict) -> tuple[int, dict] | None:
    """``(position, arrays)`` of a checkpoint written for ``meta`` (job, cut), or None (foreign, damaged)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            got = json.loads(bytes(z["__meta__"]).decode())
            arrays = {k: z[k] for k in z.files if k != "__meta__"}
    except Exception:  # a truncated or foreign file is recomputed, never trusted
        return None
    if any(got.get(k) != v for k, v in meta.items()):
        return None
    h = hashlib.sha256()
    for name in sorted(arrays):
        h.update(name.encode() + arrays[name].tobytes())
    if got.get("sha256") != h.hexdigest() or not isinstance(got.get("pos"), int):
        return None
    return got["pos"], arrays


def _flat(prefix: str, tree) -> dict:
    return {f"{prefix}/{i}": np.asarray(x) for i, x in enumerate(jax.tree_util.tree_leaves(tree))}


def _unflat(prefix: str, like, arrays: dict):
    leaves, treedef = jax.tree_util.tree_flatten(like)
    new = []
    for i, x in enumerate(leaves):
        a = arrays.get(f"{prefix}/{i}")
        if a is None or a.shape != np.shape(x) or a.dtype != np.asarray(x).dtype:
            raise ValueError(prefix)
        new.append(a)
    return jax.tree_util.tree_unflatten(treedef, new)


def run_chunk(segs, call, seeds, hp, segment: int, hooks: Hooks | None = None) -> dict[str, np.ndarray]:
    """The chunk's history ``{metric: [R, E + 1]}`` (runs in ``train``'s order) computed in segments.

    ``segs``: :class:`tabsim.sim.engine.Segments`; ``call(name, length, program, *args)`` runs a program (through
    the executable store); ``hooks``: checkpoints, progress and the estimate (None: none of them)."""
    plan = calls(segs.steps, segs.eval_every, segment)
    task, state, sums, first = call("init", 0, segs.program("init"), seeds, hp)
    path = hooks.path(digest_arrays(hp)) if hooks is not None else None
    meta = {"format": FORMAT, "job": hooks.job if hooks else "", "segment": segment, "calls": len(plan),
            "steps": segs.steps}
    pos, state, sums, outs, diags = _resume(path, meta, plan, state, sums, first, hooks)
    _advance(segs, call, seeds, hp, task, plan, (pos, state, sums), outs, diags, hooks, _Checkpoints(path, meta, pos))
    return _history(segs, call, seeds, hp, first, outs, diags)


def _resume(path: Path | None, meta: dict, plan: list, state, sums, first, hooks: Hooks | None):
    """``(position, state, sums, points, diagnostics)`` to start from: a checkpoint of this chunk at ``path``
    that fits it (its position ticked on the bar), else the chunk's start."""
    outs: list = []  # evaluation points so far (metrics, or tables when evaluated together at the end)
    diags: list = []
    pos = 0
    if path is None or not path.is_file():
        return pos, state, sums, outs, diags
    loaded = _load(path, meta)
    try:
        if loaded is not None and 0 < loaded[0] < len(plan):
            at, got = loaded
            n_out = int(got["n_points"])
            new = (_unflat("state", state, got), _unflat("sums", sums, got),
                   [_unflat("outs", _like(first, n_out), got)] if n_out else [],
                   [{k[6:]: v for k, v in got.items() if k.startswith("diags/")}] if n_out else [])
            if n_out != sum(1 for c in plan[:at] if c[0] == "point") + sum(c[1] for c in plan[:at]
                                                                           if c[0] == "intervals"):
                raise ValueError("points")
            state, sums, outs, diags = new
            pos = at
    except (ValueError, KeyError):
        pos = 0  # a checkpoint that does not fit this chunk: started again
    if pos and hooks is not None:
        hooks.resumed += pos
        hooks.tick(pos)
    return pos, state, sums, outs, diags


class _Checkpoints:
    """A chunk's checkpoints at ``path`` (None: none): every :data:`CHECKPOINT_SECONDS` at most (or 20 times
    what one takes to write), and when the chunk is interrupted."""

    def __init__(self, path: Path | None, meta: dict, pos: int):
        self.path, self.meta, self.saved_at = path, meta, pos
        self.last, self.cost = time.perf_counter(), 0.0

    def due(self) -> bool:
        return self.path is not None and time.perf_counter() - self.last >= max(CHECKPOINT_SECONDS, 20 * self.cost)

    def save(self, snapshot, outs: list, diags: list) -> None:
        """Write ``snapshot`` (position, state, sums, points so far): nothing new since the start or the last one."""
        if self.path is None or snapshot[0] in (0, self.saved_at):
            return
        t0 = time.perf_counter()
        p, st, sm, n = snapshot
        arrays = {**_flat("state", jax.device_get(st)), **_flat("sums", jax.device_get(sm))}
        points = _merge(outs[:n], diags[:n]) if n else None
        arrays["n_points"] = np.asarray(0 if points is None else points[2])
        if points is not None:
            arrays.update(_flat("outs", points[0]))
            arrays.update({f"diags/{k}": v for k, v in points[1].items()})
        _save(self.path, {**self.meta, "pos": p}, arrays)
        self.saved_at = p
        UNSAVED.discard(threading.get_ident())  # the latest snapshot is saved
        self.last = time.perf_counter()
        self.cost = self.last - t0


def _advance(segs, call, seeds, hp, task, plan: list, start: tuple, outs: list, diags: list, hooks: Hooks | None,
             saves: _Checkpoints) -> None:
    """Run the calls of ``plan`` from ``start`` = ``(position, state, sums)``, appending each evaluation point
    to ``outs`` and ``diags``; between two calls: ticks, the estimate, checkpoints and a pending interrupt."""
    pos, state, sums = start
    snap = (pos, state, sums, len(outs))
    timed: list = []
    try:
        while pos < len(plan):
            t0 = time.perf_counter()
            state, sums = _call(segs, call, seeds, hp, task, plan[pos], state, sums, outs, diags)
            pos += 1
            snap = (pos, state, sums, len(outs))  # one assignment: what a checkpoint may save
            if saves.path is not None:
                UNSAVED.add(threading.get_ident())  # an interrupted executor waits for its checkpoint
            if hooks is not None:
                hooks.tick(1)
                timed.append(time.perf_counter() - t0)
                if len(timed) == 3:  # the first call compiles; two more give the pace
                    hooks.estimate(min(timed[1:]), len(plan) - pos, len(plan))
            if pos < len(plan) and saves.due():
                saves.save(snap, outs, diags)
            if STOP.is_set():
                raise Interrupted()
    except BaseException as err:
        try:
            if isinstance(err, KeyboardInterrupt):
                saves.save(snap, outs, diags)
        finally:
            UNSAVED.discard(threading.get_ident())
        raise
    # every call done: a thread of the executor stays among the unsaved until it has handed the chunk's
    # output on (tabsim.runtime.executors._threaded_map), so that an interrupt meanwhile waits for it


def _call(segs, call, seeds, hp, task, step: tuple[str, int], state, sums, outs: list, diags: list):
    """One call of the cut (:func:`tabsim.runtime.cuts.calls`): the new ``(state, sums)``; an evaluation
    point's metrics and diagnostics are appended to ``outs`` and ``diags``."""
    name, n = step
    if name == "advance":
        state, sums = call(name, n, segs.program(name, n), seeds, hp, task, state, sums)
        jax.block_until_ready(state)
    elif name == "point":
        sums, (o, d) = jax.device_get(call(name, 0, segs.program(name), seeds, hp, task, state, sums))
        outs.append(jax.tree_util.tree_map(lambda x: np.asarray(x)[:, None], o))
        diags.append({k: np.asarray(v)[:, None] for k, v in d.items()})
    else:
        state, od = call(name, n, segs.program(name, n), seeds, hp, task, state)
        o, d = jax.device_get(od)
        outs.append(jax.tree_util.tree_map(np.asarray, o))
        diags.append({k: np.asarray(v) for k, v in d.items()})
    return state, sums


def _history(segs, call, seeds, hp, first, outs: list, diags: list) -> dict[str, np.ndarray]:
    """The chunk's history from its first evaluation and the points after it (the diagnostics NaN at step 0)."""
    out, diag, _ = _merge(outs, diags)
    if not isinstance(first, dict):  # stacked: the points' tables are evaluated together, at the end
        out = jax.device_get(call("final", 0, segs.program("final"), seeds, hp,
                                  np.concatenate([np.asarray(first)[:, None], out], axis=1)))
    else:
        out = {k: np.concatenate([np.asarray(first[k])[:, None], out[k]], axis=1) for k in first}
    R = next(iter(diag.values())).shape[0]
    nan = np.full((R, 1), np.nan, np.float32)
    return {**out, **{k: np.concatenate([nan, v], axis=1) for k, v in diag.items()}}


def _like(first, n: int):
    """Zero arrays shaped like ``n`` evaluation points of ``first`` (``[R, ...]`` -> ``[R, n, ...]``)."""
    return jax.tree_util.tree_map(lambda x: np.zeros((np.shape(x)[0], n) + np.shape(x)[1:], np.asarray(x).dtype),
                                  first)


def _merge(outs: list, diags: list):
    """The evaluation points so far as ``(outs [R, n, ...], diags {k: [R, n]}, n)``."""
    out = jax.tree_util.tree_map(lambda *xs: np.concatenate(xs, axis=1), *outs)
    diag = {k: np.concatenate([d[k] for d in diags], axis=1) for k in diags[0]}
    return out, diag, next(iter(diag.values())).shape[1]


__all__ = ["run_chunk", "calls", "steps_done", "progress_segment", "Hooks", "STOP", "Interrupted", "CHECKPOINT_SECONDS", "digest_arrays"]
