"""Audits of published results: a paper's table in, the partition with uncertainty and bounds out.

* :mod:`tabsim.audit.schema` -- the YAML / CSV input format and its validation (:func:`load_entries`).
* :mod:`tabsim.audit.estimate` -- binomial variances, Wald and Fieller intervals of the terms.
* :mod:`tabsim.audit.calibrate` -- simulator calibration that bounds the terms of missing arms.
* :mod:`tabsim.audit.core` -- :func:`audit`: one row per model x benchmark, with the verdict.
* :mod:`tabsim.audit.report` -- CSVs, report, figure, provenance, written all-or-nothing.

The ``tabsim audit`` command is :mod:`tabsim.cli.audit`.

    from tabsim.audit import load_entries, audit
    res = audit(load_entries(["experiments/audits/spurious_rewards.yaml"]))
    res.audit[["model", "d_null", "d_elicit", "d_rd", "verdict"]]
"""
from tabsim._lazy import lazy_exports

# imported on first use: `tabsim audit --help` loads only tabsim.cli.audit (the command's home)
_EXPORTS = {"FAMILY_CONFIGS": "calibrate", "CalibrationGrid": "calibrate", "AuditResult": "core", "audit": "core",
            "audit_entry": "core", "TERMS": "estimate", "binomial_var": "estimate", "fieller": "estimate",
            "term_intervals": "estimate", "write_outputs": "report", "ARMS": "schema", "AuditInputError": "schema",
            "Entry": "schema", "load_entries": "schema"}

__all__ = ["ARMS", "FAMILY_CONFIGS", "TERMS", "AuditInputError", "AuditResult", "CalibrationGrid", "Entry",
           "audit", "audit_entry", "binomial_var", "fieller", "load_entries", "term_intervals",
           "write_outputs"]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
