"""The grid behind the interactive crossover figure of the documentation site (docs/science.md).

    python experiments/crossover_grid.py            # rewrite docs/assets/crossover_grid.json
    python experiments/crossover_grid.py --check    # exit 1 if the file differs from a fresh computation

The site cannot run JAX, so its slider moves over values computed here: the four arms of the `paper`
preset trained with the expected-update dynamics (each step applies the exact expected update, so
one deterministic run per prior strength) on a grid of prior strengths, pass@1 every 10 steps. The
file records the configuration and the versions it came from. ``tests/docs/test_site.py`` recomputes
two of its prior strengths with ``ts.run`` and compares them with the file.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import jax
import numpy as np

import tabsim as ts
from tabsim.plotting import ARM_COLORS, TERM_COLORS

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "assets" / "crossover_grid.json"
PRIORS = [round(float(p), 3) for p in np.arange(0.15, 0.851, 0.025)]
ARMS = ["frozen", "random", "majority", "true"]
DECIMALS = 5


def config(priors=PRIORS) -> dict:
    """The run behind the grid (one compiled program: the prior strength is a traced value)."""
    return {"preset": "paper", "arms": {"arms": ARMS},
            "train": {"dynamics": "expected", "seeds": 1, "eval_every": 10},
            "sweep": {"prior_strength": list(priors)}}


def rows(priors=PRIORS) -> list[dict]:
    """One row per prior strength, arm and evaluated step: ``{"p_s", "arm", "step", "pass1"}``."""
    frame = ts.run(config(priors), progress=False).frame
    mean = frame.groupby(["prior_strength", "arm", "step"], observed=True)["pass1"].mean().reset_index()
    return [{"p_s": round(float(r.prior_strength), 3), "arm": str(r.arm), "step": int(r.step),
             "pass1": round(float(r.pass1), DECIMALS)} for r in mean.itertuples()]


def mode_switch(K: int = 8, k: int = 2, f: float = 0.2) -> float:
    """The prior strength above which a correct answer is the prior's mode (docs/science.md)."""
    return k * (1 + f * K) / (K - k + k * (1 + f * K))


def grid() -> dict:
    return {"description": "pass@1 of the four arms of the paper preset under the expected-update dynamics, "
                           "per prior strength and step (experiments/crossover_grid.py)",
            "config": config(), "tabsim": ts.__version__, "jax": jax.__version__,
            "mode_switch": round(mode_switch(), 4),
            "colors": {**{a: ARM_COLORS[a] for a in ARMS}, **{t: TERM_COLORS[t] for t in ("d_null", "d_elicit", "d_rd")}},
            "rows": rows()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the file instead of writing it")
    args = ap.parse_args(argv)
    new = grid()
    if args.check:
        old = json.loads(OUT.read_text())
        a = {(r["p_s"], r["arm"], r["step"]): r["pass1"] for r in old["rows"]}
        b = {(r["p_s"], r["arm"], r["step"]): r["pass1"] for r in new["rows"]}
        worst = max(abs(a[k] - b[k]) for k in b) if a.keys() == b.keys() else float("inf")
        print(f"largest difference: {worst:.2e}")
        return 0 if worst <= 1e-4 else 1
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(new, separators=(",", ":")) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}: {len(new['rows'])} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
