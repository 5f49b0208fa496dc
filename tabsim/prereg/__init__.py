"""Pre-registration you can verify: a plan file, a lock, a confirmatory run, a report against the plan.

    tabsim prereg keygen   --out ~/.tabsim/prereg.key                  # once: an Ed25519 key pair
    tabsim prereg validate preregistration/clipping_null/plan.yaml
    tabsim prereg lock     preregistration/clipping_null/plan.yaml --key ~/.tabsim/prereg.key  # before any result
    tabsim prereg run      preregistration/clipping_null/plan.yaml --out preregistration/clipping_null/results
    tabsim prereg report   preregistration/clipping_null/results

* :mod:`tabsim.prereg.errors` -- :class:`PreregError`.
* :mod:`tabsim.prereg.plan` -- the plan's data model (the YAML format's fields) and the design's runs.
* :mod:`tabsim.prereg.crosscheck` -- the cross-reference checks of a plan.
* :mod:`tabsim.prereg.schema` -- reading and validating a plan file (schema, then cross-references).
* :mod:`tabsim.prereg.hashing` -- canonical JSON, the normalised plan hash, file digests, bounded JSON reads.
* :mod:`tabsim.prereg.locking` -- locks, amendments, verification.
* :mod:`tabsim.prereg.signing` -- Ed25519 keys and signatures of locks and results.
* :mod:`tabsim.prereg.integrity` -- the code digest, the plan's git commit, seeds of earlier runs.
* :mod:`tabsim.prereg.status` -- the run-folder status protocol: file names and the status reader.
* :mod:`tabsim.prereg.runner` -- running the design with that protocol.
* :mod:`tabsim.prereg.analysis` -- estimands, intervals, decision rules, Holm, verdicts.
* :mod:`tabsim.prereg.results` -- a complete run folder, read and verified.
* :mod:`tabsim.prereg.assessment` -- what vouches for a run: signatures, code, plan commit, seeds.
* :mod:`tabsim.prereg.report` -- ``report.md`` / ``report.json``.

The ``tabsim prereg`` commands are :mod:`tabsim.cli.prereg`. See ``docs/prereg.md``.
"""
from tabsim.base.lazy import lazy_exports

# imported on first use, so that importing the package loads neither the schema nor the runner's stack
_EXPORTS = {"PreregError": "errors", "Plan": "schema", "load_plan": "schema", "validate_document": "schema",
            "plan_hash": "hashing", "lock": "locking", "amend": "locking", "verify": "locking",
            "read_lock": "locking", "changed_fields": "locking", "run_study": "runner", "write_report": "report"}

__all__ = ["Plan", "PreregError", "load_plan", "validate_document", "lock", "amend", "verify", "read_lock",
           "plan_hash", "changed_fields", "run_study", "write_report"]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
