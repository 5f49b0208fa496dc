"""A command's phase lines on stderr, ``[  2.3s] what starts now``, and its clock.

Every computing command (``run``, ``sweep``, ``reproduce``, ``prereg run``, ``audit``) says what it starts
on stderr (so ``--json``'s stdout stays one object), timed from the process's start (imports counted),
so that the time it prints and records is the wall time ``time`` measures. Light: ``--help`` imports it.
"""
from __future__ import annotations

import time

import click

from tabsim.base import xla
from tabsim.base.host import started_at


class Phases:
    """The command's phase lines on stderr, ``[  2.3s] what starts now``, timed from the process's start
    (its imports counted), so that every number printed or recorded is the wall time ``time`` measures.

    ``quiet`` (``-q``) prints none, nor the library's notes on compile options (:func:`tabsim.base.xla.set_notes`;
    provenance still names a dropped option); the clock still runs (:meth:`seconds`, :attr:`t0`)."""

    def __init__(self, quiet: bool):
        self.t0, self.quiet = started_at(), quiet
        xla.set_notes(not quiet)

    def seconds(self) -> float:
        """Seconds since the process started."""
        return time.perf_counter() - self.t0

    def __call__(self, msg: str) -> None:
        if not self.quiet:
            click.echo(f"[{self.seconds():5.1f}s] {msg}", err=True)
