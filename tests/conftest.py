import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=1")
os.environ.setdefault("MPLBACKEND", "Agg")
if os.environ.get("PYTEST_XDIST_WORKER"):  # the xdist processes already use every core
    os.environ.setdefault("TABSIM_THREADS", "1")

# The suite's compiled programs go to a cache of its own (shared by its subprocesses), never the
# user's default cache folder (tabsim.runtime.cache).
import shutil  # noqa: E402
import tempfile  # noqa: E402

_JAX_CACHE = tempfile.mkdtemp(prefix="tabsim-tests-jax-")
os.environ.setdefault("TABSIM_COMPILATION_CACHE", _JAX_CACHE)


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(_JAX_CACHE, ignore_errors=True)
