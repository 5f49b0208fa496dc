"""The registry every pluggable kind is: names kept in order, tabsim's own names refused, a user's replaced and
counted, an unknown one named."""
from __future__ import annotations

import pytest

from tabsim.base.registry import Registry, UnknownName


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
    reg = _fruit()  # strings: defined in no module of the package, so a user's
    assert reg.version("apple") == 1
    assert reg.register("apple", sweet=False)("GREEN") == "GREEN"
    assert reg["apple"] == "GREEN" and reg.meta("apple") == {"sweet": False} and reg.version("apple") == 2
    assert reg.names() == ("pear", "apple", "fig")  # replaced in place
    own = Registry("tool", own="builtins")
    own.register("size")(len)
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
        algos.ESTIMATORS.pop("rescaled_grpo", None)


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
        "cispo", "sapo", "importance", "reinforce"}
