"""The reduced versions of the claim studies on the tree task (`tabsim claims run --quick` with their ids); the
bandit ones run in tests/studies/test_claims.py, a file of their own so the suite's two workers share them."""
from __future__ import annotations

from reduced_runs import reduced_ids, run_reduced


def test_every_reduced_tree_study_runs(tmp_path):
    run_reduced(tmp_path, reduced_ids(tree=True))
