"""Safe loaders with limits for every file tabsim reads: YAML, TOML, JSON and plain text (CSV).

Nothing in a file is executed (YAML tags beyond the plain scalars, sequences and mappings are refused),
and a hostile or broken file costs at most a fraction of a second before a one-line
:class:`LoadError` that names the file (and the line and column when the parser gives them):

* size: at most ``max_bytes`` (default :data:`MAX_BYTES`), checked before the file is read;
* encoding: UTF-8 (a UTF-8 byte-order mark is allowed); binary files (NUL bytes) are refused;
* nesting: at most :data:`MAX_DEPTH` levels of sequences / mappings (arrays / tables in TOML);
* YAML aliases: at most :data:`MAX_ALIASES` alias uses and :data:`MAX_NODES` nodes once every alias
  is expanded (a "billion laughs" file is refused before anything is built);
* YAML: one document, no explicit tags (``!!int "4"``: a value's type comes from how it is written), and
  no mapping key given twice (PyYAML would keep the last one silently).

YAML scalars are read with one of three schemas, so each caller gets what it expects:

* ``"core"`` (configs): YAML 1.2's core schema. Only ``true``/``false`` are booleans (``yes``, ``no``,
  ``on``, ``off`` stay strings), ``1e-3`` is a float, ``010`` is ten, dates stay strings.
* ``"nobool"`` (audit tables): YAML 1.1 as PyYAML reads it, except that nothing is a boolean (an arm
  named ``true`` stays the string ``"true"``).
* ``"yaml11"`` (pre-registration plans): exactly PyYAML's ``safe_load`` (plan hashes depend on it).
* ``"written"`` (audit tables): ``"nobool"``, and every plain number keeps the text it was written as
  (:class:`WrittenInt` / :class:`WrittenFloat`, ``.text``): in a paper's table ``+58.8`` is a gain and
  ``58.8`` an accuracy, a difference that YAML's resolver drops.
"""
from __future__ import annotations

import json
import math
import os
import re
import stat
import tomllib
from pathlib import Path

import yaml

MAX_BYTES = 1 << 20  # 1 MiB: a config, plan or audit table is a few KiB
MAX_DEPTH = 64
MAX_ALIASES = 1000
MAX_NODES = 1_000_000

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class LoadError(ValueError):
    """A file could not be read safely (too big, not UTF-8, malformed, nested too deep, ...).

    The message is one line that names the file; ``line`` and ``column`` (1-based) are set when known.
    """

    def __init__(self, path, problem: str, line: int | None = None, column: int | None = None):
        self.path, self.problem, self.line, self.column = str(path), problem, line, column
        where = str(path)
        if line is not None:
            where += f": line {line}" + (f", column {column}" if column is not None else "")
        super().__init__(f"{where}: {problem}")


# -- bytes and text -----------------------------------------------------------------------------
def _mib(n: int) -> str:
    return f"{n / (1 << 20):.3g} MiB"


