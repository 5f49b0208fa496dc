"""Audits of published results: a paper's table in, the partition with uncertainty and bounds out.

* :mod:`tabsim.audit.schema` -- the YAML / CSV input format and its validation (:func:`load_entries`).
* :mod:`tabsim.audit.estimate` -- binomial variances, Wald and Fieller intervals of the terms.
* :mod:`tabsim.audit.calibrate` -- simulator calibration that bounds the terms of missing arms.
* :mod:`tabsim.audit.core` -- :func:`audit`: one row per model x benchmark, with the verdict.
* :mod:`tabsim.audit.report` -- CSVs, report, figure, provenance, written all-or-nothing.

    from tabsim.audit import load_entries, audit
    res = audit(load_entries(["experiments/audits/spurious_rewards.yaml"]))
    res.audit[["model", "d_null", "d_elicit", "d_rd", "verdict"]]
"""
from tabsim.audit.calibrate import FAMILY_CONFIGS, CalibrationGrid
from tabsim.audit.cli import command
from tabsim.audit.core import AuditResult, audit, audit_entry
from tabsim.audit.estimate import TERMS, binomial_var, fieller, term_intervals
from tabsim.audit.report import write_outputs
from tabsim.audit.schema import ARMS, AuditInputError, Entry, load_entries

__all__ = ["ARMS", "FAMILY_CONFIGS", "TERMS", "AuditInputError", "AuditResult", "CalibrationGrid", "Entry",
           "audit", "audit_entry", "binomial_var", "command", "fieller", "load_entries", "term_intervals",
           "write_outputs"]
