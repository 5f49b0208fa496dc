"""``tabsim reproduce``: the reference study (arXiv 2606.05932; docs/science.md) rebuilt in one command.

Five studies on the ``paper`` preset, run as one packed job (every study's cells x seeds are units
of one compiled program per static shape, shared units run once):

1. the prior sweep over p_s in {0.20, 0.35, 0.50, 0.65, 0.80}, with the partition and the
   crossover of d_elicit located on a finer grid;
2. the 2x2x2 factorial A = reward (TRUE +1 / MAJORITY -1) x B = filter (on +1 / off -1) x
   C = prior (0.80 +1 / 0.35 -1), fitted by OLS on seed-level rows with ``C(x, Sum)`` contrasts;
3. the points-vs-bounds pilot gate at a strong prior and at a uniform prior near the crossover,
   with its stability across pilot replications;
4. the two simulated families (p_s 0.80 and 0.35) with share verdicts;
5. power at p_s 0.50.

``DIR/report.md`` puts tabsim's numbers beside the paper's headline numbers; it is written last,
so a folder without it is an interrupted run.

* :mod:`~tabsim.studies.reference.design` -- sizes (:func:`settings`), pre-set constants, the paper's
  numbers, the five designs; light to import.
* :mod:`~tabsim.studies.reference.analysis` -- every statistic of the report (:func:`analyze`).
* :mod:`~tabsim.studies.reference.paper` -- tabsim's numbers beside the paper's.
* :mod:`~tabsim.studies.reference.figures` -- the three figures.
* :mod:`~tabsim.studies.reference.report` -- ``report.md`` and ``summary.json``.
* :mod:`~tabsim.studies.reference.run` -- :func:`reproduce`, which runs it all.
"""
from tabsim.base.lazy import lazy_exports

# imported on first use: `tabsim reproduce --help` loads only the light design module
_EXPORTS = {"SCALES": "design", "PAPER": "design", "Settings": "design", "settings": "design",
            "build_designs": "design", "analyze": "analysis", "compare_with_paper": "paper",
            "compare_every_point": "paper", "render_report": "report", "summary_json": "report",
            "reproduce": "run"}

__all__ = ["PAPER", "SCALES", "Settings", "analyze", "build_designs", "compare_every_point", "compare_with_paper",
           "render_report", "reproduce", "settings", "summary_json"]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