def read_regular(path, *, max_bytes: int = MAX_BYTES, what: str = "file") -> tuple[bytes, os.stat_result]:
    """The bytes of ``path`` and the status of the file they were read from.

    Only a regular file of at most ``max_bytes`` is read: it is opened without blocking (a FIFO or a
    device never stalls the caller) and checked on the open descriptor (``fstat``), so a link swapped in
    after a check cannot lead elsewhere (a symlink to ``/dev/zero`` is a device, refused)."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise LoadError(path, f"{what} not found") from None
    except IsADirectoryError:
        raise LoadError(path, f"is a folder, not a {what}") from None
    except OSError as err:
        raise LoadError(path, f"cannot read the {what}: {err.strerror or err}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        if stat.S_ISDIR(st.st_mode):
            raise LoadError(path, f"is a folder, not a {what}")
        # a FIFO or a device would block or never end
        raise LoadError(path, f"is not a regular file (a pipe or a device?); give a {what}")
    with os.fdopen(fd, "rb", buffering=0) as fh:
        if st.st_size > max_bytes:
            raise LoadError(path, f"{what} is {_mib(st.st_size)}, over the limit of {_mib(max_bytes)}")
        try:
            data = _read_upto(fh, max_bytes + 1)
        except OSError as err:
            raise LoadError(path, f"cannot read the {what}: {err.strerror or err}") from None
    if len(data) > max_bytes:  # grew while being read
        raise LoadError(path, f"{what} is over the limit of {_mib(max_bytes)}")
    return data, st


def _read_upto(fh, n: int) -> bytes:
    chunks, left = [], n
    while left > 0:
        chunk = fh.read(min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_bytes(path, *, max_bytes: int = MAX_BYTES, what: str = "file") -> bytes:
    """The bytes of ``path``, refusing a missing file, a folder, anything not a regular file (read
    without blocking) and anything over ``max_bytes``."""
    return read_regular(path, max_bytes=max_bytes, what=what)[0]


def _position(data: bytes, offset: int) -> tuple[int, int]:
    line = data.count(b"\n", 0, offset) + 1
    return line, offset - (data.rfind(b"\n", 0, offset) + 1) + 1


def decode(path, data: bytes, *, what: str = "file") -> str:
    """``data`` as UTF-8 text (a leading byte-order mark dropped); binary or other encodings refused."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise LoadError(path, f"{what} is UTF-16 text; save it as UTF-8")
    nul = data.find(b"\x00")
    if nul >= 0:
        line, col = _position(data, nul)
        raise LoadError(path, f"{what} is binary, not UTF-8 text (a NUL byte)", line, col)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line, col = _position(data, err.start)
        raise LoadError(path, f"{what} is not UTF-8 text (byte 0x{data[err.start]:02x}); save it as UTF-8",
                        line, col) from None


def read_text(path, *, max_bytes: int = MAX_BYTES, what: str = "file") -> str:
    """The UTF-8 text of ``path`` within the size limit (for CSV and other plain text)."""
    return decode(path, read_bytes(path, max_bytes=max_bytes, what=what), what=what)


# -- YAML ---------------------------------------------------------------------------------------
def _unique_mapping(loader, node, deep=False):
    if not isinstance(node, yaml.MappingNode):
        raise yaml.constructor.ConstructorError(None, None, f"expected a mapping, found {node.id}", node.start_mark)
    seen: dict = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            first = seen.get(key)
        except TypeError:  # an unhashable key (a list or mapping as a key)
            raise yaml.constructor.ConstructorError(None, None, "a mapping key must be a plain value",
                                                    key_node.start_mark) from None
        if first is not None:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} given twice (first on line {first + 1})", key_node.start_mark)
        seen[key] = key_node.start_mark.line
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


class _Yaml11(_Base):
    """PyYAML's safe loader (YAML 1.1 scalars), refusing repeated keys."""


_Yaml11.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


class _NoBool(_Yaml11):
    """YAML 1.1 scalars, but nothing is a boolean."""


_NoBool.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class WrittenInt(int):
    """An integer read from YAML that keeps its text as written (``.text``, e.g. ``"+5"``)."""

    text: str

    def __new__(cls, value: int, text: str):
        self = super().__new__(cls, value)
        self.text = text
        return self


class WrittenFloat(float):
    """A float read from YAML that keeps its text as written (``.text``, e.g. ``"+58.8"``)."""

    text: str

    def __new__(cls, value: float, text: str):
        self = super().__new__(cls, value)
        self.text = text
        return self


class _Written(_NoBool):
    """``_NoBool``, with numbers that keep their written text."""


def _written_int(loader, node):
    return WrittenInt(yaml.SafeLoader.construct_yaml_int(loader, node), node.value)


def _written_float(loader, node):
    return WrittenFloat(yaml.SafeLoader.construct_yaml_float(loader, node), node.value)


_Written.add_constructor("tag:yaml.org,2002:int", _written_int)
_Written.add_constructor("tag:yaml.org,2002:float", _written_float)


class _Core(_Yaml11):
    """YAML 1.2 core schema scalars."""


