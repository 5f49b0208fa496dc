"""Long runs cut in time: segments of steps give the bits of one call, Ctrl-C stops within about a second,
and ``--resume`` continues from the last segment with the bytes of an uninterrupted run.

The interrupt is real: the run is a subprocess (``python -m tabsim.cli``), the test waits until its
progress bar shows finished segments and sends SIGINT.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time

import jax
import numpy as np
import pandas as pd
import pytest

import tabsim as ts
from tabsim.sim.params import stack_hypers
from tabsim.sim.rng import seed_array
from tabsim.runtime import planning, segments
from tabsim.runtime.run import compiled_segments, compiled_train
from tabsim.runtime.store import RunStore, staging_path


def same_frames(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """Column for column, the same dtype and the same bytes (NaN in the same places)."""
    if list(a.columns) != list(b.columns) or len(a) != len(b):
        return False
    for c in a.columns:
        x, y = np.asarray(a[c]), np.asarray(b[c])
        if x.dtype != y.dtype:
            return False
        if x.dtype == object:
            if list(x) != list(y):
                return False
        elif x.tobytes() != y.tobytes():
            return False
    return True


def chunk_args(cfg):
    values = [cfg.hyper_values(g) for g in cfg.grid()]
    shared = [k for k in values[0] if all(v[k] == values[0][k] for v in values)]
    return seed_array(list(range(cfg.train.seed, cfg.train.seed + cfg.train.seeds))), stack_hypers(values, shared)


def segmented(cfg, segment: int, hooks=None) -> dict:
    seeds, hp = chunk_args(cfg)
    hist = segments.run_chunk(compiled_segments(cfg), lambda name, n, prog, *a: prog(*a), seeds, hp, segment, hooks)
    return {k: v.reshape((-1, cfg.train.seeds, len(cfg.arms.arms)) + v.shape[1:]) for k, v in hist.items()}


BASE = {"preset": "paper", "task": {"n_prompts": 12}, "train": {"steps": 12, "seeds": 2, "batch_size": 4}}
CUTS = [
    pytest.param({}, 5, id="inside-one-interval"),  # 5 + 5 + 2 steps, evaluated at the end
    pytest.param({"train": {"eval_every": 2}}, 4, id="whole-intervals"),  # 2 intervals per call
    pytest.param({"algo": {"optimizer": "adam"}, "sweep": {"lr": [0.01, 0.1]}, "train": {"eval_every": 6}}, 3,
                 id="adam-sweep"),
    pytest.param({"task": {"env": "tree", "n_prompts": 12, "tree": {"depth": 3, "branching": 3}},
                  "train": {"eval_every": 4}}, 2, id="tree"),
    pytest.param({"arms": {"arms": ["frozen", "majority_offline", "true"]},
                  "train": {"eval_every": 6, "maj_k": [4], "pass_k": [4]}}, 4, id="offline-and-maj",
                 marks=pytest.mark.heavy),
    pytest.param({"preset": "dapo", "train": {"eval_every": 3}}, 1, id="dapo-step-by-step", marks=pytest.mark.heavy),
    pytest.param({"preset": "gspo", "train": {"eval_every": 12}}, 12, id="gspo-one-segment", marks=pytest.mark.heavy),
]


@pytest.mark.parametrize("over, segment", CUTS)
def test_segments_give_the_bits_of_one_call(over, segment):
    data = {**BASE, **over, "train": {**BASE["train"], **over.get("train", {})}}
    cfg = ts.resolve(data)
    seeds, hp = chunk_args(cfg)
    one = jax.device_get(compiled_train(cfg)(seeds, hp))
    cut = segmented(cfg, segment)
    assert set(cut) == set(one)
    for k in one:
        assert cut[k].dtype == one[k].dtype and cut[k].shape == one[k].shape, k
        assert cut[k].tobytes() == one[k].tobytes(), k


def test_not_stacked_evaluation_too(monkeypatch):
    """Tables too many to keep are evaluated at each point, in both programs."""
    import tabsim.sim.engine as engine
    from tabsim.runtime import programs

    monkeypatch.setattr(engine, "STACKED_EVAL_BYTES", 0)
    monkeypatch.setattr(programs, "_CACHE", {})
    cfg = ts.resolve({**BASE, "train": {**BASE["train"], "eval_every": 4}})
    seeds, hp = chunk_args(cfg)
    one = jax.device_get(compiled_train(cfg)(seeds, hp))
    cut = segmented(cfg, 3)
    assert all(cut[k].tobytes() == one[k].tobytes() for k in one)


def test_calls_cover_every_step_once():
    for steps, every, seg in ((12, 12, 5), (12, 2, 4), (12, 2, 6), (10, 10, 10), (12, 4, 8), (9, 3, 1)):
        plan = segments.calls(steps, every, seg)
        done = sum(n for c, n in plan if c == "advance") + sum(n * every for c, n in plan if c == "intervals")
        points = sum(1 for c, _ in plan if c == "point") + sum(n for c, n in plan if c == "intervals")
        assert done == steps and points == steps // every, (steps, every, seg, plan)


def test_long_runs_are_cut_short_runs_are_not():
    long = ts.resolve({"preset": "paper", "train": {"steps": 10_000_000}})
    seg = planning.steps_per_segment(long, 1, 8)
    assert seg is not None and 10_000_000 % seg == 0
    units, _ = planning.step_units(long, 1, 8)
    assert seg * units <= planning.SEGMENT_UNITS  # about a third of a second per call
    assert planning.steps_per_segment(ts.resolve({"preset": "paper"}), 1, 8) is None  # 200 steps: one call
    every = ts.resolve({"preset": "paper", "train": {"steps": 10_000_000, "eval_every": 1000}})
    assert planning.steps_per_segment(every, 1, 8) % 1000 == 0  # whole intervals per call


def test_run_in_segments_equals_one_call_and_resumes_from_a_checkpoint(tmp_path, monkeypatch):
    cfg = ts.resolve({**BASE, "train": {**BASE["train"], "steps": 40, "eval_every": 20},
                      "sweep": {"lr": [0.05, 0.1]}})
    monkeypatch.setattr(planning, "SEGMENT_UNITS", 3000)  # a few steps per call
    monkeypatch.setattr(planning, "SEGMENTED_ABOVE", 0)
    assert planning.steps_per_segment(cfg, 2, 2) < 20
    with monkeypatch.context() as m:
        m.setattr(planning, "steps_per_segment", lambda *a: None)
        one = ts.run(cfg, progress=False).frame
    assert same_frames(ts.run(cfg, progress=False).frame, one)

    # stop after three segments (as Ctrl-C would), then resume from the checkpoint
    n = {"calls": 0}
    real = segments.Hooks.tick

    def tick(self, k):
        real(self, k)
        n["calls"] += 1
        if n["calls"] == 3:
            segments.STOP.set()

    monkeypatch.setattr(segments.Hooks, "tick", tick)
    out = tmp_path / "out"
    try:
        with pytest.raises(KeyboardInterrupt), RunStore(out, key=cfg.digest()):
            ts.run(cfg, progress=False)
    finally:
        segments.STOP.clear()
    saved = list((staging_path(out) / "chunks" / "segments").glob("*.npz"))
    assert len(saved) == 1
    monkeypatch.setattr(segments.Hooks, "tick", real)
    with RunStore(out, key=cfg.digest(), resume=True) as store:
        res = ts.run(cfg, progress=False)
    assert store.published and same_frames(res.frame, one)
    assert not (out / "chunks").exists()


def test_a_damaged_checkpoint_is_recomputed(tmp_path, monkeypatch):
    cfg = ts.resolve({**BASE, "train": {**BASE["train"], "steps": 12}})
    hooks = segments.Hooks(tmp_path, "job")
    one = segmented(cfg, 12)
    n = {"k": 0}

    def stop_after_two(self, k):
        n["k"] += 1
        if n["k"] == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(segments.Hooks, "tick", stop_after_two)
    with pytest.raises(KeyboardInterrupt):
        segmented(cfg, 3, hooks)
    (path,) = tmp_path.glob("*.npz")
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte: the digest no longer matches
    path.write_bytes(bytes(data))
    monkeypatch.setattr(segments.Hooks, "tick", lambda self, k: None)
    again = segmented(cfg, 3, hooks)
    assert hooks.resumed == 0 and all(again[k].tobytes() == one[k].tobytes() for k in one)


LONG = """\
preset = "paper"
[train]
seeds = 2
steps = 40000
eval_every = 20000
"""


def _read_progress(stream, seen: list):
    buf = ""
    while True:
        ch = stream.read(1)
        if not ch:
            return
        buf = (buf + ch)[-200:]
        if ch in "\r\n" and "step" in buf:
            seen.append(buf)


@pytest.mark.heavy  # 25 s of the suite: test_a_sigint_taken_by_a_chunks_thread_is_seen_while_the_chunk_runs and
# tests/runtime/test_faults.py's real SIGINT cover the default suite
def test_real_sigint_stops_at_a_segment_and_resume_gives_the_same_bytes(tmp_path, optimized_xla):
    """Every run here is a process of its own, compiled as a user's (the long run dominates the suite's time
    otherwise): interrupted and resumed, against one run straight through."""
    (tmp_path / "long.toml").write_text(LONG)
    out = tmp_path / "out"
    env = {**os.environ, "MPLBACKEND": "Agg"}
    proc = subprocess.Popen([sys.executable, "-m", "tabsim.cli", "run", "long.toml", "--out", "out"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    seen: list = []
    reader = threading.Thread(target=_read_progress, args=(proc.stderr, seen), daemon=True)
    reader.start()
    t0 = time.monotonic()
    # the bar counts steps: wait until it has moved (a few segments done), then interrupt
    while time.monotonic() - t0 < 120 and not any(re.search(r" [1-9]\d*/40000 ", s) for s in seen):
        assert proc.poll() is None, "the run ended before it could be interrupted"
        time.sleep(0.05)
    # held mid-run (the signal cannot come after the last segment, however busy the machine), then
    # interrupted: the kernel may hand the SIGINT to any of its threads when it goes on
    proc.send_signal(signal.SIGSTOP)
    assert proc.poll() is None
    t1 = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGCONT)
    proc.wait(timeout=60)
    reader.join(timeout=5)
    print(f"\nSIGINT to exit: {time.perf_counter() - t1:.2f} s")  # about a second on a busy 2-core machine
    assert proc.returncode == 130
    saved = list((staging_path(out) / "chunks" / "segments").glob("*.npz"))
    assert len(saved) == 1 and not out.exists()
    done = subprocess.run([sys.executable, "-m", "tabsim.cli", "run", "long.toml", "--out", "out", "--resume", "-q"],
                          cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    ref = subprocess.run([sys.executable, "-m", "tabsim.cli", "run", "long.toml", "--out", "ref", "-q", "--no-figure"],
                         cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert ref.returncode == 0, ref.stderr
    assert same_frames(pd.read_parquet(out / "results.parquet"), pd.read_parquet(tmp_path / "ref" / "results.parquet"))


def test_an_interrupt_checkpoints_the_chunks_running_in_threads(tmp_path, monkeypatch):
    """Ctrl-C reaches the main thread only: chunks running in segments in other threads checkpoint too."""
    from tabsim.runtime.executors import LocalExecutor

    cfg = ts.resolve({**BASE, "train": {**BASE["train"], "steps": 40, "chunk_conditions": 1},
                      "sweep": {"lr": [0.05, 0.1]}})
    monkeypatch.setattr(planning, "SEGMENT_UNITS", 1500)
    monkeypatch.setattr(planning, "SEGMENTED_ABOVE", 0)
    real = segments.Hooks.tick
    both = threading.Barrier(2, timeout=60)  # each chunk's first segment done: both are mid-run
    seen = set()

    def tick(self, k):
        real(self, k)
        me = threading.get_ident()
        if me in seen:
            return
        seen.add(me)
        if both.wait() == 0:  # a real SIGINT, from a chunk's thread: Python raises it in the main thread
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(segments.Hooks, "tick", tick)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt), RunStore(out, key=cfg.digest()):
        ts.run(cfg, progress=False, executor=LocalExecutor(threads=2))
    saved = list((staging_path(out) / "chunks" / "segments").glob("*.npz"))
    assert len(saved) == 2  # both chunks were mid-run and saved their last segment
    monkeypatch.setattr(segments.Hooks, "tick", real)
    with monkeypatch.context() as m:
        m.setattr(planning, "steps_per_segment", lambda *a: None)
        one = ts.run(cfg, progress=False).frame
    with RunStore(out, key=cfg.digest(), resume=True):
        res = ts.run(cfg, progress=False, executor=LocalExecutor(threads=2))
    assert same_frames(res.frame, one)


def _waits_in(ident: int, function: str, text: str) -> bool:
    """Whether thread ``ident`` is in ``function`` at a line holding ``text`` (read from its frame)."""
    import linecache

    f = sys._current_frames().get(ident)
    while f is not None and f.f_code.co_name != function:
        f = f.f_back
    return f is not None and text in linecache.getline(f.f_code.co_filename, f.f_lineno)


def _told_to_stop(deadline_seconds: float = 60) -> bool:
    from tabsim.runtime import executors

    deadline = time.monotonic() + deadline_seconds  # a bound only: told at once
    while not executors.INTERRUPTED.is_set() and time.monotonic() < deadline:
        time.sleep(0.01)
    return executors.INTERRUPTED.is_set()


def _wait_for(told: list) -> None:
    """Until the chunk's thread has said whether it was told to stop (a bound only)."""
    deadline = time.monotonic() + 120
    while not told and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_sigint_taken_by_a_chunks_thread_is_seen_while_the_chunk_runs():
    """The kernel hands a process's SIGINT to any of its threads. One taken by the thread computing a chunk
    (here sent to that thread alone, once the main thread waits for the chunk) is seen while the chunk runs,
    so the chunk is told to stop (and checkpoints between two segments), not once it has finished (a
    finished chunk was then neither kept nor checkpointed)."""
    from tabsim.runtime import executors

    main, told = threading.get_ident(), []

    def chunk(i):
        while not _waits_in(main, "_threaded_map", "done.get("):
            time.sleep(0.005)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)
        told.append(_told_to_stop())  # at once: within executors.WAKE_SECONDS
        return i

    chunk.interruptible = True  # computed in a helper thread, as a chunk in segments is
    with pytest.raises(KeyboardInterrupt):
        list(executors.LocalExecutor(threads=1).map(chunk, [0]))
    _wait_for(told)
    assert told == [True]


