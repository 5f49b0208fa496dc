"""The factorial runner: one compilation per static shape, frames equal to ``ts.run``, exact contrasts."""
import itertools
import pickle

import numpy as np
import pandas as pd
import pytest

import tabsim as ts
from tabsim.runtime import programs
from tabsim.studies import factorial as F
from tabsim.config import ConfigError
from tabsim.runtime.executables import count
from tabsim.stats import fit_factorial, seed_partition

# Small but complete: every arm, the paper's update, a few steps.
BASE = {"preset": "paper", "task": {"n_prompts": 8}, "train": {"steps": 10, "batch_size": 4, "eval_every": 5}}
EVAL_METRICS = ("pass1", "entropy", "kl_ref", "format_mass", "mode_correct")
# float32 engine: the units program and ts.run batch the same float32 arithmetic differently (vmap
# over units vs over conditions x seeds); differences stay at a few float32 ulps of values <= 1.
ATOL = 1e-5


@pytest.fixture(scope="module")
def sweep_result():
    return F.run_factorial(BASE, {"filter": {"algo.filter": [1, 0]}, "prior": {"task.prior_strength": [0.8, 0.35]}},
                           seeds=3, progress=False)


def test_frame_matches_direct_run(sweep_result):
    direct = ts.run(BASE, train={"seeds": 3}, sweep={"filter": [1.0, 0.0], "prior_strength": [0.8, 0.35]}).frame
    mine = sweep_result.frame
    assert list(mine.columns[:5]) == ["filter", "prior", "seed", "arm", "step"]
    assert len(mine) == len(direct) == 2 * 2 * 3 * 4 * 3  # cells x seeds x arms x eval points
    m = mine.merge(direct, left_on=["filter", "prior", "seed", "arm", "step"],
                   right_on=["filter", "prior_strength", "seed", "arm", "step"], suffixes=("", "_direct"))
    assert len(m) == len(mine)
    for c in EVAL_METRICS:
        np.testing.assert_allclose(m[c], m[f"{c}_direct"], atol=ATOL, rtol=0, err_msg=c)
    trained = m["arm"] != "frozen"
    for c in ("reward_mean", "kept_frac", "clip_frac"):
        np.testing.assert_allclose(m.loc[trained, c], m.loc[trained, f"{c}_direct"], atol=ATOL, rtol=0, equal_nan=True)
    # FROZEN is evaluated, not simulated: its diagnostics are NaN (it never sees a reward)
    assert m.loc[~trained, "reward_mean"].isna().all()


def test_save_and_load_round_trip(sweep_result, tmp_path):
    sweep_result.save(tmp_path, fmt="csv")
    back = F.DesignResult.load(tmp_path)
    assert [f.name for f in back.factors] == ["filter", "prior"] and back.factors[0].field == "algo.filter"
    np.testing.assert_allclose(back.frame["pass1"], sweep_result.frame["pass1"], rtol=1e-12)
    assert back.provenance["design"] == "factorial"


def test_partition_identity_on_runner_output(sweep_result):
    sp = seed_partition(sweep_result.frame, by=["filter", "prior"])
    assert len(sp) == 4 * 3
    gap = sp["d_total"] - (sp["d_null"] + sp["d_elicit"] + sp["d_rd"])
    assert np.abs(gap).max() < 1e-12  # float64 sums of the same float32 values
    assert np.abs(sp["d_naive"] - (sp["d_elicit"] + sp["d_rd"])).max() < 1e-12
    # the frozen arm never moves: its pass@1 is the step-0 pass@1 of every arm of the seed
    fr = sweep_result.frame
    step0 = fr[fr["step"] == 0].groupby(["filter", "prior", "seed"])["pass1"].agg(["min", "max"])
    assert (step0["max"] - step0["min"]).abs().max() == 0.0


