"""The program store (tabsim.runtime.executables) and chunks run in threads (tabsim.runtime.executors.LocalExecutor).

A check runs in a fresh process where a new process is what matters (a program saved by one process,
loaded by the next); the others run in this process with the store's in-memory table emptied, as a new
process finds it. Arrays are compared bit for bit with the program run through ``jax.jit``.
"""
from __future__ import annotations

import json
import os
import pathlib
import pickle
import subprocess
import sys
import textwrap
import threading

import jax
import numpy as np
import pytest

import tabsim as ts
from tabsim.runtime import run as api
from tabsim.runtime import executables, executors, planning
from tabsim.sim.pytree import pytree_dataclass

CFG = {"preset": "paper", "task": {"n_prompts": 12}, "train": {"steps": 6, "seeds": 3, "eval_every": 3, "batch_size": 4},
       "sweep": {"prior_strength": [0.2, 0.5, 0.8]}}

CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import jax
    import tabsim as ts
    from tabsim.runtime import run as api
    from tabsim.runtime import executables, executors, planning
    from tabsim.config import resolve
    from tabsim.sim.params import stack_hypers
    from tabsim.sim.rng import seed_array

    cfg = resolve(json.loads(sys.argv[1]))
    hp = stack_hypers([cfg.hyper_values(g) for g in cfg.grid()])
    seeds = seed_array(list(range(cfg.train.seeds)))
    out = jax.device_get(api.call_program(("conditions", api.static_key(cfg)), api.compiled_train(cfg), seeds, hp))
    ref = jax.device_get(api.compiled_train(cfg)(seeds, hp))  # through jax.jit
    same = sorted(out) == sorted(ref) and all(np.array_equal(out[k], ref[k], equal_nan=True) for k in out)
    print(json.dumps({"stats": executables.stats, "same": bool(same),
                      "folder": str(executables.folder())}))
""")
STATS = ("loaded", "compiled", "saved", "refused")


def child(cache, extra_env=None, cfg=CFG):
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_COMPILATION_CACHE_DIR", executables.ENV)}
    env.update(TABSIM_COMPILATION_CACHE=str(cache), **(extra_env or {}))
    res = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cfg)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def counts(**kw) -> dict:
    return {k: kw.get(k, 0) for k in STATS}


def test_a_saved_program_is_loaded_by_the_next_process_and_gives_the_same_bits(tmp_path):
    """On by default: the first process traces and keeps the program, the next one loads it without
    tracing; both give the bits of the program run through ``jax.jit``."""
    first = child(tmp_path)
    assert first["same"]
    assert first["stats"] == counts(compiled=1, saved=1)
    (entry,) = (tmp_path / executables.FOLDER).iterdir()
    assert entry.stat().st_mode & 0o077 == 0  # private to the user
    assert b"pickle" not in entry.read_bytes()[:64] and entry.read_bytes().startswith(executables.MAGIC)
    second = child(tmp_path)
    assert second["same"]
    assert second["stats"] == counts(loaded=1)


USER_ESTIMATOR = textwrap.dedent("""
    import json, sys
    import tabsim as ts
    from tabsim.runtime import executables
    from tabsim.sim.algos import ESTIMATORS, register_estimator

    SCALE = float(sys.argv[1])  # read when the program is traced: in no key
    grpo = ESTIMATORS["grpo"]

    @register_estimator("scaled_grpo")
    def scaled_grpo(rewards, **kw):
        return SCALE * grpo(rewards, **kw)

    res = ts.run({"preset": "paper", "algo": {"estimator": "scaled_grpo"}, "task": {"n_prompts": 8},
                  "arms": {"arms": ["true"]}, "train": {"steps": 6, "seeds": 2, "batch_size": 4}}, progress=False)
    print(json.dumps({"stats": executables.stats, "pass1": res.final()["pass1"].tolist(),
                      "outside": executables.outside_code(("units", ts.runtime.run.static_key(ts.resolve(res.config))))}))