def test_ctrl_c_keeps_the_chunks_that_finished_out_of_order(tmp_path):
    """Chunk 1 finishes while chunk 0 still runs (its output waits for chunk 0's, to be handed on in order);
    a Ctrl-C then keeps chunk 1 in the store, and chunk 0 is told to stop."""
    from tabsim.runtime import executors
    from tabsim.runtime.chunklog import saved_chunks
    from tabsim.runtime.store import execute

    main, told = threading.get_ident(), []

    def chunk(i):
        if i == 0:
            me = threading.current_thread()
            # the other chunk thread has handed on chunk 1 and ended (it has nothing left to take)
            while any(t is not me and t.name.startswith("tabsim-chunk-") for t in threading.enumerate()):
                time.sleep(0.005)
            while not _waits_in(main, "_threaded_map", "done.get("):
                time.sleep(0.005)
            signal.pthread_kill(main, signal.SIGINT)
            told.append(_told_to_stop())
        return {"x": np.full(3, float(i))}

    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt), RunStore(out, key="k") as st:
        execute(chunk, [0, 1], executor=executors.LocalExecutor(threads=2), store=st, job="j")
    _wait_for(told)
    assert told == [True]
    assert saved_chunks(staging_path(out) / "chunks") == 1
    with RunStore(out, key="k", resume=True) as st:
        assert st.load_chunk("j", 1)["x"].tolist() == [1.0, 1.0, 1.0] and st.load_chunk("j", 0) is None
        st.published = True


