"""The rollout allocation (tabsim.sim.allocation): Knapsack RL's budgets against a NumPy transcription of the
authors' released allocator (liziniu/KnapsackRL, exploration_utils.sampling_budget_by_knapsack and solve_by_dp) and
hand values, the per-prompt estimate (their rl_dataset.update_sample_state), the advantages over the allotted answers,
one engine step, and the config's refusals."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tabsim.base import choices
from tabsim.config import ConfigError, resolve
from tabsim.sim import allocation as A
from tabsim.sim.algos.advantages import ESTIMATORS
from tabsim.sim.params import Hyper

MIN_N, ALPHA = 2, 0.9  # the authors' script: min_n = negative_n = positive_n = 2; the cost's confidence 0.9


def value(N, p):
    return (1 - p ** N - (1 - p) ** N) * p * (1 - p) ** 2


def numpy_reference(p, known, n: int, most: int):
    """The authors' procedure in NumPy float64 (a transcription for tests; no JAX): the same rules as
    :func:`knapsack`, with the dynamic programme's exact-weight table and backtracking."""
    p = np.where(known, np.asarray(p, np.float64), 0.0)
    B = len(p)
    eff = known & (p > 0) & (p < 1)
    zero = p == 0
    base = np.where(known, MIN_N, n)
    rest = B * n - base.sum()

    def share(total, chosen):
        out = np.zeros(B, int)
        ids = np.flatnonzero(chosen)
        if total <= 0 or len(ids) == 0:
            return out
        out[ids] = total // len(ids)
        out[ids[: total % len(ids)]] += 1
        return out

    if not eff.any() and rest > 0:
        return base + share(rest, zero) if zero.any() else np.full(B, n)
    estimate = sum(int(min(most, np.log(1 - ALPHA) / np.log(max(q, 1 - q)))) for q in p[eff])
    takers = zero if zero.any() else ~eff
    alloc = base.copy()
    if estimate < rest and takers.any():
        alloc += share(rest - estimate, takers)
        rest = estimate
    ids = np.flatnonzero(eff)
    K = most - MIN_N
    dp = np.full((len(ids) + 1, max(rest, 0) + 1), -np.inf)
    dp[0, 0] = 0.0
    pick = np.zeros(dp.shape, int)
    for i, x in enumerate(ids, 1):
        for w in range(dp.shape[1]):
            dp[i, w], pick[i, w] = dp[i - 1, w], 0
            for k in range(1, min(K, w) + 1):
                v = dp[i - 1, w - k] + value(k + MIN_N, p[x])
                if v > dp[i, w]:
                    dp[i, w], pick[i, w] = v, k
    used = max([w for w in range(dp.shape[1]) if np.isfinite(dp[-1, w])] or [0])
    w = used
    for i in range(len(ids), 0, -1):
        alloc[ids[i - 1]] += pick[i, w]
        w -= pick[i, w]
    return alloc + share(rest - used, eff)


_knapsack = jax.jit(A.knapsack, static_argnums=(2, 3))  # one compilation per (B, n, most)


def budgets(p, known, n, most):
    return np.asarray(_knapsack(jnp.asarray(p, jnp.float32), jnp.asarray(known), n, most))


# -- the allocator --------------------------------------------------------------------------------------------------
def test_hand_values():
    # two known prompts, p 0.5 and 0.9, n 4, at most 6: base 2 + 2, rest 4; costs floor(3.32) + min(6, 21.9) = 9 >= 4
    # (no fallback); the programme gives k = 4 to the first (value(6, .5) = 0.12109 against 0.11962 for (3, 1) and
    # 0.11247 for (2, 2)): a k of 0 counts 0 in their table, not value(2, p)
    assert budgets([0.5, 0.9], [True, True], 4, 6).tolist() == [6, 2]
    # p 0.5 and 0 (known), n 8, at most 16: rest 12 > cost 3, so the excess 9 goes to the p = 0 prompt, 3 to the first
    assert budgets([0.5, 0.0], [True, True], 8, 16).tolist() == [5, 11]
    # nothing of 0 < p < 1: an unknown prompt gets n and counts as p = 0, so it takes the rest 16 - 10
    assert budgets([1.0, 0.3], [True, False], 8, 16).tolist() == [2, 14]
    # every prompt known and p = 1: n each
    assert budgets([1.0, 1.0], [True, True], 8, 16).tolist() == [8, 8]


