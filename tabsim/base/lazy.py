"""Package attributes imported on first use (PEP 562).

A package's ``__init__`` names what it exports and from which submodule; the submodule is imported
when the name is first read. This keeps ``import tabsim`` and ``tabsim --help`` light: JAX, pandas,
statsmodels and matplotlib load only when something needs them.

A package may also name submodules that moved (``{"presets": "config.presets"}``): the old dotted name,
and every module under it, still imports, as the very module at its new place, with a
``DeprecationWarning`` naming the new place.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from typing import Callable


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``package.OLD[.rest]`` as the module ``package.NEW[.rest]`` (one module under two names,
    so its state and its classes are shared), warning once per old name with ``DeprecationWarning``."""

    def __init__(self, package: str, moved: dict[str, str]):
        self.package, self.moved = package, dict(moved)

    def target(self, fullname: str) -> str | None:
        """The new dotted name of ``fullname``, or None when it did not move."""
        head, _, rest = fullname.removeprefix(self.package + ".").partition(".")
        if not fullname.startswith(self.package + ".") or head not in self.moved:
            return None
        return f"{self.package}.{self.moved[head]}" + (f".{rest}" if rest else "")

    def find_spec(self, fullname, path=None, target=None):
        new = self.target(fullname)
        if new is None or importlib.util.find_spec(new) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        new = self.target(spec.name)
        warnings.warn(f"{spec.name} moved to {new}; import it from there (the old name will be removed)",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module) -> None:  # the module at its new place is already executed
        pass


def lazy_exports(package: str, exports: dict[str, str], *, submodules: bool = False, moved: dict[str, str] | None = None
                 ) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``.

    ``exports`` maps an exported name to the submodule that defines it, relative to ``package``
    (``{"save_figure": "figures"}``). A name read once is kept in the package's namespace. With
    ``submodules``, any other public name that is a submodule (``tabsim.audit``) is imported too.
    ``moved`` maps old submodule names to their new places, relative to ``package`` (see the module).
    """
    namespace = importlib.import_module(package).__dict__
    if moved and not any(isinstance(f, MovedModules) and f.package == package for f in sys.meta_path):
        sys.meta_path.insert(0, MovedModules(package, moved))  # before the path finder: one module, not two

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