def test_ctrl_c_after_a_chunks_last_segment_keeps_the_chunk(tmp_path, monkeypatch):
    """A Ctrl-C that lands once a chunk's last segment is done, while its history is assembled: the
    interrupted run waits for that chunk and keeps it, finished, in the store."""
    from tabsim.runtime.chunklog import saved_chunks
    from tabsim.runtime.executors import INTERRUPTED, LocalExecutor

    cfg = ts.resolve({**BASE, "train": {**BASE["train"], "steps": 40}})
    monkeypatch.setattr(planning, "SEGMENT_UNITS", 1500)
    monkeypatch.setattr(planning, "SEGMENTED_ABOVE", 0)
    main, real = threading.get_ident(), segments._history

    def history(*args):
        signal.pthread_kill(main, signal.SIGINT)
        assert _told_to_stop()
        return real(*args)

    monkeypatch.setattr(segments, "_history", history)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt), RunStore(out, key=cfg.digest()):
        ts.run(cfg, progress=False, executor=LocalExecutor(threads=1))
    assert INTERRUPTED.is_set()
    assert saved_chunks(staging_path(out) / "chunks") == 1  # the finished chunk, kept


def test_ctrl_c_while_a_chunk_is_saved_tells_the_running_chunks(tmp_path, monkeypatch):
    """A Ctrl-C that lands while this thread saves a finished chunk is handed to the executor too: the chunks
    still running are told to stop (and checkpoint), as when it lands while this thread waits."""
    from tabsim.runtime import executors
    from tabsim.runtime.store import execute

    told = []

    def chunk(i):
        if i == 1:
            told.append(_told_to_stop())
        return {"x": np.full(3, float(i))}

    def interrupted_save(self, job, index, arrays):
        raise KeyboardInterrupt  # as a Ctrl-C landing in the save

    monkeypatch.setattr(RunStore, "save_chunk", interrupted_save)
    with pytest.raises(KeyboardInterrupt), RunStore(tmp_path / "out", key="k") as st:
        execute(chunk, [0, 1], executor=executors.LocalExecutor(threads=2), store=st, job="j")
    _wait_for(told)
    assert told == [True]


