"""Frozen dataclasses that are JAX pytrees (all fields are leaves), and that :mod:`jax.export` can write.

A program kept on disk (:mod:`tabsim.runtime.executables`) records the structure of its arguments and
results in JAX's own serialisation, which names each custom node by the name it was registered under
(:func:`jax.export.register_pytree_node_serialization`). Reading a structure back only looks that name up
among the registered classes: nothing is imported, and the class is made from its fields.
"""
from __future__ import annotations

import dataclasses

import jax
from jax import export


def pytree_dataclass(cls):
    """Make ``cls`` a frozen dataclass whose every field is a pytree leaf.

    Used for the traced hyperparameters and the scan carry, so they can be vmapped and passed
    through ``jit`` without recompilation when only their values change. The class is registered with
    :mod:`jax.export` under ``module.qualname`` (:func:`serialisable`).
    """
    cls = dataclasses.dataclass(frozen=True)(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    cls = jax.tree_util.register_dataclass(cls, data_fields=names, meta_fields=[])
    fields = ",".join(names).encode()

    def read_fields(data: bytes) -> tuple:
        if bytes(data) != fields:  # written by a class with other fields: not this one
            raise ValueError(f"{cls.__qualname__}: fields {bytes(data)[:200]!r} are not {fields!r}")
        return ()  # the node's auxiliary data (no meta fields)

    return serialisable(cls, lambda aux: fields, read_fields)


def serialisable(cls, write=None, read=None):
    """Register ``cls`` (a dataclass registered as a pytree node, or a named tuple: ``write`` and ``read``
    left out) with :mod:`jax.export` under the name ``module.qualname``. A class whose name is taken (a
    class made again under the same name, or registered before by its owner) is left as it is: a program
    with it in its structure is then not kept on disk."""
    name = f"{cls.__module__}.{cls.__qualname__}"
    try:
        if write is None:
            export.register_namedtuple_serialization(cls, serialized_name=name)
        else:
            export.register_pytree_node_serialization(cls, serialized_name=name, serialize_auxdata=write,
                                                      deserialize_auxdata=read)
    except ValueError:  # a duplicate registration (jax.export refuses a second one for a type or a name)
        pass
    return cls