def test_value_function():
    assert float(A.value(3, 0.5)) == pytest.approx(0.09375)
    assert float(A.value(4, 0.9)) == pytest.approx(0.009 * (1 - 0.9 ** 4 - 0.1 ** 4))


@pytest.mark.parametrize("seed", range(6))
def test_matches_the_authors_procedure(seed):
    """Random batches of distinct estimates on a grid (no near-ties between float32 and float64), some unknown,
    some 0 or 1: the same budgets, and the batch's total is B n where no spread exceeds the cap."""
    rng = np.random.default_rng(seed)
    B, n, most = 8, 6, 24
    p = rng.choice(np.round(np.linspace(0.03, 0.97, 40), 4), B, replace=False)
    p[rng.random(B) < 0.2] = 0.0
    p[rng.random(B) < 0.15] = 1.0
    known = rng.random(B) < 0.85
    ref = numpy_reference(p, known, n, most)
    got = budgets(p, known, n, most)
    assert got.tolist() == ref.tolist(), (p, known)
    assert got.sum() == B * n and got.min() >= MIN_N


# -- the estimate ---------------------------------------------------------------------------------------------------
def test_estimate_reads_the_last_sixteen_or_the_last_large_group():
    class Env:
        n_prompts = 1

    class Algo:
        allocation, allocation_n = "knapsack", 8

    s = A.init(Algo, Env)
    idx = jnp.asarray([0])
    record = jax.jit(A.record)  # compiled: run eagerly, each operation is compiled on its own
    s = record(s, idx, jnp.asarray([[1.0] * 8 + [0.0] * 24]), jnp.asarray([8]))  # 8 allotted, all right
    assert float(s.rate[0]) == 1.0 and int(s.seen[0]) == 8 and int(s.held[0]) == 8
    s = record(s, idx, jnp.asarray([[0.0] * 12 + [1.0] * 20]), jnp.asarray([12]))  # 12 allotted, all wrong
    assert float(s.rate[0]) == pytest.approx(4 / 16) and int(s.seen[0]) == 20  # the window: 4 rights, 12 wrongs
    assert np.asarray(s.window[0]).tolist() == [1.0] * 4 + [0.0] * 12
    s = record(s, idx, jnp.asarray([[1.0] * 5 + [0.0] * 15 + [1.0] * 12]), jnp.asarray([20]))  # 20 >= 16 allotted
    assert float(s.rate[0]) == pytest.approx(0.25) and int(s.held[0]) == 16  # the group's own share, 5 / 20
    # advance reads the answers allotted from the state before the step: known (40 seen) at p = 0.25, alone in its
    # batch (B n = 8): base 2, cost floor(log 0.1 / log 0.75) = 8 >= the rest 6, so the programme gives it all 8;
    # the window then holds the last 8 wrongs of the 20 and the 8 new rights
    s2 = jax.jit(A.advance, static_argnums=(0, 4))(Algo, s, idx, jnp.asarray([[1.0] * 32]), 32)
    assert int(s2.seen[0]) == 48 and float(s2.rate[0]) == pytest.approx(8 / 16)


