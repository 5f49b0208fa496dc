"""Moved to :mod:`tabsim.base.defaults` (the ground floor); this name still imports, with a DeprecationWarning."""
from __future__ import annotations

import sys
import warnings

from tabsim.base import defaults as _defaults

warnings.warn("tabsim.files.defaults is now tabsim.base.defaults", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _defaults  # one module: the same options, the same command-given context
