"""The ``tabsim`` command group: its commands, loaded when they run, the global options and the console script.

:data:`COMMANDS` names each command's module; :class:`LazyGroup` imports one only when it runs, so
``tabsim --help`` imports none of them. :func:`entry` is the console script.
"""
from __future__ import annotations

import atexit
import importlib
import os
import signal
import sys
import threading
from pathlib import Path

import click

from tabsim.cli.jsonout import StdoutFailed, guard_stdout
from tabsim.cli.options import fail, give
from tabsim.runtime import cache

# name -> (module:attribute, the one-line help `tabsim --help` lists; a test checks it is the command's)
COMMANDS = {
    "run": ("tabsim.cli.run:run_cmd", "Run the study described by CONFIG (a TOML, YAML or a run's config.json file)."),
    "sweep": ("tabsim.cli.run:sweep_cmd", "Sweep numeric fields of a preset without writing a config file."),
    "reproduce": ("tabsim.cli.reproduce:command",
                  "Rebuild the reference study (arXiv 2606.05932) and compare with its headline numbers."),
    "prereg": ("tabsim.cli.prereg:command",
               "Pre-registration: validate, lock, amend, run confirmatory, report against the plan."),
    "claims": ("tabsim.cli.claims:command",
               "Published claims as pre-registered studies: list them with their verdicts, run them, write their page."),
    "audit": ("tabsim.cli.audit:command",
              "Audit published RLVR results: partition, intervals, bounds for missing arms, verdict."),
    "compare": ("tabsim.cli.compare:command",
                "Compare the levels of --by across a run's conditions: mean, median, IQM, optimality gap, probability of"
                " improvement (stratified bootstrap intervals), and a performance profile."),
    "verify": ("tabsim.cli.verify:command",
               "Re-check the files of a published FOLDER against the SHA-256 manifest in its .tabsim-run.json."),
    "presets": ("tabsim.cli.presets:presets_cmd",
                "List the presets (named compositions a config or --preset starts from)."),
    "config": ("tabsim.cli.presets:config_group",
               "Show configs: a preset's resolved config (every field, the defaults filled in), or the config's JSON "
               "Schema."),
}


