"""The registry every pluggable kind is: names kept in order, tabsim's own names refused, a user's replaced and
counted, an unknown one named."""
from __future__ import annotations

import re
import warnings

import pytest

from tabsim.base.registry import Registry, UnknownName


def _as_package(source: str, **names):
    """Run ``source`` as the package's own modules do: from a module named under ``own="pkg."``."""
    exec(source, {"__name__": "pkg.components", **names})


def _fruit():
    reg = Registry("fruit")
    for name in ("pear", "apple", "fig"):
        reg.register(name, sweet=name != "fig")(name.upper())
    return reg


def test_names_keep_registration_order_and_the_decorator_returns_its_argument():
    reg = _fruit()
    assert reg.names() == ("pear", "apple", "fig") == tuple(reg)
    assert reg.register("kiwi")(len) is len and reg["kiwi"] is len
    assert reg["apple"] == "APPLE" and reg.meta("fig") == {"sweet": False} and reg.meta("kiwi") == {}


def test_a_users_name_registered_again_is_replaced_and_counted_and_an_own_one_refused():
    reg = _fruit()  # registered from this test module, outside the package: a user's
    assert reg.version("apple") == 1
    assert reg.register("apple", sweet=False)("GREEN") == "GREEN"
    assert reg["apple"] == "GREEN" and reg.meta("apple") == {"sweet": False} and reg.version("apple") == 2
    assert reg.names() == ("pear", "apple", "fig")  # replaced in place
    own = Registry("tool", own="pkg.")
    _as_package("own.register('size')(len)", own=own)
    with pytest.raises(ValueError, match=r"tool 'size' is one of tabsim's own .*taken: size"):
        own.register("size")(abs)
    assert own["size"] is len and own.version("size") == 1
    with pytest.raises(ValueError, match="non-empty string"):
        reg.register("")


def test_an_estimator_registered_again_runs_its_new_code_not_the_earlier_program():
    """A notebook cell run twice: the second definition's numbers, not those of the program compiled for the first."""
    import numpy as np

    import tabsim as ts
    from tabsim.config.static import static_key
    from tabsim.sim import algos

    grpo = algos.ESTIMATORS["grpo"]
    cfg = {"preset": "paper", "algo": {"estimator": "rescaled_grpo"}, "task": {"n_prompts": 8},
           "arms": {"arms": ["true"]}, "train": {"steps": 6, "seeds": 2, "batch_size": 4}}
    try:
        finals = []
        for scale in (1.0, 0.0):
            algos.register_estimator("rescaled_grpo")(lambda rewards, s=scale, **kw: s * grpo(rewards, **kw))
            assert static_key(ts.resolve(cfg))[-1] == ("user", (("estimator", "rescaled_grpo",
                                                                 algos.ESTIMATORS.version("rescaled_grpo")),))
            finals.append(ts.run(cfg, progress=False).final()["pass1"].to_numpy())
        assert not np.array_equal(finals[0], finals[1])  # a zero advantage never moves the policy
        assert static_key(ts.resolve({"preset": "paper"}))[-1] != "user"  # tabsim's own: the key is unchanged
    finally:
        algos.ESTIMATORS.unregister("rescaled_grpo")


def test_an_unknown_name_is_a_key_error_and_a_value_error_naming_kind_and_allowed_names():
    reg = _fruit()
    with pytest.raises(UnknownName) as err:
        reg["aple"]
    assert str(err.value) == "unknown fruit 'aple' (did you mean `apple`?); allowed: apple, fig, pear"
    assert isinstance(err.value, KeyError) and isinstance(err.value, ValueError)
    with pytest.raises(KeyError, match="allowed: apple, fig, pear"):
        reg.meta("plum")
    assert reg.get("plum") is None and "plum" not in reg


def test_every_engine_registry_refuses_its_own_names_and_names_an_unknown_one():
    from tabsim.sim import algos
    from tabsim.sim.envs import ENVS, register_env

    regs = {"estimator": (algos.ESTIMATORS, algos.register_estimator), "ratio": (algos.RATIOS, algos.register_ratio),
            "surrogate": (algos.SURROGATES, algos.register_surrogate),
            "aggregation": (algos.AGGREGATIONS, algos.register_aggregation),
            "kl": (algos.KL_ESTIMATORS, algos.register_kl), "env": (ENVS, register_env)}
    for kind, (reg, register) in regs.items():
        first, before = next(iter(reg)), dict(reg)
        with pytest.raises(ValueError, match=f"{kind} '{first}' is one of tabsim's own"):
            register(first)(type("Other", (), {}))
        assert dict(reg) == before, kind
        with pytest.raises(KeyError, match=f"unknown {kind} 'nope'; allowed: {', '.join(sorted(reg))}$"):
            reg["nope"]
    assert ENVS["bandit"].name == "bandit"