_Core.yaml_implicit_resolvers = {}
_CORE = {
    "tag:yaml.org,2002:null": (r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    "tag:yaml.org,2002:bool": (r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
    "tag:yaml.org,2002:int": (r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", list("-+0123456789")),
    "tag:yaml.org,2002:float": (r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                                r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$", list("-+.0123456789")),
}
for _tag, (_rx, _first) in _CORE.items():
    _Core.add_implicit_resolver(_tag, re.compile(_rx), _first)


def _core_int(loader, node):
    v = loader.construct_scalar(node)
    if v.startswith("0x"):
        return int(v[2:], 16)
    if v.startswith("0o"):
        return int(v[2:], 8)
    return int(v, 10)


def _core_float(loader, node):
    v = loader.construct_scalar(node).lower()
    if v.endswith(".inf"):
        return -math.inf if v.startswith("-") else math.inf
    if v == ".nan":
        return math.nan
    return float(v)


_Core.add_constructor("tag:yaml.org,2002:int", _core_int)
_Core.add_constructor("tag:yaml.org,2002:float", _core_float)
_Core.add_constructor("tag:yaml.org,2002:timestamp", yaml.SafeLoader.construct_yaml_str)

YAML_SCHEMAS = {"core": _Core, "nobool": _NoBool, "yaml11": _Yaml11, "written": _Written}


def _mark(err) -> tuple[int | None, int | None]:
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    return (mark.line + 1, mark.column + 1) if mark is not None else (None, None)


def _yaml_problem(err: yaml.YAMLError) -> str:
    parts = [getattr(err, "context", None), getattr(err, "problem", None)]
    text = "; ".join(p for p in parts if p) or str(err).splitlines()[0]
    if "could not determine a constructor" in text:
        text = ("a YAML tag that tabsim does not read (only plain values, lists and mappings; "
                + text.split("for the tag", 1)[-1].strip() + ")")
    return f"malformed YAML: {text}"


def _check_events(path, loader_cls, text: str, *, max_depth: int, max_aliases: int, max_nodes: int):
    """One pass over the YAML event stream (no recursion, nothing built): depth, aliases, expanded size."""
    aliases = docs = expanded = 0
    sizes: dict[str, int] = {}  # anchor -> values it stands for once expanded
    stack: list[list] = []  # open collections: [anchor, values so far]
    for ev in yaml.parse(text, Loader=loader_cls):
        m = ev.start_mark
        tag = getattr(ev, "tag", None)
        if tag is not None:
            # an explicit tag (`!!int "4"`, `!!python/...`, `!custom`, `!`) decides the type instead of the text;
            # the schemas above read plain values only (a quoted "4" stays a string)
            raise LoadError(path, f"an explicit YAML tag {tag.replace('tag:yaml.org,2002:', '!!')} (tags are not "
                                  "read: write the plain value, e.g. 4 rather than !!int \"4\")",
                            m.line + 1, m.column + 1)
        if isinstance(ev, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            if len(stack) >= max_depth:
                raise LoadError(path, f"nested too deep (more than {max_depth} levels of lists or mappings)",
                                m.line + 1, m.column + 1)
            expanded += 1
            stack.append([ev.anchor, 1])
            continue
        if isinstance(ev, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            anchor, n = stack.pop()
            if anchor is not None:
                sizes[anchor] = n
        elif isinstance(ev, yaml.ScalarEvent):
            n = 1
            if ev.anchor is not None:
                sizes[ev.anchor] = 1
            expanded += 1
        elif isinstance(ev, yaml.AliasEvent):
            aliases += 1
            if aliases > max_aliases:
                raise LoadError(path, f"too many YAML aliases (more than {max_aliases})", m.line + 1, m.column + 1)
            n = sizes.get(ev.anchor, 1)
            expanded += n
            if expanded > max_nodes:
                raise LoadError(path, f"YAML aliases expand to more than {max_nodes} values (an alias bomb?)",
                                m.line + 1, m.column + 1)
        elif isinstance(ev, yaml.DocumentStartEvent):
            docs += 1
            if docs > 1:
                raise LoadError(path, "holds more than one YAML document (a second '---'); expected one",
                                m.line + 1, m.column + 1)
            continue
        else:
            continue
        if stack:
            stack[-1][1] += n


def load_yaml(path, *, schema: str = "core", max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH,
              max_aliases: int = MAX_ALIASES, max_nodes: int = MAX_NODES, allow_empty: bool = False,
              what: str = "YAML file"):
    """The plain data (dicts, lists, str, int, float, bool, None) of one YAML document.

    Args:
      schema: how plain scalars are read: ``"core"``, ``"nobool"``, ``"yaml11"`` or ``"written"`` (see the
        module).
      allow_empty: return ``None`` for a file with no content instead of refusing it.

    Raises:
      LoadError: one line naming the file (and line, column) and what is wrong.
    """
    loader_cls = YAML_SCHEMAS[schema]
    text = decode(path, read_bytes(path, max_bytes=max_bytes, what=what), what=what)
    try:
        _check_events(path, loader_cls, text, max_depth=max_depth, max_aliases=max_aliases, max_nodes=max_nodes)
        data = yaml.load(text, Loader=loader_cls)  # noqa: S506 -- a SafeLoader with limits
    except yaml.YAMLError as err:
        line, col = _mark(err)
        if "nesting depth" in _yaml_problem(err):  # PyYAML's own limit (6.0.4: 1000 levels) fired before ours
            raise LoadError(path, f"nested too deep (more than {max_depth} levels of lists or mappings)",
                            line, col) from None
        raise LoadError(path, _yaml_problem(err), line, col) from None
    except RecursionError:
        raise LoadError(path, f"nested too deep (more than {max_depth} levels)") from None
    if data is None and not allow_empty:
        raise LoadError(path, f"{what} is empty (no content besides comments)")
    return data


# -- JSON ---------------------------------------------------------------------------------------
def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number (write a finite number)")


def _unique_pairs(pairs):
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"key {k!r} given twice")
        out[k] = v
    return out


def load_json(path, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH, what: str = "JSON file"):
    """The data of a JSON file (UTF-8, within the size and nesting limits; no ``NaN`` / ``Infinity``
    constants and no key given twice).

    Raises:
      LoadError: one line naming the file (and line, column) and what is wrong.
    """
    text = decode(path, read_bytes(path, max_bytes=max_bytes, what=what), what=what)
    if not text.strip():
        raise LoadError(path, f"{what} is empty")
    try:
        data = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unique_pairs)
    except json.JSONDecodeError as err:
        raise LoadError(path, f"malformed JSON: {err.msg}", err.lineno, err.colno) from None
    except ValueError as err:
        raise LoadError(path, f"malformed JSON: {err}") from None
    except RecursionError:
        raise LoadError(path, f"nested too deep (more than {max_depth} levels of arrays or objects)") from None
    if _depth(data, max_depth) > max_depth:
        raise LoadError(path, f"nested too deep (more than {max_depth} levels of arrays or objects)")
    return data


# -- TOML ---------------------------------------------------------------------------------------
_TOML_POS = re.compile(r"\(at line (\d+), column (\d+)\)")


def _depth(x, limit: int, level: int = 0) -> int:
    if level > limit:
        return level
    if isinstance(x, dict):
        return max([_depth(v, limit, level + 1) for v in x.values()], default=level + 1)
    if isinstance(x, list):
        return max([_depth(v, limit, level + 1) for v in x], default=level + 1)
    return level


def load_toml(path, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH, allow_empty: bool = False,
              what: str = "TOML file") -> dict:
    """The table of a TOML file (UTF-8, within the size and nesting limits).

    Raises:
      LoadError: one line naming the file (and line, column) and what is wrong.
    """
    text = decode(path, read_bytes(path, max_bytes=max_bytes, what=what), what=what)
    try:  # tomllib recurses once per nested array / inline table: a deep file ends in RecursionError
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        msg = str(err)
        m = _TOML_POS.search(msg)
        problem = _TOML_POS.sub("", msg).strip()
        raise LoadError(path, f"malformed TOML: {problem}", *(map(int, m.groups()) if m else ())) from None
    except RecursionError:
        raise LoadError(path, f"nested too deep (more than {max_depth} levels of arrays or tables)") from None
    if _depth(data, max_depth) > max_depth:
        raise LoadError(path, f"nested too deep (more than {max_depth} levels of arrays or tables)")
    if not data and not allow_empty:
        raise LoadError(path, f"{what} is empty (no content besides comments)")
    return data
