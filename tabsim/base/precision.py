"""The numerical precision of tabsim's compiled programs, set per program and never process-wide.

Every program tabsim compiles (the bandit and tree engines, the expected flow and its batch-level
estimators, hence the audit's calibration sweeps) is traced under :func:`full`, which asks for full
float32 precision in each matrix product (``jax.default_matmul_precision("float32")``, i.e.
``precision=HIGHEST`` on every ``dot_general``). Without it XLA may compute float32 products at a
reduced precision on an accelerator (TF32-class on NVIDIA GPUs: about 10 bits of mantissa), so that
the exact expected flow no longer equals enumeration and a GPU's numbers leave the CPU's. The setting
is entered inside the traced function: a user's own JAX code keeps its own settings.

``precision="float64"`` (:func:`scope`) runs a program in double precision: JAX's 64-bit mode is
switched on for the tracing and the execution of that call only (a thread-local context), and the
programs build their floating arrays with :func:`real`, the floating type of the program being traced.
``"float32"`` switches it off in the same way, so a float32 program computes in float32 whatever the
process says (``JAX_ENABLE_X64=1``, or ``jax.config.update("jax_enable_x64", True)`` in a notebook):
the precision a result records is the one it was computed in.
"""
from __future__ import annotations

import contextlib
import functools

import jax
import numpy as np

PRECISIONS = ("float32", "float64")
DEFAULT = "float32"
PRODUCTS = "highest"  # the precision of every matrix product, recorded in a result's provenance


def chosen(precision: str | None = None) -> str:
    """``precision``, else :data:`DEFAULT`; checked (:func:`check`). The user's default (a command's
    ``--precision``, ``$TABSIM_PRECISION``) is the caller's to read (:func:`tabsim.base.defaults.precision`)."""
    return check(precision or DEFAULT)


def check(precision: str) -> str:
    """``precision`` if it is one of :data:`PRECISIONS`; else a ValueError naming the allowed values."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision: unknown precision {precision!r}; allowed: {', '.join(PRECISIONS)}")
    return precision


def full(fn):
    """``fn`` traced with every matrix product at full float32 precision (``HIGHEST``).

    Wrap the function a ``jax.jit`` traces: the setting is read while its products are traced, and
    the compiled program carries it, whatever the caller's own default."""
    @functools.wraps(fn)
    def traced(*args, **kwargs):
        with jax.default_matmul_precision("float32"):
            return fn(*args, **kwargs)

    return traced


def _x64(on: bool):
    """JAX's 64-bit mode on or off (this thread) as a context manager: ``jax.enable_x64(on)`` (jax >= 0.7),
    else the older ``jax.experimental.enable_x64()`` / ``disable_x64()``."""
    if hasattr(jax, "enable_x64"):
        return jax.enable_x64(on)
    from jax import experimental  # lazy: only older JAX lacks jax.enable_x64

    return experimental.enable_x64() if on else experimental.disable_x64()


@contextlib.contextmanager
def scope(precision: str = DEFAULT):
    """Trace and run the programs called inside in ``precision`` (this thread only).

    ``"float64"`` switches JAX's 64-bit mode on until the block ends (its results stay float64 arrays
    afterwards); ``"float32"`` switches it off, whatever the process's own setting (``JAX_ENABLE_X64``)."""
    with _x64(check(precision) == "float64"):
        yield


def real():
    """The floating dtype of the program being traced: float64 inside ``scope("float64")``, float32 inside
    ``scope("float32")`` (outside a scope: the process's JAX setting)."""
    return jax.dtypes.canonicalize_dtype(np.float64)


def describe(precision: str = DEFAULT) -> dict:
    """What a result's provenance records: the floating dtype and the matrix products' precision."""
    return {"precision": check(precision), "matmul_precision": PRODUCTS}
