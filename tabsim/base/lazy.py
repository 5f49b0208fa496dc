"""Package attributes imported on first use (PEP 562).

A package's ``__init__`` names what it exports and from which submodule; the submodule is imported
when the name is first read. This keeps ``import tabsim`` and ``tabsim --help`` light: JAX, pandas,
statsmodels and matplotlib load only when something needs them.
"""
from __future__ import annotations

import importlib
import importlib.util
from typing import Callable


def lazy_exports(package: str, exports: dict[str, str], *, submodules: bool = False
                 ) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``.

    ``exports`` maps an exported name to the submodule that defines it, relative to ``package``
    (``{"save_figure": "figures"}``). A name read once is kept in the package's namespace. With
    ``submodules``, any other public name that is a submodule (``tabsim.audit``) is imported too.
    """
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str):
        if name in exports:
            value = getattr(importlib.import_module(f"{package}.{exports[name]}"), name)
            namespace[name] = value
            return value
        if submodules and not name.startswith("_") and importlib.util.find_spec(f"{package}.{name}") is not None:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
