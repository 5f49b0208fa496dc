"""One update of a resolved config, op by op (``jax.disable_jit``: no compilation per config), shared by the tests
that check what a component does inside the engine's step (imported by them; not a test module)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from tabsim.config.static import algo_spec, make_env, schedule
from tabsim.sim.engine import init_state
from tabsim.sim.params import Hyper
from tabsim.sim.update import make_update


def eager_step(cfg, arm: int = 1):
    """``(env, hp, task, state, after, diag)``: the state before and after one update of ``cfg`` on the arm at
    position ``arm`` of ``cfg.arms.arms``, from seed words ``(0, 1)``."""
    env, algo = make_env(cfg), algo_spec(cfg)
    hp = Hyper(**{k: np.float32(v) for k, v in cfg.hyper_values().items()})
    update = make_update(env, algo, schedule(cfg), tuple(cfg.arms.arms))
    with jax.disable_jit():
        task, state = init_state(env, algo, jnp.asarray([0, 1], jnp.uint32), hp)
        after, diag = update(state, task, arm, hp)
    return env, hp, task, state, after, diag
