"""Write tests/stats/rliable_reference.json: rliable 1.2.0's statistics on three fixed score sets.

Run once, in a virtualenv of its own where rliable imports (it does not under pandas 3):

    python -m venv /tmp/rly && /tmp/rly/bin/pip install rliable==1.2.0 "pandas<3" "numpy<2.3"
    /tmp/rly/bin/python experiments/rliable_reference/make.py

The file holds the scores themselves (so the test needs neither this script nor rliable), rliable's
point estimates (compared exactly) and its percentile intervals and profile bands at 20,000 resamples
(compared within bootstrap noise). tests/stats/test_rliable_reference.py reads it.
"""
from __future__ import annotations

import json
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
from rliable import library as rly
from rliable import metrics

OUT = Path(__file__).resolve().parents[2] / "tests" / "stats" / "rliable_reference.json"
REPS = 20_000


def cases() -> dict:
    rng = np.random.default_rng(20261207)
    return {
        "8 runs x 5 conditions": (rng.normal(0.5, 0.2, (8, 5)), rng.normal(0.4, 0.2, (8, 5)), 1.0),
        "6 and 4 runs x 3 conditions, ties": (rng.normal(0.6, 0.15, (6, 3)).round(1),
                                              rng.normal(0.55, 0.15, (4, 3)).round(1), 0.8),
        "10 runs x 1 condition": (rng.beta(5, 2, (10, 1)), rng.beta(4, 3, (10, 1)), 1.0),
    }


def stats(x, y, gamma) -> dict:
    funcs = {"mean": metrics.aggregate_mean, "median": metrics.aggregate_median, "iqm": metrics.aggregate_iqm,
             "optimality_gap": lambda s: metrics.aggregate_optimality_gap(s, gamma)}
    taus = np.linspace(min(x.min(), y.min()), max(x.max(), y.max()), 11)
    out = {"x": x.tolist(), "y": y.tolist(), "threshold": gamma, "taus": taus.tolist(), "reps": REPS}
    for name, fn in funcs.items():
        point, ci = rly.get_interval_estimates({"x": x}, lambda s, fn=fn: np.array([fn(s)]), reps=REPS,
                                               random_state=np.random.RandomState(1))
        out[name] = {"estimate": float(point["x"][0]), "percentile": ci["x"][:, 0].tolist()}
        _, ci = rly.get_interval_estimates({"x": x}, lambda s, fn=fn: np.array([fn(s)]), reps=REPS,
                                           task_bootstrap=True, random_state=np.random.RandomState(2))
        out[name]["percentile_conditions"] = ci["x"][:, 0].tolist()
    point, ci = rly.get_interval_estimates({"x,y": (x, y)}, metrics.probability_of_improvement, reps=REPS,
                                           random_state=np.random.RandomState(3))
    out["probability_of_improvement"] = {"estimate": float(np.asarray(point["x,y"]).ravel()[0]),
                                         "percentile": np.asarray(ci["x,y"]).ravel().tolist()}
    prof, bands = rly.create_performance_profile({"x": x}, taus, reps=REPS)
    out["profile"] = {"estimate": prof["x"].tolist(), "percentile": bands["x"].tolist()}
    return out


def main() -> None:
    ref = {"rliable": metadata.version("rliable"), "numpy": np.__version__, "python": sys.version.split()[0],
           "script": "experiments/rliable_reference/make.py",
           "cases": {name: stats(x, y, g) for name, (x, y, g) in cases().items()}}
    OUT.write_text(json.dumps(ref, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
