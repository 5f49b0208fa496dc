"""Performance profiles (rliable's score distributions): the fraction of runs scoring above tau, per group.
Drawn by :func:`tabsim.plotting.compare_figures.plot_profile`, with the comparison's other figures."""
from __future__ import annotations

from tabsim.plotting.compare_figures import plot_profile

__all__ = ["plot_profile"]