""")


# heavy: two processes; by default test_a_program_naming_outside_code_is_traced_on_each_call_never_kept (the store's
# side, in this process) and tests/core/test_registry.py's re-registered estimator (its name in the static key,
# new numbers) cover it
@pytest.mark.heavy
def test_a_users_component_is_traced_in_each_process_never_answered_from_the_store(tmp_path):
    """A program using an estimator registered outside tabsim is never kept: the user's edited estimator (here a
    value it reads when traced) must not get the numbers of the program traced from its earlier version."""
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_COMPILATION_CACHE_DIR", executables.ENV)}
    env.update(TABSIM_COMPILATION_CACHE=str(tmp_path))
    runs = []
    for scale in ("1.0", "0.0"):
        res = subprocess.run([sys.executable, "-c", USER_ESTIMATOR, scale], env=env, capture_output=True, text=True,
                             timeout=300)
        assert res.returncode == 0, res.stderr[-3000:]
        runs.append(json.loads(res.stdout.strip().splitlines()[-1]))
    assert [r["stats"] for r in runs] == [counts(compiled=1)] * 2
    assert runs[0]["outside"] == ["scaled_grpo"]
    assert runs[0]["pass1"] != runs[1]["pass1"]  # a zero advantage never moves the policy
    assert not (tmp_path / executables.FOLDER).exists() or not any((tmp_path / executables.FOLDER).iterdir())


def test_tabsims_own_components_are_not_outside_code():
    assert executables.outside_code(("units", api.static_key(ts.resolve({"preset": "paper"})))) == []
    assert executables.outside_code(("units", api.static_key(ts.resolve({"preset": "dapo", "task": {"env": "tree"}})))) == []


# heavy: three processes compiling a tree; the store's load and refusal paths run by default on the bandit
@pytest.mark.heavy
def test_a_tree_program_keeps_its_compiler_options_through_the_store(tmp_path):
    # the multi-node tree's program is compiled with its own XLA options (engine.TREE_COMPILER_OPTIONS);
    # with Adam its bits depend on them, so a program compiled without them would differ from jit's
    cfg = {"task": {"env": "tree", "n_prompts": 6, "n_answers": 4, "tree": {"depth": 3, "branching": 3}},
           "algo": {"estimator": "rloo", "optimizer": "adam", "lr": 0.05},
           "train": {"steps": 4, "seeds": 2, "eval_every": 2, "batch_size": 6, "group_size": 4}}
    from tabsim.base import xla
    from tabsim.sim.engine import TREE_COMPILER_OPTIONS

    # (those the running XLA accepts: jaxlib 0.11+ knows none of them)
    assert api.compiled_train(ts.resolve(cfg)).xla_options == xla.program_options(TREE_COMPILER_OPTIONS)
    first = child(tmp_path, cfg=cfg)
    assert first["same"] and first["stats"] == counts(compiled=1, saved=1)
    second = child(tmp_path, cfg=cfg)
    assert second["same"] and second["stats"] == counts(loaded=1)


# heavy: a process of its own; by default test_on_by_default_and_switched_off_by_the_variable checks the switch
# (no folder), and every in-process run of the suite calls the store with no folder (TABSIM_COMPILATION_CACHE=0)
@pytest.mark.heavy
def test_switched_off_keeps_no_programs(tmp_path):
    """With TABSIM_EXECUTABLE_CACHE=0 a new process traces its program and writes no entry (JAX's
    compilation cache still keeps the compiled program)."""
    out = child(tmp_path, {executables.ENV: "0"})
    assert out["same"] and out["folder"] == "None" and out["stats"]["saved"] == 0
    assert not (tmp_path / executables.FOLDER).exists()


@pytest.fixture
def store(tmp_path, monkeypatch):
    """The store in ``tmp_path`` for this process; ``fresh`` runs a call as a new process would (the
    in-memory table emptied) and returns the store's counts for it."""
    monkeypatch.setattr(executables, "folder", lambda: tmp_path)
    monkeypatch.setattr(executables, "stats", dict.fromkeys(STATS, 0))

    def fresh(key, program, *args):
        monkeypatch.setattr(executables, "_LOADED", {})
        before = dict(executables.stats)
        out = jax.device_get(executables.run(key, program, *args))
        return out, {k: executables.stats.get(k, 0) - before.get(k, 0) for k in STATS}

    return fresh


def small_program():
    import jax.numpy as jnp

    program = jax.jit(lambda x, d: {"y": jnp.sin(x) * 2.0 + d["b"].sum(), "pair": (x * 3.0, None)})
    args = (jnp.arange(5.0, dtype=jnp.float32), {"b": jnp.ones((2, 3), jnp.float32)})
    return program, args