def test_the_clipped_keyword_of_a_surrogate_is_kept():
    from tabsim.sim import algos

    assert {n for n in algos.SURROGATES if not algos.SURROGATES.meta(n)["clipped"]} == {
        "cispo", "sapo", "importance", "reinforce", "spo", "gvpo", "kl_cov", "disco", "real", "drpo", "opmd"}


# -- a registry is written only through register ----------------------------------------------------------
WRITES = {"item": lambda r: r.__setitem__("grpo", len), "del": lambda r: r.__delitem__(next(iter(r))),
          "update": lambda r: r.update({"x": len}), "pop": lambda r: r.pop(next(iter(r))),
          "setdefault": lambda r: r.setdefault("x", len), "clear": lambda r: r.clear(), "popitem": lambda r: r.popitem()}


def _ior(reg):
    reg |= {"x": len}


def test_every_engine_registry_refuses_a_write_other_than_register_with_one_line_pointing_to_it():
    """``ESTIMATORS["grpo"] = f`` used to replace the built-in silently; every write but ``register`` is refused."""
    from tabsim.base.registry import ReadOnly
    from tabsim.sim import algos
    from tabsim.sim.envs import ENVS

    for reg in (algos.ESTIMATORS, algos.RATIOS, algos.SURROGATES, algos.AGGREGATIONS, algos.KL_ESTIMATORS, ENVS):
        before = dict(reg)
        for what, write in {**WRITES, "|=": _ior}.items():
            with pytest.raises(TypeError, match=rf"^the {reg.kind} registry is read-only; .*`@register_{reg.kind}\(name\)`") as err:
                write(reg)
            assert isinstance(err.value, ReadOnly) and "\n" not in str(err.value), (reg.kind, what)
        assert dict(reg) == before and list(reg) == list(before), reg.kind
        assert next(iter(reg)) in reg and sorted(reg) == sorted(before) and len(reg) == len(before)
    with pytest.raises(TypeError):
        algos.TOKEN_RETURNS["reinforce_pp"] = len


def test_a_users_name_can_be_unregistered_and_registered_again_but_not_an_own_one():
    reg = _fruit()
    reg.unregister("apple")
    assert "apple" not in reg and reg.names() == ("pear", "fig")
    reg.register("apple")("RED")
    assert reg["apple"] == "RED" and reg.version("apple") == 2  # the count goes on: no earlier program is reused
    own = Registry("tool", own="pkg.")
    _as_package("own.register('size')(len)", own=own)
    with pytest.raises(ValueError, match="tool 'size' is one of tabsim's own and cannot be unregistered"):
        own.unregister("size")
    with pytest.raises(KeyError, match="unknown fruit 'plum'"):
        reg.unregister("plum")


def test_an_own_component_outside_the_configs_list_of_names_is_refused():
    """The config validates tabsim's own names from one list before JAX loads; the registry reads the same list."""
    own = Registry("tool", own="pkg.", builtin=("len",))
    _as_package("own.register('len')(len)", own=own)
    with pytest.raises(ValueError, match=r"tool 'size' is one of tabsim's own but not among the names the config "
                                         r"reads \(len\); add it to that list"):
        _as_package("own.register('size')(len)", own=own)
    own.register("mine")(lambda x: x)  # a user's (registered outside the package): any name
    own.register("also_len")(len)  # a user's name for one of the package's functions is the user's
    assert list(own) == ["len", "mine", "also_len"] and not own.is_own("also_len") and own.is_own("len")
    from tabsim.base import choices
    from tabsim.sim import algos

    assert algos.SURROGATES.builtin is choices.SURROGATES and algos.ESTIMATORS.builtin is choices.ESTIMATORS


# -- what a user's estimator returns is checked where it enters ------------------------------------------
def _adv(name, rewards, **hp):
    """``advantages`` of estimator ``name`` in a compiled function, the hyperparameters traced as in the engine."""
    import jax
    import jax.numpy as jnp

    import tabsim as ts
    from tabsim.sim import algos

    spec = algos.AlgoSpec(estimator=name)
    r = jnp.asarray(rewards, jnp.float32)
    fn = jax.jit(lambda r, hp: algos.advantages(spec, r, lengths=jnp.ones(r.shape, jnp.int32),
                                                valid=jnp.ones(r.shape[:1], r.dtype), hp=hp))
    return fn(r, ts.Hyper(**hp))


@pytest.fixture
def user_estimator():
    from tabsim.sim import algos

    names = []

    def register(name, fn, **meta):
        names.append(name)
        return algos.register_estimator(name, **meta)(fn)

    yield register
    for name in names:
        algos.ESTIMATORS.unregister(name)


