import glob
import os

# One host device, and XLA's backend (LLVM) optimisation off: the suite checks numbers and mechanisms, not
# speed, and compiling is most of its time (tests/core/test_engine.py and test_tree.py: 66 s -> 47 s, user
# CPU 84 s -> 52 s, on 2 cores). Every comparison a test makes runs under one setting (the processes a test
# starts inherit it); the notebooks, whose kernels run long and compare nothing with this process, get the
# optimised code with the ``optimized_xla`` fixture. A user's XLA_FLAGS replace both flags.
FAST_COMPILE = "--xla_backend_optimization_level=0"
os.environ.setdefault("XLA_FLAGS", f"--xla_force_host_platform_device_count=1 {FAST_COMPILE}")


def optimized_flags() -> str:
    """The XLA flags of this process less the suite's fast-compile flag: a user's compilation."""
    return " ".join(f for f in os.environ.get("XLA_FLAGS", "").split() if f != FAST_COMPILE)


def _may_see_gpu() -> bool:
    """Whether JAX may find a GPU here, told without importing JAX: the machine has an NVIDIA or AMD
    device node (``/dev/nvidia0``..., ``/dev/kfd``)."""
    return bool(glob.glob("/dev/nvidia[0-9]*")) or os.path.exists("/dev/kfd")


# Each JAX process takes 75% of a GPU's memory when it starts by default: the second xdist worker's
# allocations then fail. Set before any test or worker imports JAX (the workers inherit it).
if _may_see_gpu():
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
os.environ.setdefault("MPLBACKEND", "Agg")
if os.environ.get("PYTEST_XDIST_WORKER"):  # the xdist processes already use every core
    os.environ.setdefault("TABSIM_THREADS", "1")
# Figures are drawn in the test process: a figure helper started per command costs a Python start-up and
# the plotting stack's import (1.3 s of CPU each, a minute over the suite's commands). The tests of the
# helper itself (tests/plotting/test_figure_process.py) and of the reference study's end-to-end run
# (tests/studies/test_reproduce.py) switch it back on with the ``figure_helper`` fixture.
os.environ.setdefault("TABSIM_FIGURE_PROCESS", "0")

# No compilation cache on disk by default: writing every program the suite compiles (eager operations
# included) cost more than the hits saved (test_engine, test_closed_form, test_algos: 17-25% faster without
# it). The tests of the cache give their processes a folder of their own (tests/cli/test_startup.py,
# tests/runtime/test_executables.py, test_engine's cross-process test); nothing writes to the user's
# default folder (tabsim.runtime.cache).
import shutil  # noqa: E402
import tempfile  # noqa: E402

os.environ.setdefault("TABSIM_COMPILATION_CACHE", "0")
# The audit's calibration sweeps go to the session's own folder (``TABSIM_CACHE``), never to
# ``~/.cache/tabsim``: computed once per session, shared by the workers, gone afterwards.
_CACHE = tempfile.mkdtemp(prefix="tabsim-tests-cache-")
os.environ.setdefault("TABSIM_CACHE", _CACHE)


def pytest_sessionfinish(session, exitstatus):
    # the xdist workers inherit the controller's folder; each process removes the folder it made unless it
    # handed it on (a worker that finished first must not pull the shared one from under the other)
    if os.environ.get("TABSIM_CACHE") == _CACHE and os.environ.get("PYTEST_XDIST_WORKER"):
        return
    shutil.rmtree(_CACHE, ignore_errors=True)


# Ctrl-C as Python sets it up. Tests that send SIGINT (to themselves or to a subprocess, which inherits
# an ignored or blocked SIGINT) need the default: a library used earlier in the same worker process can
# leave SIGINT ignored or blocked (seen in a fresh clone's full run: every SIGINT test of one worker
# failed, each passing alone). Each test starts with the default, and one that changes it is named.
import signal  # noqa: E402
import threading  # noqa: E402
import warnings  # noqa: E402

import pytest  # noqa: E402


def _sigint_state() -> tuple:
    return signal.getsignal(signal.SIGINT), signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])


@pytest.fixture(autouse=True)
def _default_sigint(request):
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    handler, blocked = _sigint_state()
    if handler is not signal.default_int_handler or blocked:
        warnings.warn(f"{request.node.nodeid} left SIGINT {'blocked' if blocked else ''} handler={handler!r}")


@pytest.fixture
def optimized_xla(monkeypatch):
    """The test's subprocesses (and notebook kernels) compile with XLA's backend optimisation, as a user's do."""
    monkeypatch.setenv("XLA_FLAGS", optimized_flags())


@pytest.fixture
def user_xla_flags() -> str:
    """The XLA_FLAGS a user's process compiles with (for a subprocess the test starts itself)."""
    return optimized_flags()


@pytest.fixture
def figure_helper(monkeypatch):
    """Figures drawn by the helper process, as a user's commands draw them (the suite draws in-process)."""
    monkeypatch.setenv("TABSIM_FIGURE_PROCESS", "1")


# The longest test files first. ``--dist loadfile`` hands each worker one file at a time in collection order
# (``--no-loadscope-reorder`` in pyproject keeps that order; xdist would otherwise put files with many tests
# first): a long file started last would run on one worker while the other waits. Longest first keeps the two
# workers' ends close together. The list is the files whose tests take the most time in one run (measured with
# ``--durations``); a file missing from it keeps its place after them.
LONGEST_FIRST = (
    "tests/studies/test_claims_reduced_tree.py",
    "tests/studies/test_claims.py",
    "tests/core/test_presets.py",
    "tests/core/test_algos.py",
    "tests/core/test_expected.py",
    "tests/core/test_engine.py",
    "tests/docs/test_docs.py",
    "tests/core/test_tree.py",
    "tests/runtime/test_dask.py",
)


def pytest_collection_modifyitems(session, config, items):
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    root = config.rootpath

    def place(item):
        path = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else str(item.path)
        return rank.get(path, len(rank))

    items.sort(key=place)  # stable: the order within a file, and among the files not listed, is kept
