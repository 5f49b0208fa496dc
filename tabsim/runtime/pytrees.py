"""The structure of a program's results written as JSON data, and read back without running code.

The program store (:mod:`tabsim.runtime.executables`) exports programs with flat results and keeps
their structure beside them, so a new process rebuilds it without tracing. A structure is written
with the node kinds tabsim's programs return: leaves, ``None``, tuples, lists, dicts with string keys,
named tuples and dataclasses registered with :func:`jax.tree_util.register_dataclass` (tabsim's
:func:`tabsim.sim.pytree.pytree_dataclass`). A class is named by module and qualified name, and found
only among the modules this process has already imported: nothing is imported and no constructor
runs (instances are made with ``object.__new__`` / ``tuple.__new__``). Anything else is not written
(:func:`describe` answers ``None``) and is read back as ``None``.
"""
from __future__ import annotations

import dataclasses
import sys

from jax.tree_util import tree_structure, treedef_children

_LEAF = "*"


def describe(tree):
    """JSON data for the tree structure ``tree``, or ``None`` where a node is of another kind."""
    data = tree.node_data()
    if data is None:
        return _LEAF
    kind, aux = data
    children = [describe(c) for c in treedef_children(tree)]
    if any(c is None for c in children):
        return None
    if kind is type(None):
        return ["none"]
    if kind in (tuple, list):
        return [kind.__name__, children]
    if kind is dict:
        return ["dict", list(aux), children] if all(isinstance(k, str) for k in aux) else None
    name = [kind.__module__, kind.__qualname__]
    if issubclass(kind, tuple) and isinstance(getattr(kind, "_fields", None), tuple):
        return ["namedtuple", *name, list(kind._fields), children]
    if dataclasses.is_dataclass(kind) and aux == () and len(dataclasses.fields(kind)) == len(children):
        return ["dataclass", *name, [f.name for f in dataclasses.fields(kind)], children]
    return None


def rebuild(desc):
    """The tree structure :func:`describe` wrote as ``desc``, or ``None`` where ``desc`` is not one
    (malformed, or a class this process has not imported or that has other fields)."""
    try:
        return tree_structure(_skeleton(desc))
    except (_Bad, RecursionError):
        return None


class _Bad(Exception):
    pass


def _list(x) -> list:
    if not isinstance(x, list):
        raise _Bad
    return x


def _skeleton(desc):
    """An object with the structure ``desc`` and ``0`` at every leaf."""
    if desc == _LEAF:
        return 0
    desc = _list(desc)
    if desc == ["none"]:
        return None
    if len(desc) == 2 and desc[0] in ("tuple", "list"):
        children = [_skeleton(c) for c in _list(desc[1])]
        return tuple(children) if desc[0] == "tuple" else children
    if len(desc) == 3 and desc[0] == "dict":
        keys, children = _list(desc[1]), _list(desc[2])
        if len(keys) != len(children) or not all(isinstance(k, str) for k in keys) or len(set(keys)) != len(keys):
            raise _Bad
        return {k: _skeleton(c) for k, c in zip(keys, children)}
    if len(desc) == 5 and desc[0] in ("namedtuple", "dataclass"):
        kind, module, qualname, fields, children = desc
        cls = _imported_class(module, qualname)
        children = [_skeleton(c) for c in _list(children)]
        if kind == "namedtuple":
            if not issubclass(cls, tuple) or list(getattr(cls, "_fields", ())) != fields or len(fields) != len(children):
                raise _Bad
            return tuple.__new__(cls, children)
        if not dataclasses.is_dataclass(cls) or [f.name for f in dataclasses.fields(cls)] != fields \
                or len(fields) != len(children):
            raise _Bad
        obj = object.__new__(cls)
        for name, child in zip(fields, children):
            object.__setattr__(obj, name, child)
        return obj
    raise _Bad


def _imported_class(module, qualname) -> type:
    """The class ``module.qualname`` from an already imported module (no import, no ``__getattr__``)."""
    if not isinstance(module, str) or not isinstance(qualname, str) or module not in sys.modules:
        raise _Bad
    obj = sys.modules[module]
    for part in qualname.split("."):
        obj = vars(obj).get(part) if hasattr(obj, "__dict__") else None
        if obj is None:
            raise _Bad
    if not isinstance(obj, type):
        raise _Bad
    return obj


__all__ = ["describe", "rebuild"]