# -- the advantages -------------------------------------------------------------------------------------------------
def test_advantages_over_the_allotted_answers():
    r = jnp.asarray([[1.0, 0.0, 0.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]])
    n = jnp.asarray([3, 2])
    hp = Hyper(std_ddof=1.0, std_eps=1e-6)
    adv, flat = A.advantages("grpo", r, n, hp)
    ref = np.asarray(ESTIMATORS["grpo"](r[:1, :3], lengths=None, valid=None, hp=hp))
    np.testing.assert_allclose(np.asarray(adv[0, :3]), ref[0], rtol=1e-6)
    assert np.asarray(adv[0, 3:]).tolist() == [0.0] * 3  # unallotted answers
    assert np.asarray(adv[1]).tolist() == [0.0] * 6 and np.asarray(flat).tolist() == [0.0, 1.0]  # [1, 1]: flat
    # by hand: mean 1/3, Bessel std sqrt(1/3)
    assert float(adv[0, 0]) == pytest.approx((2 / 3) / (np.sqrt(1 / 3) + 1e-6), rel=1e-6)
    centred, _ = A.advantages("dr_grpo", r, n, hp)
    np.testing.assert_allclose(np.asarray(centred[0, :3]), [2 / 3, -1 / 3, -1 / 3], rtol=1e-6)


# -- the effective-gradient ratio -----------------------------------------------------------------------------------
def test_effective_ratio_by_hand():
    class Env:
        metrics = ("pass1", "effective_ratio")

    r = jnp.asarray([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 1.0, 0.0]])
    # allotted 2, 4, 2: group 0's [1, 0] is mixed, group 1 all right, group 2's [0, 0] all wrong: 2 / 8
    assert float(A.useful(Env, r, jnp.asarray([2, 4, 2]))["effective_ratio"]) == pytest.approx(2 / 8)
    # every answer (no allocation): groups 0 and 2 mixed, 8 of 12 answers
    assert float(A.useful(Env, r, None)["effective_ratio"]) == pytest.approx(8 / 12)
    assert A.diag_keys(Env) == ("effective_ratio",)

    class Unnamed:
        metrics = ("pass1",)

    assert A.useful(Unnamed, r, None) == {} and A.diag_keys(Unnamed) == ()
    assert "effective_ratio" in choices.OPTIONAL_METRICS and "effective_ratio" in choices.UPDATE_METRICS


# -- the engine and the config --------------------------------------------------------------------------------------
KNAP = {"algo": {"allocation": "knapsack", "allocation_max": 6, "filter": True},
        "train": {"steps": 1, "batch_size": 2, "group_size": 3, "seeds": 1, "metrics": ["pass1"]},
        "task": {"n_prompts": 2, "n_answers": 4, "n_correct": 1}, "arms": {"arms": ["frozen", "true"]}}


@pytest.mark.heavy
def test_one_engine_step_masks_the_unallotted_answers():
    """A first step (every prompt unknown: n = 3 each of the 6-wide groups) moves the policy, and the state's
    estimates count the 3 allotted answers of each prompt."""
    from tests.core.eager_step import eager_step

    cfg = {**KNAP, "train": {**KNAP["train"], "metrics": ["pass1", "effective_ratio"]}}
    env, hp, task, state, after, diag = eager_step(resolve(cfg))
    assert np.asarray(after.allocation.seen).tolist() == [3, 3]
    assert float(diag["effective_ratio"]) in (0.0, 0.5, 1.0)
    assert np.isfinite(np.asarray(after.logits)).all()
    assert float(diag["kept_frac"]) in (0.0, 0.5, 1.0)


@pytest.mark.parametrize("change,field", [
    ({"algo": {"allocation_max": None}}, "algo.allocation_max"),
    ({"algo": {"allocation_max": 2}}, "algo.allocation_max"),
    ({"algo": {"estimator": "rloo"}}, "algo.estimator"),
    ({"algo": {"aggregation": "group-sum"}}, "algo.aggregation"),
    ({"train": {"replacement": True}}, "train.replacement"),
    ({"algo": {"allocation": "none"}}, "algo.allocation_max"),
])
def test_refusals(change, field):
    cfg = {k: {**v, **change.get(k, {})} for k, v in KNAP.items()}
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        resolve(cfg)


def test_registered():
    assert tuple(A.ALLOCATIONS) == choices.ALLOCATIONS == ("knapsack", "uniform")
    assert all("no_expected" in A.ALLOCATIONS.meta(name) for name in A.ALLOCATIONS)
    assert np.asarray(A.uniform(jnp.asarray([0.0, 0.5, 1.0]), jnp.asarray([True] * 3), 8, 64)).tolist() == [8, 8, 8]