def same_tree(a, b) -> bool:
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    return ta == tb and all(np.array_equal(x, y) for x, y in zip(la, lb))


def entry_of(tmp_path):
    (entry,) = [p for p in tmp_path.iterdir() if not p.name.startswith(".")]
    return entry


def test_a_truncated_or_foreign_writable_entry_is_traced_again_and_replaced(tmp_path, store):
    program, args = small_program()
    ref = jax.device_get(program(*args))
    key = ("small-program-test",)
    out, n = store(key, program, *args)
    assert same_tree(out, ref) and n == counts(compiled=1, saved=1)
    entry = entry_of(tmp_path)
    assert store(key, program, *args)[1] == counts(loaded=1)
    whole = entry.read_bytes()
    for cut in (len(whole) - 100, len(whole) // 2, 10, 0):
        entry.write_bytes(whole[:cut])
        out, n = store(key, program, *args)
        assert same_tree(out, ref) and n == counts(refused=1, compiled=1, saved=1), cut
        assert store(key, program, *args)[1] == counts(loaded=1)  # the replacement loads
    entry.chmod(0o666)
    out, n = store(key, program, *args)
    assert same_tree(out, ref) and n == counts(refused=1, compiled=1, saved=1)
    assert entry.stat().st_mode & 0o077 == 0  # replaced by a private one


def test_a_code_running_pickle_entry_is_never_executed(tmp_path, store):
    """A pickle that would create a file when loaded, written in place of an entry: never unpickled."""
    program, args = small_program()
    ref = jax.device_get(program(*args))
    key = ("pickle-entry-test",)
    store(key, program, *args)
    entry = entry_of(tmp_path)
    marker = tmp_path.parent / "pickle-ran"
    entry.write_bytes(pickle.dumps(_Touch(str(marker))))
    entry.chmod(0o600)
    out, n = store(key, program, *args)
    assert not marker.exists()
    assert same_tree(out, ref) and n == counts(refused=1, compiled=1, saved=1)


class _Touch:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.path),))


def test_a_program_naming_outside_code_is_traced_on_each_call_never_kept(tmp_path, store):
    """A key that names a user's registered component (the part :func:`tabsim.config.static.user_components`
    adds): the program is traced on each fresh call, never written to the store nor loaded from it."""
    from tabsim.config.static import USER_COMPONENTS

    program, args = small_program()
    ref = jax.device_get(program(*args))
    key = ("outside-code-test", ((USER_COMPONENTS, (("estimator", "scaled_grpo", 1),)),))
    assert executables.outside_code(key) == ["scaled_grpo"]
    for _ in range(2):  # as two processes would
        out, n = store(key, program, *args)
        assert same_tree(out, ref) and n == counts(compiled=1)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("kind", ["fifo", "device", "folder", "oversized"])
def test_an_entry_that_is_not_a_small_regular_file_is_refused_without_blocking(tmp_path, store, kind, monkeypatch):
    program, args = small_program()
    ref = jax.device_get(program(*args))
    key = ("special-entry-test", kind)
    store(key, program, *args)
    entry = entry_of(tmp_path)
    entry.unlink()
    if kind == "fifo":
        os.mkfifo(entry, 0o600)
    elif kind == "device":
        entry.symlink_to("/dev/zero")
    elif kind == "folder":
        entry.mkdir(0o700)
    else:
        monkeypatch.setattr(executables, "MAX_ENTRY_BYTES", 64)
        entry.write_bytes(b"x" * 65)
        entry.chmod(0o600)
    result = {}
    worker = threading.Thread(target=lambda: result.update(out=store(key, program, *args)), daemon=True)
    worker.start()
    worker.join(120)  # a guard: a FIFO opened for a blocking read would never return
    assert not worker.is_alive(), f"a {kind} in place of an entry blocked the run"
    out, n = result["out"]
    assert same_tree(out, ref) and n["refused"] == 1 and n["loaded"] == 0


@pytree_dataclass
class _Out:
    y: object
    z: object