class LazyGroup(click.Group):
    """A group whose commands (:data:`COMMANDS`) are imported when one is looked up to run."""

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(COMMANDS))

    def get_command(self, ctx, name):
        if name in self.commands or name not in COMMANDS:
            return super().get_command(ctx, name)
        module, _, attr = COMMANDS[name][0].partition(":")
        cmd = getattr(importlib.import_module(module), attr)
        self.add_command(cmd, name)
        return cmd

    def format_commands(self, ctx, formatter):
        """The command list from :data:`COMMANDS` without importing the commands."""
        rows = [(name, COMMANDS[name][1] if name in COMMANDS and name not in self.commands
                 else self.commands[name].get_short_help_str(formatter.width))
                for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _version(ctx, param, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    # lazy: only --version loads JAX to name its backend; every other option parses without it
    import jax
    import jaxlib

    from tabsim import __version__  # lazy: as above (the device module is imported only here)
    from tabsim.runtime.device import DeviceError, available  # lazy: as above

    click.echo(f"tabsim {__version__}")
    click.echo(f"jax {jax.__version__}, jaxlib {jaxlib.__version__}, Python {sys.version.split()[0]}")
    try:
        devices = available()
        click.echo(f"default backend: {jax.default_backend()} ({', '.join(str(d) for d in jax.devices())})")
        click.echo(f"devices: {devices}")
    except DeviceError as err:
        click.echo(f"devices: none ({err})")
    ctx.exit(0)


def walk(cmd: click.Command, path: tuple = ()):
    """``(path, command)`` for ``cmd`` and every command under it (lazy ones imported)."""
    yield path, cmd
    if isinstance(cmd, click.Group):
        ctx = click.Context(cmd)
        for name in cmd.list_commands(ctx):
            yield from walk(cmd.get_command(ctx, name), path + (name,))


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_version,
              help="Show tabsim's, JAX's and jaxlib's versions and the devices JAX computes on, and exit.")
@click.option("--compile-cache", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep compiled programs in this folder (default: ~/.cache/tabsim/jax, or $TABSIM_COMPILATION_CACHE): "
                   "later runs of the same structure skip compilation.")
@click.option("--no-compile-cache", is_flag=True,
              help="Compile every program anew and write no compiled program to disk "
                   "(also TABSIM_COMPILATION_CACHE=0).")
def main(compile_cache, no_compile_cache):
    """tabsim: causal analysis of RL with verifiable rewards in a tabular GRPO simulator."""
    if compile_cache is not None and no_compile_cache:
        fail("--compile-cache and --no-compile-cache: give one of them, not both")
    if compile_cache is not None:
        try:
            path = cache.check_folder(compile_cache)
        except ValueError as e:
            fail(f"--compile-cache: {e}")
        # applied by the command before it compiles (tabsim.cli.options.open_executor), given to Dask workers
        give(click.get_current_context(), compilation_cache=str(path))
    elif no_compile_cache:
        give(click.get_current_context(), compilation_cache="0")


_SIGNALLED: list[int] = []  # the signals that interrupted the command (SIGINT, SIGTERM)
_RETRY = 0.05  # seconds: an interrupt that lands in an import is raised when the import is done


def _importing(frame) -> bool:
    """Whether ``frame`` runs inside an import (a module's top level, or importlib's own frames)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _interrupt(signum, frame) -> None:
    """Ctrl-C, and SIGTERM as Ctrl-C (one line, the finished chunks kept for ``--resume``, no helper left
    behind; exit status 143): a :class:`KeyboardInterrupt` where the command is, but never inside an import.
    Raised in the middle of loading JAX or numpy it broke their extensions (tracebacks of ImportErrors, even a
    crash); it is raised as soon as the import is done instead (a timer looks again). A second SIGTERM ends
    the process at once."""
    if signum != signal.SIGALRM:
        _SIGNALLED.append(signum)
        if signum == signal.SIGTERM:
            signal.signal(signum, signal.SIG_DFL)
    elif not _SIGNALLED:
        return
    if _importing(frame):
        signal.signal(signal.SIGALRM, _interrupt)
        signal.setitimer(signal.ITIMER_REAL, _RETRY)
        return
    raise KeyboardInterrupt


def _leave(signum, frame) -> None:
    """A signal once the command has returned: the process ends at once, with no traceback from an exit
    handler (its outputs are all in place by then)."""
    os._exit(128 + signum)


def _flushed(code: int) -> int:
    """``code`` after stdout's last flush: a failure of it is said in one line (:mod:`tabsim.cli.jsonout`)."""
    try:
        sys.stdout.flush()
    except StdoutFailed as err:
        err.show()
        return code or err.exit_code
    except click.exceptions.Exit as err:  # the reader has gone: quietly
        return code or err.exit_code
    except (OSError, ValueError):  # a stdout that is not guarded, already closed
        pass
    return code


def entry() -> None:
    """The ``tabsim`` console script: :func:`main`, then a quick exit.

    SIGTERM interrupts a command as Ctrl-C does (status 143; neither lands inside an import), and stdout
    that cannot be written ends it in one line (:func:`tabsim.cli.jsonout.guard_stdout`). A process that has loaded JAX, pandas, statsmodels
    and matplotlib spends 0.5-0.8 s at interpreter exit tearing down their modules and XLA's client; none of
    it is needed once the command has returned (every output is written and renamed into place by then).
    So the exit handlers run (``atexit``: temporary folders, logging, Dask), the figure pool's helper
    processes are ended and waited for, the standard streams are flushed and the process ends with
    ``os._exit``. While a non-daemon thread is still alive the ordinary exit is kept.
    """
    guard_stdout()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _interrupt)
    try:
        main.main(prog_name="tabsim")
        code = 0
    except SystemExit as exc:
        code = exc.code
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    if signal.SIGTERM in _SIGNALLED and code == 130:
        code = 128 + signal.SIGTERM
    signal.setitimer(signal.ITIMER_REAL, 0)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _leave)
    code = _flushed(code)
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(code)
    atexit._run_exitfuncs()
    if "tabsim.plotting.figure_pool" in sys.modules:  # after the exit handlers: they release its semaphores
        sys.modules["tabsim.plotting.figure_pool"].stop_helpers()
    try:
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe: nothing more can be said
        pass
    os._exit(code)
