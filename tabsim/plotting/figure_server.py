"""The first module the figure pool's fork server imports (:mod:`tabsim.plotting.figure_pool`); nothing else
imports it.

It ignores Ctrl-C (the command ends the pool) and sets the server's environment before numpy loads: no
native thread pools (OpenBLAS and OpenMP start one at import, pyarrow's jemalloc a background thread;
drawing needs none), so that the server is one thread when it forks a worker, and the Agg backend. Then it loads matplotlib and tabsim's figure module
and draws one small figure, so that every worker starts with the fonts and the backend ready. A failure
here is left to the worker that draws, which reports it (a broken matplotlib:
:class:`tabsim.plotting.figure_pool.FiguresUnavailable`); the server itself always starts.
"""
from __future__ import annotations

import atexit
import os
import signal
import sys

# Ctrl-C reaches the whole foreground process group: the command alone decides what it means (it ends the
# pool). The server ignores it, and so does every worker it forks (they inherit the setting); the command
# starts the server with SIGINT blocked, so that none arrives before this line (figure_pool._quiet_start).
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
# The server ends when the command closes its pipe; it owns no file, so it leaves at once rather than tearing
# down matplotlib's modules (about a second on a busy machine, while the command waits for it). Registered
# first of the server's exit handlers, it runs last; a worker never runs them (the fork server ends each
# with os._exit).
atexit.register(os._exit, 0)

SINGLE_THREADED = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                   "JE_ARROW_MALLOC_CONF": "background_thread:false", "MPLBACKEND": "Agg"}

from tabsim.base import defaults  # noqa: E402  (the ground floor: os, dataclasses and pathlib only)

defaults.set_in_this_process(SINGLE_THREADED)  # this module runs only in the fork server (see above)
# a worker that cannot start (its working folder was removed) ends with status 1, and the command draws
# its figures and says so in one line: no traceback from here
sys.excepthook = lambda *exc: None

from tabsim.plotting.figure_pool import warm_figure  # noqa: E402  after the environment, before numpy

try:
    warm_figure()
except Exception:  # noqa: BLE001, S110 - the worker that draws meets it again and reports it
    pass
