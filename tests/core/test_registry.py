"""The registry every pluggable kind is: names kept in order, a taken name refused, an unknown one named."""
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


def test_a_taken_name_is_refused_and_the_first_entry_kept():
    reg = _fruit()
    with pytest.raises(ValueError, match=r"fruit 'apple' is already registered .*taken: pear, apple, fig"):
        reg.register("apple")
    assert reg["apple"] == "APPLE" and reg.meta("apple") == {"sweet": True}
    with pytest.raises(ValueError, match="non-empty string"):
        reg.register("")


def test_an_unknown_name_is_a_key_error_and_a_value_error_naming_kind_and_allowed_names():
    reg = _fruit()
    with pytest.raises(UnknownName) as err:
        reg["aple"]
    assert str(err.value) == "unknown fruit 'aple' (did you mean `apple`?); allowed: apple, fig, pear"
    assert isinstance(err.value, KeyError) and isinstance(err.value, ValueError)
    with pytest.raises(KeyError, match="allowed: apple, fig, pear"):
        reg.meta("plum")
    assert reg.get("plum") is None and "plum" not in reg


def test_every_engine_registry_refuses_a_taken_name_and_names_an_unknown_one():
    from tabsim.sim import algos
    from tabsim.sim.envs import ENVS, register_env

    regs = {"estimator": (algos.ESTIMATORS, algos.register_estimator), "ratio": (algos.RATIOS, algos.register_ratio),
            "surrogate": (algos.SURROGATES, algos.register_surrogate),
            "aggregation": (algos.AGGREGATIONS, algos.register_aggregation),
            "kl": (algos.KL_ESTIMATORS, algos.register_kl), "env": (ENVS, register_env)}
    for kind, (reg, register) in regs.items():
        first, before = next(iter(reg)), dict(reg)
        with pytest.raises(ValueError, match=f"{kind} '{first}' is already registered"):
            register(first)(type("Other", (), {}))
        assert dict(reg) == before, kind
        with pytest.raises(KeyError, match=f"unknown {kind} 'nope'; allowed: {', '.join(sorted(reg))}$"):
            reg["nope"]
    assert ENVS["bandit"].name == "bandit"


def test_the_clipped_keyword_of_a_surrogate_is_kept():
    from tabsim.sim import algos

    assert {n for n in algos.SURROGATES if not algos.SURROGATES.meta(n)["clipped"]} == {
        "cispo", "sapo", "importance", "reinforce"}
