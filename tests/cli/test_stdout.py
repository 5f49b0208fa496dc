"""Stdout that cannot be written: one line and status 1; a reader that has gone: quiet, status 141.

``tabsim config schema > /dev/full`` and ``tabsim config show NAME --json > /dev/full`` ended in an
``OSError`` traceback, and so did every command that writes to stdout (``presets``, ``--help``,
``--version``, the ``--json`` summaries). The console script guards stdout for the whole command
(:func:`tabsim.cli.jsonout.guard_stdout`); each command's writes are checked here in-process against a real
full device, and the script itself once as a user runs it.
"""
from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys

import click
import pytest

from tabsim.cli import jsonout, main

FULL = "/dev/full"
COMMANDS = [["presets"], ["presets", "--json"], ["config", "schema"], ["config", "schema", "--json"],
            ["config", "show", "paper"], ["config", "show", "paper", "--json"], ["--help"], ["config", "--help"]]


@contextlib.contextmanager
def full_stdout(monkeypatch):
    """``sys.stdout`` as the console script leaves it, writing into ``/dev/full`` (set inside the test: pytest
    puts its own capture back before each test's call); the descriptor is restored afterwards."""
    if not os.path.exists(FULL):
        pytest.skip("no /dev/full on this system")
    saved = os.dup(1)
    full = os.open(FULL, os.O_WRONLY)
    os.dup2(full, 1)
    os.close(full)
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False))))
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    try:
        jsonout.guard_stdout()
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_full_stdout_ends_each_command_in_one_line(args, monkeypatch):
    with full_stdout(monkeypatch), pytest.raises(SystemExit) as ended:
        main.main(args, prog_name="tabsim")
    err = sys.stderr.getvalue()
    assert ended.value.code == 1, err
    assert err.strip() == "Error: cannot write to standard output: No space left on device", err


def test_the_console_script_on_a_full_device_and_a_closed_pipe():
    if not os.path.exists(FULL):
        pytest.skip("no /dev/full on this system")
    cmd = [sys.executable, "-m", "tabsim", "config", "schema"]
    with open(FULL, "w") as full:
        res = subprocess.run(cmd, stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert res.returncode == 1 and res.stderr == "Error: cannot write to standard output: No space left on device\n", \
        res.stderr
    read, write = os.pipe()
    os.close(read)  # the reader has gone before the first line (`| head -0`)
    res = subprocess.run(cmd, stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
    os.close(write)
    assert (res.returncode, res.stderr) == (jsonout.BROKEN_PIPE, ""), res.stderr


def test_a_stdout_that_is_no_file_is_left_alone(monkeypatch):
    buffer = io.StringIO()
    monkeypatch.setattr(sys, "stdout", buffer)
    jsonout.guard_stdout()
    assert sys.stdout is buffer
    click.echo("x")
    assert buffer.getvalue() == "x\n"
