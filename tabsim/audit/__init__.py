"""Audits of published results: a paper's table in, the partition with uncertainty and bounds out.

* :mod:`tabsim.audit.schema` -- the YAML / CSV input files and their validation (:func:`load_entries`).
* :mod:`tabsim.audit.fields` -- the arms, the allowed field values and the :class:`Entry` record.
* :mod:`tabsim.audit.cells` -- one entry's cells read, converted to percent and checked across.
* :mod:`tabsim.audit.entry` -- one entry's fields, checked and converted to percent.
* :mod:`tabsim.audit.notation` -- cells in a paper's notation (Unicode minus, dashes, %, headers, scale).
* :mod:`tabsim.audit.benchmarks` -- known benchmarks and their item counts.
* :mod:`tabsim.audit.items` -- per-item results and their clustered variance.
* :mod:`tabsim.audit.estimate` -- binomial variances, Wald and Fieller intervals of the terms and shares.
* :mod:`tabsim.audit.calibrate` -- simulator calibration that bounds the terms of missing arms.
* :mod:`tabsim.audit.completions` -- model-free completions of missing arms, and the measured null range.
* :mod:`tabsim.audit.verdict` -- the three-term verdict (the reference rule is ``tabsim.stats``).
* :mod:`tabsim.audit.measured` -- the registry of published null-reward (random, format, incorrect) runs.
* :mod:`tabsim.audit.checks` -- format-repair notes and simulator bounds contradicted by measurements.
* :mod:`tabsim.audit.claims` -- what the notes state about a row's numbers, each bounded by its interval.
* :mod:`tabsim.audit.core` -- :func:`audit`: one row per model x benchmark x training set, with verdicts.
* :mod:`tabsim.audit.report`, :mod:`tabsim.audit.figure` -- CSVs, report, figure, provenance.

The ``tabsim audit`` command is :mod:`tabsim.cli.audit`.

    from tabsim.audit import load_entries, audit
    res = audit(load_entries(["experiments/audits/spurious_rewards.yaml"]))
    res.audit[["model", "d_null", "d_elicit", "d_rd", "verdict"]]
"""
from tabsim.base.lazy import lazy_exports

# imported on first use: `tabsim audit --help` loads only tabsim.cli.audit (the command's home)
_EXPORTS = {"FAMILY_CONFIGS": "calibrate", "CalibrationGrid": "calibrate", "AuditResult": "core", "audit": "core",
            "audit_entry": "core", "TERMS": "estimate", "binomial_var": "estimate", "fieller": "estimate",
            "term_intervals": "estimate", "write_outputs": "report", "ARMS": "schema", "AuditInputError": "schema",
            "Entry": "schema", "load_entries": "schema"}

__all__ = ["ARMS", "FAMILY_CONFIGS", "TERMS", "AuditInputError", "AuditResult", "CalibrationGrid", "Entry",
           "audit", "audit_entry", "binomial_var", "fieller", "load_entries", "term_intervals",
           "write_outputs"]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
