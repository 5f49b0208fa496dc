"""The executable cache (tabsim.runtime.executables) and chunks run in threads (tabsim.runtime.executors.LocalExecutor).

Each check runs in a fresh process where a new process is what matters (an executable saved by one
process, loaded by the next) and compares the arrays bit for bit with the program run through
``jax.jit``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tabsim as ts
from tabsim.runtime import run as api
from tabsim.runtime import executables, executors, planning

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
    from tabsim.params import stack_hypers
    from tabsim.rng import seed_array

    cfg = resolve(json.loads(sys.argv[1]))
    hp = stack_hypers([cfg.hyper_values(g) for g in cfg.grid()])
    seeds = seed_array(list(range(cfg.train.seeds)))
    out = jax.device_get(api.call_program(("conditions", api.static_key(cfg)), api.compiled_train(cfg), seeds, hp))
    ref = jax.device_get(api.compiled_train(cfg)(seeds, hp))  # through jax.jit
    same = sorted(out) == sorted(ref) and all(np.array_equal(out[k], ref[k], equal_nan=True) for k in out)
    print(json.dumps({"stats": executables.stats, "same": bool(same),
                      "folder": str(executables.folder())}))
""")


def child(cache, extra_env=None, cfg=CFG):
    env = dict(os.environ, TABSIM_COMPILATION_CACHE=str(cache), **{executables.ENV: "1", **(extra_env or {})})
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    res = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cfg)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_a_saved_executable_is_loaded_by_the_next_process_and_gives_the_same_bits(tmp_path):
    first = child(tmp_path)
    assert first["same"]
    assert first["stats"] == {"loaded": 0, "compiled": 1, "saved": 1}
    (entry,) = (tmp_path / executables.FOLDER).glob("*.exe")
    assert entry.stat().st_mode & 0o077 == 0  # private to the user
    second = child(tmp_path)
    assert second["same"]
    assert second["stats"] == {"loaded": 1, "compiled": 0, "saved": 0}


def test_a_damaged_or_foreign_entry_is_compiled_again_and_replaced(tmp_path, monkeypatch):
    """In this process, on a small program: what a new process finds in the store (the in-memory table
    emptied before each call). A damaged entry is compiled again and replaced; one that others could
    write is never loaded."""
    import jax
    import jax.numpy as jnp

    monkeypatch.setattr(executables, "folder", lambda: tmp_path)
    monkeypatch.setattr(executables, "stats", {"loaded": 0, "compiled": 0, "saved": 0})
    program = jax.jit(lambda x: jnp.sin(x) * 2.0 + x.sum())
    x = jnp.arange(5.0, dtype=jnp.float32)
    ref = np.asarray(program(x))

    def fresh_call():
        monkeypatch.setattr(executables, "_LOADED", {})
        before = dict(executables.stats)
        out = np.asarray(executables.run(("damaged-entry-test",), program, x))
        assert np.array_equal(out, ref)
        return {k: executables.stats[k] - before[k] for k in before}

    assert fresh_call() == {"loaded": 0, "compiled": 1, "saved": 1}
    (entry,) = tmp_path.glob("*.exe")
    assert fresh_call() == {"loaded": 1, "compiled": 0, "saved": 0}
    entry.write_bytes(b"not an executable")
    assert fresh_call() == {"loaded": 0, "compiled": 1, "saved": 1}
    assert fresh_call() == {"loaded": 1, "compiled": 0, "saved": 0}  # the replacement loads
    entry.chmod(0o666)
    assert fresh_call() == {"loaded": 0, "compiled": 1, "saved": 1}
    assert entry.stat().st_mode & 0o077 == 0  # replaced by a private one


# heavy: three processes compiling a tree; the store's load and refusal paths run by default on the bandit
@pytest.mark.heavy
def test_a_tree_program_keeps_its_compiler_options_through_the_store(tmp_path):
    # the multi-node tree's program is compiled with its own XLA options (engine.TREE_COMPILER_OPTIONS);
    # with Adam its bits depend on them, so an executable compiled without them would differ from jit's
    cfg = {"task": {"env": "tree", "n_prompts": 6, "n_answers": 4, "tree": {"depth": 3, "branching": 3}},
           "algo": {"estimator": "rloo", "optimizer": "adam", "lr": 0.05},
           "train": {"steps": 4, "seeds": 2, "eval_every": 2, "batch_size": 6, "group_size": 4}}
    from tabsim.engine import TREE_COMPILER_OPTIONS

    assert api.compiled_train(ts.resolve(cfg)).xla_options == TREE_COMPILER_OPTIONS
    first = child(tmp_path, cfg=cfg)
    assert first["same"] and first["stats"] == {"loaded": 0, "compiled": 1, "saved": 1}
    second = child(tmp_path, cfg=cfg)
    assert second["same"] and second["stats"] == {"loaded": 1, "compiled": 0, "saved": 0}


def test_off_by_default_keeps_no_executables(tmp_path):
    """The layer is opt-in: in a new process with TABSIM_EXECUTABLE_CACHE unset nothing is serialised."""
    out = child(tmp_path, {executables.ENV: ""})
    assert out["same"] and out["folder"] == "None" and out["stats"]["saved"] == 0
    assert not (tmp_path / executables.FOLDER).exists()


@pytest.mark.parametrize("value,on", [("", False), ("0", False), ("off", False), ("1", True)])
def test_only_a_value_other_than_off_switches_the_layer_on(monkeypatch, tmp_path, value, on):
    import jax

    monkeypatch.setenv(executables.ENV, value)
    before = jax.config.jax_compilation_cache_dir
    jax.config.update("jax_compilation_cache_dir", str(tmp_path))
    try:
        assert (executables.folder() is not None) == on
    finally:
        jax.config.update("jax_compilation_cache_dir", before)


def test_fingerprint_depends_on_argument_shapes_and_program(tmp_path):
    import jax.numpy as jnp

    a = (jnp.zeros((3, 2), jnp.uint32),)
    b = (jnp.zeros((4, 2), jnp.uint32),)
    assert executables.fingerprint("k", a) == executables.fingerprint("k", a)
    assert executables.fingerprint("k", a) != executables.fingerprint("k", b)
    assert executables.fingerprint("k", a) != executables.fingerprint("other", a)
    opts = {"xla_cpu_use_fusion_emitters": True}
    assert executables.fingerprint("k", a, opts) != executables.fingerprint("k", a)


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
