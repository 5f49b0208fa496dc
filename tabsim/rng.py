"""Random numbers for the hot path.

Each seed carries two 32-bit seed words (the data of its JAX key). A draw is addressed by
``(seed, step, tag)``: the step of training and a small integer naming the use (batch, rollout,
reward noise, ...), so draws never depend on the order in which code asks for them, and the same
address gives the same numbers in every arm (paired randomness).

Two generators:

* ``fast`` (default): a counter hash, two rounds of Wellons' ``lowbias32`` integer finaliser keyed by
  the seed words and the address. About 15x faster than threefry on a CPU and cheap to compile;
  24-bit uniforms.
* ``threefry``: JAX's counter-based generator, ``fold_in(fold_in(key, step), tag)``.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from tabsim._ops import cumsum_last

RNGS = ("fast", "threefry")

# tags: one per use, so streams never overlap
BATCH, ROLLOUT, REWARD, TIE, PERM, POSITIONS, OFFLINE, OFFLINE_TIE, TASK_EXTRA = range(9)
TASK_STEP = 0x7FFFFFFF  # the step address reserved for drawing a seed's task


def _lowbias32(x):
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x7FEB352D)
    x = x ^ (x >> 15)
    x = x * jnp.uint32(0x846CA68B)
    return x ^ (x >> 16)


def seed_words(key):
    """The two uint32 words of a threefry key (or of an integer seed).

    An integer seed in ``[0, 2**32)`` gives ``[0, seed]``, the data of ``jax.random.key(seed)``,
    computed on the host (no device dispatch or compilation).
    """
    if isinstance(key, (int, np.integer)) and 0 <= int(key) < 2**32:
        return np.array([0, int(key)], dtype=np.uint32)
    if isinstance(key, (int, np.integer)):
        key = jax.random.key(int(key))
    return jax.random.key_data(key).astype(jnp.uint32).reshape(-1)[:2]


def seed_array(seeds) -> np.ndarray:
    """``uint32[S, 2]`` seed words of integer seeds."""
    return np.stack([np.asarray(seed_words(int(s)), dtype=np.uint32) for s in seeds])


def uniform(seed, shape, *, step=0, tag=0, rng: str = "fast"):
    """Uniforms in ``[0, 1)`` of ``shape`` at address ``(seed, step, tag)``.

    Args:
      seed: ``uint32[2]`` seed words (see :func:`seed_words`).
      step, tag: integers (traced or static) addressing the draw.
      rng: ``fast`` or ``threefry``.
    """
    if rng == "threefry":
        key = jax.random.wrap_key_data(seed, impl="threefry2x32")
        return jax.random.uniform(jax.random.fold_in(jax.random.fold_in(key, step), tag), shape)
    n = 1
    for s in shape:
        n *= s
    addr = _lowbias32(jnp.asarray(step).astype(jnp.uint32) * jnp.uint32(0x9E3779B9) + jnp.uint32(tag) * jnp.uint32(0x85EBCA6B) + seed[1])
    counter = jnp.arange(n, dtype=jnp.uint32).reshape(shape)
    x = _lowbias32(_lowbias32(counter ^ seed[0]) ^ addr)
    return (x >> 8).astype(jnp.float32) * jnp.float32(1.0 / 16777216.0)


def categorical(seed, probs, n, *, step=0, tag=0, rng="fast"):
    """``n`` draws per row from ``probs [R, K]`` by inverse CDF, ``[R, n]`` int32."""
    cdf = cumsum_last(probs)[:, None, : probs.shape[-1] - 1]
    u = uniform(seed, (probs.shape[0], n), step=step, tag=tag, rng=rng)
    return (u[..., None] >= cdf).sum(-1).astype(jnp.int32)