def test_ols_effects_equal_hand_contrasts():
    res = F.run_factorial(BASE, {"reward": {"arm": ["true", "majority"]}, "filter": {"algo.filter": [1, 0]},
                                 "prior": {"task.prior_strength": [0.8, 0.35]}}, seeds=3, progress=False)
    fin = res.final()
    assert set(fin["reward"]) == {"true", "majority"} and (fin["reward"] == fin["arm"].astype(str)).all()
    fit = fit_factorial(fin, factors=["reward", "filter", "prior"],
                        levels={"reward": ("true", "majority"), "filter": (1, 0), "prior": (0.8, 0.35)})
    # effect coding by hand: first level +1, second -1; in a balanced 2^3 design every
    # coefficient is mean(y * x_T) = (mean(y | x_T=+1) - mean(y | x_T=-1)) / 2.
    x = {"A": np.where(fin["reward"] == "true", 1.0, -1.0), "B": np.where(fin["filter"] == 1, 1.0, -1.0),
         "C": np.where(np.isclose(fin["prior"], 0.8), 1.0, -1.0)}
    y = fin["pass1"].to_numpy()
    coefs = fit.coefficients.set_index("term")["estimate"]
    for r in (1, 2, 3):
        for letters in itertools.combinations("ABC", r):
            term = "".join(letters)
            code = np.prod([x[t] for t in letters], axis=0)
            hand = (y[code > 0].mean() - y[code < 0].mean()) / 2.0
            assert coefs[term] == pytest.approx(hand, abs=1e-12), term
    assert coefs["intercept"] == pytest.approx(y.mean(), abs=1e-12)


def test_one_compilation_per_static_shape():
    base = {**BASE, "task": {"n_prompts": 6}}  # a static shape no other test uses
    factors = {"G": {"train.group_size": [4, 6]}, "prior": {"prior_strength": [0.3, 0.7]},
               "reward": {"arm": ["true", "majority"]}}
    before = set(programs._CACHE)  # the one program cache: engine programs and the units' programs that wrap them
    res = F.run_factorial(base, factors, seeds=5, units_per_chunk=4, progress=False)  # 10 units -> 3 chunks each
    new = set(programs._CACHE) - before
    new_api, new_prog = {k for k in new if k[0] != "units"}, {k[1:] for k in new if k[0] == "units"}
    assert len(new_api) == 2 and new_prog == new_api  # one engine program per static combination
    assert res.provenance["n_chunks_job"] == 6 and res.provenance["n_programs_job"] == 2
    assert all(count(("units", k)) == 1 for k in new_prog)  # one compilation each
    # other traced levels, other seeds, another chunking of the same size: no new compilation
    F.run_factorial(base, {**factors, "prior": {"prior_strength": [0.5]}}, seeds=[11, 12, 13], units_per_chunk=4,
                    progress=False)
    assert set(programs._CACHE) - before == new
    assert all(count(("units", k)) == 1 for k in new_prog)
    # a static level's rows equal a direct run of that static configuration
    direct = ts.run(base, train={"group_size": 6, "seeds": 5}, sweep={"prior_strength": [0.3, 0.7]}).frame
    direct = direct[direct["arm"].isin(["true", "majority"])]
    mine = res.frame[res.frame["G"] == 6]
    m = mine.merge(direct, left_on=["prior", "seed", "arm", "step"], right_on=["prior_strength", "seed", "arm", "step"],
                   suffixes=("", "_direct"))
    assert len(m) == len(mine) == len(direct)
    np.testing.assert_allclose(m["pass1"], m["pass1_direct"], atol=ATOL, rtol=0)


class PicklingExecutor:
    """Stands in for a distributed engine: chunks and results cross a pickle boundary."""

    def __init__(self):
        self.n = 0

    def map(self, fn, chunks):
        for c in chunks:
            self.n += 1
            yield pickle.loads(pickle.dumps(fn(pickle.loads(pickle.dumps(c)))))


