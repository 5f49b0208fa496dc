"""What a command writes on stdout: ``--json``'s one summary object, and what happens when stdout fails.

A command given ``--json`` prints exactly one JSON object on stdout when it ends (``json.loads`` of the
whole of stdout works), so scripts need no parsing of tables; progress, notes and the human summary go
to stderr as usual. A refusal prints no object (the exit status and stderr say why).

Stdout that cannot be written (``> /dev/full``, a disk that fills) ends the command with one line on
stderr and exit status 1; a reader that has gone (``| head -1``) ends it quietly with status 141, as a
Unix tool ends on SIGPIPE (:func:`guard_stdout`, set up by the console script).
"""
from __future__ import annotations

import io
import json
import math
import os
import sys

import click

BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a tool ended by a closed pipe


class StdoutFailed(click.ClickException):
    """Stdout cannot be written (a full disk, a vanished terminal): one line, exit status 1. Not an
    ``OSError``: a command's own output folder is not what failed."""


def _failed(err: OSError):
    """Stdout failed with ``err``: the rest of its output goes nowhere (so that no later flush fails again),
    and the command ends in one line, or quietly where the reader has gone."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno())
        os.close(devnull)
    except (OSError, AttributeError, ValueError):
        pass
    if isinstance(err, BrokenPipeError):
        raise click.exceptions.Exit(BROKEN_PIPE)
    raise StdoutFailed(f"cannot write to standard output: {err.strerror or err}") from None


_REPLACED: list = []  # the streams guard_stdout replaced


class _Guarded(io.BufferedWriter):
    """Stdout's buffer whose failures end the command as :func:`_failed` says (``unbuffered``: each write
    is passed on at once, as ``PYTHONUNBUFFERED`` asked of the stdout it replaces)."""

    unbuffered = False

    def write(self, data):
        try:
            n = super().write(data)
            if self.unbuffered:
                super().flush()
            return n
        except OSError as err:
            _failed(err)

    def flush(self):
        try:
            return super().flush()
        except OSError as err:
            _failed(err)


def guard_stdout() -> None:
    """Make ``sys.stdout`` end the command in one line when it cannot be written (exit status 1), and quietly
    when its reader has gone (:data:`BROKEN_PIPE`). For the console script, which owns the process;
    a stdout that is not a file (a notebook's, a test's capture) is left as it is."""
    out = sys.stdout
    buffer = getattr(out, "buffer", None)
    raw = buffer if isinstance(buffer, io.FileIO) else getattr(buffer, "raw", None)  # FileIO: PYTHONUNBUFFERED
    if not isinstance(raw, io.FileIO) or isinstance(buffer, _Guarded):
        return
    out.flush()
    _REPLACED.append(out)  # kept open: closing it would close the descriptor
    guarded = _Guarded(io.FileIO(raw.fileno(), "w", closefd=False))
    guarded.unbuffered = buffer is raw
    sys.stdout = io.TextIOWrapper(guarded, encoding=out.encoding, errors=out.errors,
                                  line_buffering=out.line_buffering, write_through=out.write_through)


def json_option(fn):
    """Add ``--json`` (parameter ``as_json``) to a command."""
    return click.option("--json", "as_json", is_flag=True,
                        help="Print one JSON summary object on stdout; human-readable lines go to stderr.")(fn)


def _plain(o):
    if isinstance(o, float) and not math.isfinite(o):
        return None  # JSON has no NaN or infinity
    if isinstance(o, dict):
        return {str(k): _plain(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_plain(v) for v in o]
    if hasattr(o, "item") and callable(o.item):  # NumPy scalars
        return _plain(o.item())
    if isinstance(o, (str, int, float, bool)) or o is None:
        return o
    return str(o)


def emit(obj: dict) -> None:
    """Print ``obj`` as one line of JSON on stdout (NaN and infinity as null, other objects as strings)."""
    click.echo(json.dumps(_plain(obj), sort_keys=True, allow_nan=False))


def say(message: str, as_json: bool) -> None:
    """A line for a person: on stdout normally, on stderr under ``--json`` (stdout holds only the object)."""
    click.echo(message, err=as_json)
