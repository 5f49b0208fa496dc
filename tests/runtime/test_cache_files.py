"""What tabsim reads from its cache folder: the XLA option answers (tabsim.base.xla, kept by tabsim.runtime.cache),
the structure of a stored program's results (jax.export's serialisation of tabsim's pytrees), and the
notes the cache prints.

Everything read from the folder must be a small regular file, opened without blocking: anything else
counts as no answer, never as an error or a wait. A hang is caught by a guard thread (a FIFO opened for
a blocking read never returns).
"""
from __future__ import annotations

import collections
import json
import os
import threading
import warnings

import pytest

from tabsim.base import xla
from tabsim.sim.pytree import pytree_dataclass, serialisable
from tabsim.cli.phases import Phases
from tabsim.runtime import cache

OPTION = ("xla_tabsim_test_option", True)  # a name no XLA knows: refused, with a note


@pytest.fixture
def answers(tmp_path, monkeypatch):
    """The answers file in ``tmp_path``, the cache folder of this process for the test."""
    monkeypatch.setenv("TABSIM_COMPILATION_CACHE", str(tmp_path))
    monkeypatch.setattr(cache, "current_folder", lambda: tmp_path)
    xla.forget()
    yield tmp_path / xla.FILE
    xla.forget()
    xla.set_notes(True)


def guarded(fn, *args):
    """``fn(*args)`` in a thread; fails if it has not returned after a generous wait (it blocked)."""
    out: dict = {}

    def call():
        try:
            out["value"] = fn(*args)
        except BaseException as err:  # noqa: BLE001  (handed to the test)
            out["error"] = err

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(120)
    assert not worker.is_alive(), "blocked reading the cache folder"
    if "error" in out:
        raise out["error"]
    return out["value"]


def _fifo(path):
    os.mkfifo(path)


def _dev_zero(path):
    path.symlink_to("/dev/zero")


def _nested(path):
    path.write_text("[" * 200_000)


def _large(path):
    path.write_text(json.dumps({f"k{i}": True for i in range(200_000)}))


def _folder(path):
    path.mkdir()


@pytest.mark.parametrize("make", [_fifo, _dev_zero, _nested, _large, _folder])
def test_a_bad_answers_file_is_no_answer_and_is_replaced(answers, make):
    """A FIFO (would block), a link to /dev/zero (would read until memory runs out), 200,000 nested
    ``[`` (RecursionError), an oversized file or a folder: the option is tried as if nothing were kept,
    and the answer written over the file where it can be."""
    make(answers)
    assert guarded(xla.accepts, *OPTION) is False
    if make is not _folder:
        assert answers.is_file() and not answers.is_symlink()
        assert any(OPTION[0] in k for k in json.loads(answers.read_text()))


def test_a_good_answers_file_is_read_and_the_option_not_tried_again(answers, monkeypatch):
    assert xla.accepts(*OPTION) is False
    xla.forget()  # a new process
    monkeypatch.setattr(xla, "_try", lambda name, value: pytest.fail(f"asked XLA about {name} again"))
    assert xla.accepts(*OPTION) is False
    assert xla.accepts(OPTION[0], False) is False  # an unknown name: refused for every value


def test_quiet_commands_print_no_note_on_a_refused_option(answers, capfd):
    Phases(quiet=True)
    assert xla.accepts(*OPTION) is False
    assert capfd.readouterr().err == ""
    xla.forget()
    answers.unlink()
    Phases(quiet=False)
    assert xla.accepts(*OPTION) is False
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tabsim: XLA ") and OPTION[0] in err
    assert f"{OPTION[0]}=true" in xla.dropped()


def test_an_unusable_compilation_cache_is_one_tabsim_line(tmp_path, monkeypatch, capfd):
    """TABSIM_COMPILATION_CACHE naming a file: a one-line note, no Python warning with a file and line."""
    target = tmp_path / "a-file"
    target.write_text("")
    monkeypatch.setenv(cache.ENV, str(target))
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.setattr(cache, "_applied", False)
    # no folder given to JAX itself in this process (an earlier test of the same worker may have set one)
    import jax

    before = jax.config.jax_compilation_cache_dir
    jax.config.update("jax_compilation_cache_dir", None)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert cache.apply_default() is None
    finally:
        jax.config.update("jax_compilation_cache_dir", before)
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"tabsim: {cache.ENV} ignored (") and str(target) in err
    assert "Warning" not in err and ".py:" not in err


# -- JAX's compilation cache as tabsim sets it -------------------------------------------------------
_JAX_CACHE_SETTINGS = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
                       "jax_persistent_cache_min_entry_size_bytes", "jax_compilation_cache_max_size")