def test_executor_runs_picklable_chunks(sweep_result):
    ex = PicklingExecutor()
    res = F.run_factorial(BASE, {"filter": {"algo.filter": [1, 0]}, "prior": {"task.prior_strength": [0.8, 0.35]}},
                          seeds=3, executor=ex, units_per_chunk=sweep_result.provenance["n_units_job"] // 3 or 1,
                          progress=False)
    assert ex.n == res.provenance["n_chunks_job"] >= 3
    pd.testing.assert_frame_equal(res.frame, sweep_result.frame, check_exact=False, atol=ATOL, rtol=0)


def test_units_shared_between_designs_run_once():
    d1 = F.make_design(BASE, {"prior": {"prior_strength": [0.8, 0.35]}}, seeds=3, name="a")
    d2 = F.make_design(BASE, {"prior": {"prior_strength": [0.35, 0.5]}}, seeds=[1, 2, 3, 4], name="b")
    work, index = F.plan_units([d1, d2], units_per_chunk=64)
    assert len(work.seeds) == 2 * 3 + 4 + 2 * 1  # (0.35, seeds 1, 2) are shared
    assert len(work.configs) == 1 and len(index) == 2


@pytest.mark.parametrize("factors, exc, words", [
    ({"x": {"task.nope": [1, 2]}}, ValueError, ["task.nope", "allowed"]),
    ({"x": {"prior_strength": [0.5, 1.5]}}, ConfigError, ["sweep.prior_strength", "1.5"]),
    ({"x": {"prior_strength": ["high", 0.5]}}, ValueError, ["numeric", "high"]),
    ({"seed": {"prior_strength": [0.5]}}, ValueError, ["reserved", "seed"]),
    ({"x": {"arm": ["true", "oracle"]}}, ValueError, ["oracle", "allowed"]),
    ({"x": {"algo.estimator": ["grpo", "nope"]}}, ConfigError, ["estimator", "nope"]),
    ({"x": {"train.seeds": [2, 4]}}, ValueError, ["train.seeds", "seeds="]),
    ({"x": {"prior_strength": [0.5]}, "y": {"task.prior_strength": [0.6]}}, ValueError, ["same field"]),
    ({"x": {"prior_strength": []}}, ValueError, ["non-empty"]),
    ({"x": {"lr": [0.1, 0.1]}}, ValueError, ["repeat"]),
    ({"x": {"heterogeneity": [1.0, 50.0]}}, ConfigError, ["sweep.heterogeneity", "task.heterogeneity"]),
])
def test_bad_factors_are_refused_with_the_field_named(factors, exc, words):
    with pytest.raises(exc) as err:
        F.make_design(BASE, factors, seeds=2)
    for w in words:
        assert w in str(err.value), (w, str(err.value))


def test_bad_seeds_are_refused():
    with pytest.raises(ValueError, match="seeds"):
        F.make_design(BASE, {}, seeds=0)
    with pytest.raises(ValueError, match="distinct"):
        F.make_design(BASE, {}, seeds=[1, 1])


def test_traced_entropy_coefficient_is_compiled_as_in_a_sweep():
    """A factor on ent_coef (base 0) compiles the entropy term, as ``ts.run`` does for a swept ent_coef."""
    base = {"preset": "grpo", "task": {"n_prompts": 8}, "train": {"steps": 10, "batch_size": 4, "seeds": 2}}
    res = ts.run_factorial(base, {"ent_coef": {"ent_coef": [0.0, 0.5]}}, progress=False)
    direct = ts.run({**base, "sweep": {"ent_coef": [0.0, 0.5]}}, progress=False)
    got = res.final().groupby(["ent_coef", "arm"], observed=True)["entropy"].mean()
    want = direct.final().groupby(["ent_coef", "arm"], observed=True)["entropy"].mean()
    np.testing.assert_allclose(got.to_numpy(), want.to_numpy(), atol=ATOL)
    assert got[(0.5, "true")] > got[(0.0, "true")] + 1e-4