def test_an_entry_whose_structure_names_a_class_not_registered_is_refused_and_nothing_is_imported(tmp_path, store):
    """The results' structure is jax.export's own (a tabsim dataclass by its registered name). An entry whose
    structure names another class (here a module that prints a poem when imported), its digest recomputed, is
    refused: nothing is imported, the program is traced again and its results keep their class."""
    import hashlib

    import jax.numpy as jnp

    program = jax.jit(lambda x: _Out(y=x * 2.0, z=(x + 1.0, None)))
    args = (jnp.arange(3.0, dtype=jnp.float32),)
    ref = jax.device_get(program(*args))
    key = ("unregistered-class-test",)
    out, n = store(key, program, *args)
    assert isinstance(out, _Out) and same_tree(out, ref) and n == counts(compiled=1, saved=1)
    out, n = store(key, program, *args)
    assert isinstance(out, _Out) and same_tree(out, ref) and n == counts(loaded=1)
    entry = entry_of(tmp_path)
    data = entry.read_bytes()
    start = len(executables.MAGIC) + 8
    size = int.from_bytes(data[len(executables.MAGIC):start], "little")
    header, payload = json.loads(data[start:start + size]), data[start + size:]
    name = f"{__name__}._Out".encode()
    assert payload.count(name) == 1
    payload = payload.replace(name, b"this." + b"x" * (len(name) - 5))
    header["payload_sha256"] = hashlib.sha256(payload).hexdigest()
    head = json.dumps(header).encode()
    entry.write_bytes(executables.MAGIC + len(head).to_bytes(8, "little") + head + payload)
    entry.chmod(0o600)
    imported = "this" in sys.modules
    out, n = store(key, program, *args)
    assert ("this" in sys.modules) == imported
    assert isinstance(out, _Out) and same_tree(out, ref) and n == counts(refused=1, compiled=1, saved=1)


def test_an_entry_for_other_arguments_under_the_calls_key_is_refused(tmp_path, store):
    """An entry whose header names the call's key but whose program takes other shapes: refused when the
    program is compiled for the call (jax.export checks the arguments), traced again and replaced."""
    import hashlib

    program, args = small_program()
    other = (args[0][:3], args[1])
    key = ("other-arguments-test",)
    store(key, program, *other)
    (entry,) = [p for p in tmp_path.iterdir() if not p.name.startswith(".")]
    data = entry.read_bytes()
    start = len(executables.MAGIC) + 8
    size = int.from_bytes(data[len(executables.MAGIC):start], "little")
    header, payload = json.loads(data[start:start + size]), data[start + size:]
    header["key"] = executables.key_text(key, args, executables.options(program))
    head = json.dumps(header).encode()
    target = tmp_path / f"{hashlib.sha256(header['key'].encode()).hexdigest()}{executables.SUFFIX}"
    target.write_bytes(executables.MAGIC + len(head).to_bytes(8, "little") + head + payload)
    target.chmod(0o600)
    out, n = store(key, program, *args)
    assert same_tree(out, jax.device_get(program(*args))) and n == counts(refused=1, compiled=1, saved=1)


CONFIGS = {"grpo": {"preset": "grpo"}, "dr_grpo": {"preset": "dr_grpo"}}


def test_an_entry_of_another_config_under_a_runs_name_is_refused_and_the_numbers_are_the_runs(tmp_path, store):
    """dr_grpo's program copied over grpo's entry: grpo's call refuses it, traces its own program and
    returns grpo's numbers, not dr_grpo's."""
    from tabsim.config import resolve
    from tabsim.sim.params import stack_hypers
    from tabsim.sim.rng import seed_array

    small = {"task": {"n_prompts": 6}, "train": {"steps": 4, "seeds": 2, "eval_every": 2, "batch_size": 3}}
    runs = {}
    for name, base in CONFIGS.items():
        cfg = resolve({**base, **small})
        hp = stack_hypers([cfg.hyper_values(g) for g in cfg.grid()])
        args = (seed_array([0, 1]), hp)
        key = ("conditions", api.static_key(cfg))
        seen = set(tmp_path.iterdir())
        out, _ = store(key, api.compiled_train(cfg), *args)  # the bits of jax.jit (the test above)
        (entry,) = set(tmp_path.iterdir()) - seen
        runs[name] = (key, api.compiled_train(cfg), args, entry, out)
    key, program, args, entry, want = runs["grpo"]
    other = runs["dr_grpo"][4]
    assert not all(np.array_equal(want[k], other[k], equal_nan=True) for k in want)  # the configs differ
    entry.write_bytes(runs["dr_grpo"][3].read_bytes())
    entry.chmod(0o600)
    out, n = store(key, program, *args)
    assert n == counts(refused=1, compiled=1, saved=1)
    assert sorted(out) == sorted(want) and all(np.array_equal(out[k], want[k], equal_nan=True) for k in want)


