"""The expected flow's optional metric grad_cosine: each step's cosine with the true gradient of pass@1.

The JAX cosine against direction()'s NumPy one (fast); the config's one-line refusals (sampled dynamics, a
per-prompt grad_cosine); with -m heavy, the flow's recorded first-step value against the exact expected update.
"""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pytest

from tabsim.config import resolve
from tabsim.config import ConfigError
from tabsim.sim.expected.direction import direction, grad_cosine


def test_grad_cosine_is_directions_cosine():
    rng = np.random.default_rng(7)
    z, c = rng.normal(0, 1, (4, 5)), (rng.random((4, 5)) < 0.4).astype(float)
    d = rng.normal(0, 1, (4, 5))
    got = float(grad_cosine(jnp.asarray(d), jnp.asarray(z), jnp.asarray(c)))
    assert got == pytest.approx(direction(d, z, c)["cosine"], abs=1e-6)
    # by hand: one prompt, two answers, uniform: g is along (1, -1); delta (1, 0) makes 45 degrees with it
    one = float(grad_cosine(jnp.asarray([[1.0, 0.0]]), jnp.zeros((1, 2)), jnp.asarray([[1.0, 0.0]])))
    assert one == pytest.approx(1 / math.sqrt(2), abs=1e-7)
    # an arm that does not move has no direction: NaN, not a division by zero
    assert math.isnan(float(grad_cosine(jnp.zeros((1, 2)), jnp.zeros((1, 2)), jnp.asarray([[1.0, 0.0]]))))


def _cfg(**train):
    return {"preset": "grpo", "algo": {"kl_placement": "none", "beta": 0.0}, "arms": {"arms": ["true"]},
            "train": {"steps": 1, "metrics": ["pass1", "grad_cosine"], **train}}


def test_grad_cosine_only_under_the_expected_flow():
    assert resolve(_cfg(dynamics="expected")).train.metrics == ["pass1", "grad_cosine"]
    with pytest.raises(ConfigError) as e:
        resolve(_cfg())
    line = str(e.value).splitlines()[-1].strip()
    assert line.startswith("train.metrics: 'grad_cosine' is recorded by the exact expected flow only") and \
        "train.dynamics = 'sampled'" in line
    with pytest.raises(ConfigError, match="train.prompt_metrics: 'grad_cosine' is not among"):
        resolve(_cfg(dynamics="expected", prompt_metrics=["grad_cosine"]))


@pytest.mark.heavy  # one compiled flow and one compiled expected step (about 10 s)
def test_flow_records_the_first_steps_cosine():
    import jax

    import tabsim as ts
    from tabsim.config.static import algo_spec, make_env, schedule
    from tabsim.sim.expected import expected_update
    from tabsim.sim.params import Hyper

    raw = {"preset": "grpo", "task": {"heterogeneity": 2.0, "prior_strength": 0.2},
           "algo": {"kl_placement": "none", "beta": 0.0}, "arms": {"arms": ["frozen", "true"]},
           "train": {"steps": 1, "seed": 90000, "dynamics": "expected", "metrics": ["pass1", "grad_cosine"]}}
    fin = ts.run(raw, progress=False).final().set_index("arm")
    cfg = resolve(raw)
    env, hp = make_env(cfg), Hyper(**cfg.hyper_values())
    task = env.init_task(jax.random.PRNGKey(90000), hp)
    z = np.asarray(task.prior_logits)
    delta = np.asarray(expected_update(env, algo_spec(cfg), schedule(cfg), "true", task, z, hp,
                                       precision="float64")) - z
    want = direction(delta, z, np.asarray(task.correct))["cosine"]  # 0.99748 (GRPO: below 1)
    assert fin.loc["true", "grad_cosine"] == pytest.approx(want, abs=2e-5) and want < 0.999
    assert math.isnan(fin.loc["frozen", "grad_cosine"])
