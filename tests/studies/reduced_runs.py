"""The reduced claim studies run in two commands, one per task, split so that the suite's two worker processes
(``--dist loadfile``: a test file per worker) share them: the bandit studies in tests/studies/test_claims.py, the
tree studies in tests/studies/test_claims_reduced_tree.py. Studies whose static cells coincide share compiled
programs only within a process, and a bandit program never serves a tree study, so the split loses no sharing.
(Imported by those tests; not a test module.)"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
from click.testing import CliRunner

from tabsim.cli import main
from tabsim.prereg import claims
from tabsim.prereg.schema import read_document

ROOT = Path(__file__).resolve().parents[2] / "preregistration" / "claims"


def on_tree(claim) -> bool:
    """Whether the claim study's plan trains on the tree task (otherwise the bandit)."""
    config = read_document(claim.plan_path)["design"].get("config") or {}
    return (config.get("task") or {}).get("env", "bandit") == "tree"


def reduced_ids(tree: bool) -> list[str]:
    """The ids of the claim studies on the tree (``tree``) or on the bandit, in the catalogue's order."""
    return [c.id for c in claims.load_claims(ROOT) if on_tree(c) == tree]


def run_reduced(out: Path, ids: list[str]) -> None:
    """`tabsim claims run --quick IDS` in one command: a verdict, a summary row and a figure each."""
    assert ids
    r = CliRunner().invoke(main, ["claims", "--root", str(ROOT), "run", *ids, "--quick", "-q", "--out", str(out)])
    assert r.exit_code == 0, r.output
    table = pd.read_csv(out / "summary.csv")
    assert table["claim"].str.split(":").str[0].tolist() == ids
    assert set(table["verdict"]) <= set(claims.CLAIM_VERDICTS) and set(table["run"]) == {"reduced"}
    for c in claims.load_claims(ROOT, ids):
        assert (out / f"{c.id}.png").stat().st_size > 0
        assert (out / c.id / "run" / "status.json").is_file()
        # one interval per region of the claim, as the plan's hypotheses give them
        row = table[table["claim"].str.startswith(c.id + ":")].iloc[0]
        assert row["tabsim_estimate"].count("[") == len(c.bearing)