@pytest.mark.parametrize("value,on", [("", True), ("1", True), ("0", False), ("off", False), ("no", False)])
def test_on_by_default_and_switched_off_by_the_variable(monkeypatch, tmp_path, value, on):
    monkeypatch.setenv(executables.ENV, value)
    before = jax.config.jax_compilation_cache_dir
    jax.config.update("jax_compilation_cache_dir", str(tmp_path))
    try:
        assert (executables.folder() is not None) == on
    finally:
        jax.config.update("jax_compilation_cache_dir", before)


def test_fingerprint_depends_on_argument_shapes_program_and_versions(tmp_path):
    import jax.numpy as jnp
    import jaxlib

    a = (jnp.zeros((3, 2), jnp.uint32),)
    b = (jnp.zeros((4, 2), jnp.uint32),)
    assert executables.fingerprint("k", a) == executables.fingerprint("k", a)
    assert executables.fingerprint("k", a) != executables.fingerprint("k", b)
    assert executables.fingerprint("k", a) != executables.fingerprint("other", a)
    assert executables.fingerprint("k", a) != executables.fingerprint("k", (jnp.zeros((3, 2), jnp.int32),))
    opts = {"xla_cpu_use_fusion_emitters": True}
    assert executables.fingerprint("k", a, opts) != executables.fingerprint("k", a)
    text = executables.key_text("k", a)
    assert jax.__version__ in text and jaxlib.__version__ in text and "tabsim source" in text


def test_chunks_in_threads_give_the_frame_of_one_chunk_after_another():
    cfg = dict(CFG, train={**CFG["train"], "chunk_conditions": 1})
    serial = ts.run(cfg, progress=False, executor=executors.LocalExecutor(threads=1)).frame
    threaded = ts.run(cfg, progress=False, executor=executors.LocalExecutor(threads=3)).frame
    assert serial.equals(threaded)


def test_threaded_map_keeps_order_and_raises_the_first_error():
    ex = executors.LocalExecutor(threads=2)
    assert list(ex.map(lambda x: x * x, range(7))) == [x * x for x in range(7)]

    def fail(x):
        if x == 3:
            raise ValueError("chunk 3")
        return x

    with pytest.raises(ValueError, match="chunk 3"):
        list(ex.map(fail, range(6)))
    with pytest.raises(ValueError, match="threads"):
        executors.LocalExecutor(threads=0)


def test_threads_from_the_environment(monkeypatch):
    monkeypatch.setenv("TABSIM_THREADS", "3")
    assert executors.LocalExecutor().threads == 3
    monkeypatch.setenv("TABSIM_THREADS", "zero")
    with pytest.raises(ValueError, match="TABSIM_THREADS"):
        executors.LocalExecutor()


def test_local_executor_keeps_chunks_in_flight_within_memory(monkeypatch):
    monkeypatch.setattr(planning, "local_threads", lambda: 4)
    monkeypatch.setattr(planning, "available_bytes", lambda: planning.RUNTIME_BYTES + 2 * 10**9 + 1)
    assert planning.local_executor(10**9).threads == 2
    assert planning.local_executor(5 * 10**9).threads == 1
    assert planning.local_executor(None).threads == 4
    assert planning.local_executor(1).threads == 4


def test_a_numpy_arrays_abstract_value_text_is_jaxs_own_in_either_x64_mode():
    import jax.numpy as jnp

    arrays = [np.zeros((512, 1, 2), np.uint32), np.zeros((512, 1), np.float32), np.zeros(3, np.float64),
              np.zeros((), np.int64), np.zeros((0, 4), np.bool_), jnp.zeros((2, 3))]
    x64 = jax.config.jax_enable_x64
    try:
        for mode in (False, True, False):
            jax.config.update("jax_enable_x64", mode)
            for x in arrays * 2:  # the second time from the kept texts
                assert executables._aval_text(x) == str(jax.typeof(x))
    finally:
        jax.config.update("jax_enable_x64", x64)
