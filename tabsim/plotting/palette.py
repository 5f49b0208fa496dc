"""One palette for the whole project: every figure (the CLI's, ``tabsim reproduce``'s, the audit's,
the study scripts' and the notebooks') takes its colours from the dictionaries below, so an arm, a
partition term or an algorithm has the same colour everywhere. Each partition term shares the
colour of the arm whose reward defines its upper end (``d_null`` = RANDOM - FROZEN is RANDOM's
orange, ``d_elicit`` MAJORITY's green, ``d_rd`` TRUE's blue). ``d_majority`` = MAJORITY - FROZEN =
``d_null + d_elicit`` is drawn beside both, so it has a colour of its own: olive, between their orange
and green.
"""
from __future__ import annotations

ARM_COLORS = {"frozen": "#7f7f7f", "random": "#ff7f0e", "majority": "#2ca02c", "majority_offline": "#98df8a",
              "incorrect": "#d62728", "format": "#9467bd", "true": "#1f77b4", "noisy": "#17becf"}
# Line style and marker per arm: arms whose curves coincide (FROZEN and RANDOM under on-policy
# updates, say) stay visible as a dashed line over markers.
ARM_STYLES = {"frozen": ("--", "o"), "random": ("-", "s"), "majority": ("-", "^"), "majority_offline": (":", "v"),
              "incorrect": ("-.", "x"), "format": (":", "D"), "true": ("-", "o"), "noisy": ("-.", "P")}
TERM_COLORS = {"d_null": ARM_COLORS["random"], "d_elicit": ARM_COLORS["majority"], "d_rd": ARM_COLORS["true"],
               "d_majority": "#bcbd22", "d_total": "#000000", "d_naive": "#8c564b", "bias": ARM_COLORS["majority"],
               "rd_fraction": "#8c564b", "elicitation_share": ARM_COLORS["majority"], "rd_share": ARM_COLORS["true"]}
TERM_MARKERS = {"d_null": "s", "d_elicit": "^", "d_rd": "o", "d_total": "D", "d_naive": "v"}
# Algorithms and training settings compared in the study scripts and notebooks.
ALGO_COLORS = {"grpo": "#d62728", "dr_grpo": "#1f77b4", "gspo": "#17becf", "dapo": "#9467bd", "rloo": "#8c564b",
               "cispo": "#e377c2", "sapo": "#bcbd22", "reinforce": "#7f7f7f"}
ALGO_COLORS.update({"grpo_estimator+drgrpo_agg": "#ff9896", "drgrpo_estimator+grpo_agg": "#aec7e8"})  # mixed cells
SETTING_COLORS = {"on_policy": "#7f7f7f", "no_reuse": "#7f7f7f", "reuse_noclip": "#1f77b4", "reuse_clip": "#d62728",
                  "clip_effect": "#2ca02c", "clip0.2_reuse4": "#d62728", "clip0.05_reuse4": "#9467bd",
                  "noclip_reuse4": "#1f77b4", "clip0.2_onpolicy": "#7f7f7f"}
# Figures drawn for a page column (the notebooks on the documentation site, about 584 px wide at a
# desktop width): 5.8 in at 100 dpi is shown at its natural size, so 12 pt text stays at least as
# large as the site's 16 px body text. Multi-panel figures stack their panels rather than widen.
PAGE_RC = {"figure.figsize": (5.8, 3.6), "figure.dpi": 100, "savefig.dpi": 100, "font.size": 12.0,
           "axes.titlesize": 12.0, "axes.labelsize": 12.0, "xtick.labelsize": 12.0, "ytick.labelsize": 12.0,
           "legend.fontsize": 12.0}
REFERENCE_COLOR = "#d62728"  # published / reference values drawn beside tabsim's
FALLBACK_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                   "#bcbd22", "#17becf")


def color_of(name: str, index: int = 0) -> str:
    """The project colour of an arm, partition term, algorithm or setting; a cycle colour otherwise.
    Several names in one figure: :func:`colors_for`, which never gives two of them one colour."""
    for table in (ARM_COLORS, TERM_COLORS, ALGO_COLORS, SETTING_COLORS):
        if name in table:
            return table[name]
    return FALLBACK_COLORS[index % len(FALLBACK_COLORS)]


def colors_for(names) -> dict[str, str]:
    """A distinct colour for each of ``names``, in order: its project colour where no earlier name has
    it, else the first cycle colour no name has taken (so grpo's red is not given again to gpg, nor
    rloo's brown to reinforce_pp); past the ten cycle colours, the cycle repeats."""
    names = [str(n) for n in names]
    own = {n: color_of(n) for n in names if any(n in t for t in (ARM_COLORS, TERM_COLORS, ALGO_COLORS,
                                                                    SETTING_COLORS))}
    out: dict[str, str] = {}
    taken = set()
    for n in names:
        if n in own and own[n] not in taken:
            out[n] = own[n]
        else:
            reserved = taken | {own[m] for m in names if m in own and m not in out}
            free = [c for c in FALLBACK_COLORS if c not in reserved]
            out[n] = free[0] if free else FALLBACK_COLORS[len(out) % len(FALLBACK_COLORS)]
        taken.add(out[n])
    return out