REWARDS = [[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 1.0, 1.0]]


@pytest.mark.parametrize("out, shape", [(lambda r: r.mean(-1, keepdims=True), "(2, 1)"),
                                        (lambda r: r.reshape(-1), "(8,)"),
                                        (lambda r: (r > 0.5).astype("int32"), "(2, 4), dtype int32"),
                                        (lambda r: None, None)])
def test_an_estimators_output_of_another_shape_or_dtype_is_refused_naming_it_and_the_contract(user_estimator, out,
                                                                                              shape):
    """A ``[B, 1]`` output used to broadcast silently over the answers, and a ``[B G]`` one failed deep in the loss."""
    user_estimator("odd_shape", lambda rewards, **kw: out(rewards))
    got = "NoneType, not an array" if shape is None else f"shape {shape}"
    with pytest.raises(ValueError, match=rf"^estimator 'odd_shape' returned (advantages of )?{re.escape(got)}.*"
                                         rf"shape \[B, G\] = \(2, 4\), dtype float32"):
        _adv("odd_shape", REWARDS)


def test_an_estimator_not_finite_on_a_homogeneous_group_is_refused_when_first_traced(user_estimator):
    """A z-score with no epsilon divides 0 by 0 on a group whose answers all score alike; it used to train on."""
    import jax.numpy as jnp

    def no_eps(rewards, **kw):
        c = rewards - rewards.mean(-1, keepdims=True)
        return c / jnp.sqrt((c**2).mean(-1, keepdims=True))

    user_estimator("no_eps", no_eps)
    with pytest.raises(ValueError) as err:
        _adv("no_eps", REWARDS)
    assert str(err.value).splitlines()[0] == ("estimator 'no_eps' returned 8 non-finite advantages on the probe groups "
                                              "all wrong, all right (G = 4, default hyperparameters); advantages must "
                                              "be finite")  # (JAX adds lines about its traceback below the message)


def test_a_non_finite_advantage_of_a_users_estimator_in_a_run_is_warned_and_a_finite_one_is_not(user_estimator):
    """Finite on the probe (default epsilon), NaN with the run's ``std_eps = 0``: flagged from the compiled program."""
    import jax.numpy as jnp

    user_estimator("nan_without_eps", lambda rewards, *, hp, **kw: jnp.where(hp.std_eps == 0, jnp.nan, rewards - 0.5))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert jnp.isfinite(_adv("nan_without_eps", REWARDS, std_eps=1e-8)).all()
    with pytest.warns(RuntimeWarning, match=r"estimator 'nan_without_eps' returned 8 non-finite advantages of 8 in "
                                            r"one batch"):
        adv = _adv("nan_without_eps", REWARDS, std_eps=0.0)
        adv.block_until_ready()
    assert jnp.isnan(adv).all()


def test_an_estimator_and_a_ratio_registered_in_the_batch_form_read_the_named_batch(user_estimator):
    """``batch=True``: one argument, the named batch; the same numbers as the positional built-ins they restate."""
    import jax.numpy as jnp
    import numpy as np

    import tabsim as ts
    from tabsim.sim import algos

    user_estimator("centred_b", lambda b: b.rewards - b.rewards.mean(-1, keepdims=True), batch=True)
    algos.register_ratio("token_b", batch=True)(lambda b: (b.logp - b.logp_old) * b.mask)
    try:
        rng = np.random.default_rng(0)
        logq = jnp.asarray(np.log(rng.dirichlet(np.ones(3), size=(2, 4, 2))))
        tokens = jnp.asarray(rng.integers(0, 3, (2, 4, 2)))
        logp_old = jnp.asarray(rng.normal(-1.0, 0.3, (2, 4, 2)))
        r, mask, hp = jnp.asarray(REWARDS), jnp.ones((2, 4, 2)), ts.Hyper()
        kw = dict(lengths=jnp.full((2, 4), 2), valid=jnp.ones(2), hp=hp)
        np.testing.assert_array_equal(algos.advantages(algos.AlgoSpec(estimator="centred_b"), r, **kw),
                                      algos.advantages(algos.AlgoSpec(estimator="dr_grpo"), r, **kw))
        adv = algos.advantages(algos.AlgoSpec(estimator="dr_grpo"), r, **kw)
        losses = [algos.policy_loss(algos.AlgoSpec(ratio=name, surrogate="clip"), logq, tokens, mask, adv, logp_old,
                                    logq, hp)[0] for name in ("token_b", "token")]
        np.testing.assert_array_equal(losses[0], losses[1])
    finally:
        algos.RATIOS.unregister("token_b")