@pytest.fixture
def jax_cache(monkeypatch):
    """JAX's cache settings of this process, restored (and its cache reopened) after the test."""
    import jax

    before = {name: getattr(jax.config, name) for name in _JAX_CACHE_SETTINGS}
    monkeypatch.setattr(cache, "_applied", False)
    yield
    for name, value in before.items():
        jax.config.update(name, value)
    cache._reset_jax_cache()


def _compile_new_program(scale: float) -> None:
    import jax
    import jax.numpy as jnp

    jax.jit(lambda x: x * scale + 0.5).lower(jnp.ones(3)).compile()


def _programs(folder) -> set[str]:
    return {p.name for p in folder.glob(f"*{cache.CACHE_SUFFIX}")}


def test_a_folder_with_a_program_written_without_a_size_bound_keeps_new_programs(tmp_path, jax_cache):
    """JAX's bounded cache reads every program's last-use record before it writes one: a program written
    without a size bound (no record) made every later write fail (silently: the warning is silenced)."""
    (tmp_path / f"jit_old-0123{cache.CACHE_SUFFIX}").write_bytes(b"an older program")
    cache.enable_compilation_cache(tmp_path)
    _compile_new_program(3.0)
    assert len(_programs(tmp_path)) > 1


def test_a_folder_given_after_programs_were_compiled_is_the_one_used(tmp_path, jax_cache):
    """JAX opens its cache once, on the first compilation: a folder (or none) given later applies to the
    programs compiled after it, not to the first folder."""
    first, second = tmp_path / "first", tmp_path / "second"
    cache.enable_compilation_cache(first)
    _compile_new_program(5.0)
    kept = _programs(first)
    assert kept
    cache.enable_compilation_cache(second)
    _compile_new_program(7.0)
    assert _programs(first) == kept and _programs(second)
    in_second = _programs(second)
    cache.disable_compilation_cache()
    _compile_new_program(11.0)
    assert _programs(first) == kept and _programs(second) == in_second


def test_a_folder_the_user_gave_jax_is_left_as_it_is(tmp_path, jax_cache, monkeypatch):
    """A folder set for JAX itself (here in Python; $JAX_COMPILATION_CACHE_DIR arrives the same way) is kept
    when a run applies tabsim's default, whatever that default is."""
    import jax

    monkeypatch.setenv(cache.ENV, str(tmp_path / "tabsims"))
    jax.config.update("jax_compilation_cache_dir", str(tmp_path / "users"))
    assert cache.apply_default() is None
    assert jax.config.jax_compilation_cache_dir == str(tmp_path / "users")


# -- the structure of a stored program's results ------------------------------------------------
@pytree_dataclass
class Carry:
    state: object
    sums: object


Pair = collections.namedtuple("Pair", "first second")
serialisable(Pair)


def _exported(value):
    """A program returning ``value``'s structure, exported, serialised and read back by jax.export."""
    import jax
    import jax.numpy as jnp
    from jax import export

    leaves, tree = jax.tree_util.tree_flatten(value)
    exp = export.export(jax.jit(lambda x: tree.unflatten([x + i for i in range(len(leaves))])))(jnp.zeros(2))
    return tree, bytearray(exp.serialize())


def test_result_structures_round_trip_through_jax_export():
    """tabsim's dataclasses, named tuples registered by tabsim and the state of every optimizer tabsim offers
    (optax's, in the programs' carry) are written by jax.export's own serialisation and read back as the
    same structure."""
    import types

    import jax.numpy as jnp
    from jax import export

    import tabsim.runtime.executables  # noqa: F401  (registers optax's states)
    from tabsim.base.choices import OPTIMIZERS
    from tabsim.sim.params import Hyper
    from tabsim.sim.update import optimizer

    states = [optimizer(types.SimpleNamespace(optimizer=name), Hyper()).init(jnp.zeros(3)) for name in OPTIMIZERS]
    value = (Carry(state=Pair(1, states), sums={"a": 2, "b": None}), [3, (4,)], None, Hyper())
    tree, data = _exported(value)
    assert export.deserialize(data).out_tree == tree


def test_a_structure_naming_an_unregistered_or_changed_class_is_refused_and_nothing_is_imported():
    import sys

    import pytest
    from jax import export

    name = f"{__name__}.Carry".encode()
    _, data = _exported(Carry(state=1, sums=2))
    assert data.count(name) == 1
    fake = b"this." + b"x" * (len(name) - 5)  # the module `this` prints a poem when imported
    imported = "this" in sys.modules
    with pytest.raises(ValueError, match="unregistered"):
        export.deserialize(bytearray(bytes(data).replace(name, fake)))
    assert ("this" in sys.modules) == imported
    fields = b"state,sums"
    assert bytes(data).count(fields) == 1
    with pytest.raises(ValueError, match="fields"):
        export.deserialize(bytearray(bytes(data).replace(fields, b"state,suns")))
