"""Published claims as pre-registered studies: the claim files, their runs, verdicts, summary and page."""
from tabsim.prereg.claims.catalog import Claim, Waiting, load_claim, load_claims, load_waiting
from tabsim.prereg.claims.execute import ClaimRun, expected_flow, quick_document, read_claim_run, run_claim
from tabsim.prereg.claims.page import TITLE, render_page, write_page
from tabsim.prereg.claims.summary import expected_beside, expected_estimates, summary_table, write_summary
from tabsim.prereg.claims.verdict import CLAIM_VERDICTS, DEPENDS, NOT_TESTABLE, ClaimVerdict, claim_verdict

__all__ = ["CLAIM_VERDICTS", "DEPENDS", "NOT_TESTABLE", "TITLE", "Claim", "ClaimRun", "ClaimVerdict", "Waiting",
           "claim_verdict", "expected_beside", "expected_estimates", "expected_flow", "load_claim", "load_claims",
           "load_waiting", "quick_document", "read_claim_run", "render_page", "run_claim", "summary_table",
           "write_page", "write_summary"]
