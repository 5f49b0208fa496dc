"""Figures: the project's palette (:mod:`tabsim.plotting.palette`), the figures and ``save_figure``
(:mod:`tabsim.plotting.figures`), and the process pool that draws figures while the engine trains
(:mod:`tabsim.plotting.figure_pool`). Everything takes tidy frames and writes PNG (PDF or SVG when
asked); nothing here computes.
"""
from __future__ import annotations

from tabsim.base.lazy import lazy_exports
from tabsim.plotting.palette import (
    ALGO_COLORS,
    ARM_COLORS,
    ARM_STYLES,
    FALLBACK_COLORS,
    PAGE_RC,
    REFERENCE_COLOR,
    SETTING_COLORS,
    TERM_COLORS,
    TERM_MARKERS,
    color_of,
    colors_for,
)

# the figures load matplotlib: imported on first use, so the palette and the figure pool stay light
_EXPORTS = {"save_figure": "figures", "plot_curves": "figures", "plot_final": "figures", "FIGURE_FORMATS": "formats",
            "figure_formats": "formats", "plot_profile": "compare_figures", "plot_intervals": "compare_figures",
            "plot_improvement": "compare_figures", "plot_sample_efficiency": "compare_figures"}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = ["ALGO_COLORS", "ARM_COLORS", "ARM_STYLES", "FALLBACK_COLORS", "PAGE_RC", "REFERENCE_COLOR", "SETTING_COLORS",
           "TERM_COLORS", "TERM_MARKERS", "color_of", "colors_for",
           *_EXPORTS]
