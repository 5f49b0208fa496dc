"""The first module the figure pool's fork server imports (:mod:`tabsim.plotting.figure_pool`); nothing else
imports it.

It sets the server's environment before numpy loads: no native thread pools (OpenBLAS and OpenMP start
one at import, pyarrow's jemalloc a background thread; drawing needs none), so that the server is one
thread when it forks a worker, and the Agg backend. Then it loads matplotlib and tabsim's figure module
and draws one small figure, so that every worker starts with the fonts and the backend ready. A failure
here is left to the worker that draws, which reports it (a broken matplotlib:
:class:`tabsim.plotting.figure_pool.FiguresUnavailable`); the server itself always starts.
"""
from __future__ import annotations

import os
import sys

SINGLE_THREADED = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                   "JE_ARROW_MALLOC_CONF": "background_thread:false", "MPLBACKEND": "Agg"}

os.environ.update(SINGLE_THREADED)  # this module runs only in the fork server (see above)
# a worker that cannot start (its working folder was removed) ends with status 1, and the command draws
# its figures and says so in one line: no traceback from here
sys.excepthook = lambda *exc: None

from tabsim.plotting.figure_pool import warm_figure  # noqa: E402  after the environment, before numpy

try:
    warm_figure()
except Exception:  # noqa: BLE001, S110 - the worker that draws meets it again and reports it
    pass