def test_ctrl_c_is_seen_during_a_long_first_call(tmp_path, monkeypatch):
    """The first evaluation of a large table is one call into XLA that can take a minute (10^6 prompts):
    a chunk in segments computes in a helper thread, so a real SIGINT ends the run at once."""
    cfg = ts.resolve({**BASE, "train": {**BASE["train"], "steps": 40}})
    monkeypatch.setattr(planning, "SEGMENT_UNITS", 1500)
    monkeypatch.setattr(planning, "SEGMENTED_ABOVE", 0)
    real = segments.run_chunk

    def slow_start(segs, call, *args, **kw):
        def slow(name, n, prog, *a):
            if name == "init":
                time.sleep(8)  # stands for a minute-long first call
            return call(name, n, prog, *a)
        return real(segs, slow, *args, **kw)

    monkeypatch.setattr(segments, "run_chunk", slow_start)
    threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
    t0 = time.perf_counter()
    with pytest.raises(KeyboardInterrupt), RunStore(tmp_path / "out", key=cfg.digest()):
        ts.run(cfg, progress=False)
    assert time.perf_counter() - t0 < 5  # not the 8 s of the call


def test_periodic_checkpoints_survive_a_crash(tmp_path, monkeypatch):
    """A chunk that dies without an interrupt (a kill, a crash) resumes from its last periodic checkpoint."""
    cfg = ts.resolve({**BASE, "train": {**BASE["train"], "steps": 40}})
    monkeypatch.setattr(planning, "SEGMENT_UNITS", 1500)
    monkeypatch.setattr(planning, "SEGMENTED_ABOVE", 0)
    monkeypatch.setattr(segments, "CHECKPOINT_SECONDS", 0.0)  # after every segment
    real = segments.Hooks.tick
    n = {"k": 0}

    def crash(self, k):
        real(self, k)
        n["k"] += 1
        if n["k"] == 5:
            raise RuntimeError("the machine went away")  # not a KeyboardInterrupt: no checkpoint at the end

    monkeypatch.setattr(segments.Hooks, "tick", crash)
    out = tmp_path / "out"
    with pytest.raises(RuntimeError), RunStore(out, key=cfg.digest()):
        ts.run(cfg, progress=False)
    assert list((staging_path(out) / "chunks" / "segments").glob("*.npz"))
    ticks = []
    monkeypatch.setattr(segments.Hooks, "tick", lambda self, k: ticks.append(k))
    with monkeypatch.context() as m:
        m.setattr(planning, "steps_per_segment", lambda *a: None)
        one = ts.run(cfg, progress=False).frame
    with RunStore(out, key=cfg.digest(), resume=True):
        res = ts.run(cfg, progress=False)
    assert 1 <= ticks[0] <= 4  # continued from its last periodic checkpoint, not from the start
    assert same_frames(res.frame, one)
