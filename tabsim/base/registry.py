"""Named components: a registry that a decorator fills and that refuses unknown or taken names clearly.

Every pluggable kind of the engine (advantage estimators, ratios, surrogates, aggregations, KL
estimators, environments) is one :class:`Registry`; the config validates a name against the same
one-line message, :func:`unknown`.
"""
from __future__ import annotations

import difflib
import sys
from collections.abc import Mapping


def suggest(name, allowed) -> str:
    """`` (did you mean `x`?)`` for the closest of ``allowed`` to a misspelt ``name``, else ``""``."""
    near = difflib.get_close_matches(str(name), [str(a) for a in allowed], n=1, cutoff=0.6)
    return f" (did you mean `{near[0]}`?)" if near else ""


def unknown(kind: str, name, allowed) -> str:
    """The message for ``name`` not among ``allowed``: the kind, the closest name and the allowed ones."""
    return f"unknown {kind} {name!r}{suggest(name, allowed)}; allowed: {', '.join(sorted(map(str, allowed)))}"


def _registrant(frame) -> str:
    """The module that asked for a registration: the first caller outside the registering helpers (``register``,
    ``register_env``, ``register_surrogate`` and their inner decorators)."""
    while frame is not None and (frame.f_code.co_name.startswith("register") or frame.f_code.co_name == "deco"):
        frame = frame.f_back
    return str(frame.f_globals.get("__name__", "")) if frame is not None else ""


class UnknownName(KeyError, ValueError):
    """A name no component is registered under: a ``KeyError`` to lookups, a ``ValueError`` to validation."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ReadOnly(TypeError):
    """A registry written to other than through ``register``."""


class Registry(Mapping):
    """Components of one ``kind`` (the config field that names them: ``"estimator"``, ``"env"``) by name, in
    the order they were registered.

    ``@reg.register(name, **meta)`` adds one; ``reg[name]`` looks one up and raises :class:`UnknownName`,
    naming the kind and the allowed names, for a name never registered. A name taken by one of tabsim's own
    components is refused; a name a user registered is replaced when registered again (a notebook cell run
    twice), and :meth:`version` counts its registrations, so the programs compiled for the earlier one are
    not reused (:func:`tabsim.config.static.static_key`); :meth:`unregister` removes a user's name.
    ``builtin`` is the list of tabsim's own names that the JAX-free config validates against
    (:mod:`tabsim.base.choices`): one of tabsim's own components registered under another name is refused.
    A registry is a read-only mapping: ``name in reg``, ``sorted(reg)`` and ``dict(reg)`` work as for a
    ``dict``, and writing to it any other way (``reg[name] = f``, ``del reg[name]``, ``update``, ``pop``,
    ``|=``, ...) raises :class:`ReadOnly`, pointing to ``register``.

    Example::

        ESTIMATORS = Registry("estimator")

        @ESTIMATORS.register("grpo")
        def grpo(rewards, *, lengths, valid, hp): ...
    """

    def __init__(self, kind: str, own: str = "tabsim.", builtin: tuple[str, ...] | None = None):
        self.kind, self.own, self.builtin = kind, own, builtin
        self._items: dict[str, object] = {}
        self._meta: dict[str, dict] = {}
        self._versions: dict[str, int] = {}
        self._own: set[str] = set()

    def __getitem__(self, name):
        try:
            return self._items[name]
        except (KeyError, TypeError):  # TypeError: an unhashable name
            raise UnknownName(unknown(self.kind, name, self._items)) from None

    def __iter__(self):
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, name) -> bool:
        try:
            return name in self._items
        except TypeError:
            return False

    def is_own(self, name: str) -> bool:
        """Whether ``name`` is one of the package's own components (registered by a module under ``own``; a
        user's name for one of tabsim's functions is the user's)."""
        self[name]  # an unknown name raises UnknownName
        return name in self._own

    def register(self, name: str, **meta):
        """A decorator that registers its argument under ``name``, with the keywords ``meta``, and returns it."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.kind} is registered under a non-empty string, got {name!r}")
        if name in self and self.is_own(name):
            raise ValueError(f"{self.kind} {name!r} is one of tabsim's own ({self[name]!r}); register yours "
                             f"under another name (taken: {', '.join(self)})")

        # who registers decides whose the name is: tabsim's modules register its own components, anyone else
        # (a notebook aliasing tabsim's grpo under a name of theirs, say) registers a user's
        own = _registrant(sys._getframe(1)).startswith(self.own)

        def deco(obj):
            if own and self.builtin is not None and name not in self.builtin:
                raise ValueError(f"{self.kind} {name!r} is one of tabsim's own but not among the names the config "
                                 f"reads ({', '.join(self.builtin)}); add it to that list (tabsim.base.choices)")
            self._items[name] = obj
            if own:
                self._own.add(name)
            self._meta[name] = dict(meta)
            self._versions[name] = self._versions.get(name, 0) + 1
            return obj

        return deco

    def unregister(self, name: str) -> None:
        """Remove a name a user registered (tabsim's own are refused); its registration count is kept, so a
        later registration under the name is not answered by the programs compiled for this one."""
        if self.is_own(name):  # an unknown name raises UnknownName
            raise ValueError(f"{self.kind} {name!r} is one of tabsim's own and cannot be unregistered")
        del self._items[name], self._meta[name]

    def version(self, name: str) -> int:
        """How many times ``name`` was registered."""
        self[name]  # an unknown name raises UnknownName
        return self._versions.get(name, 0)

    def names(self) -> tuple[str, ...]:
        """The registered names, in registration order."""
        return tuple(self._items)

    def meta(self, name: str) -> dict:
        """The keywords ``name`` was registered with."""
        self[name]  # an unknown name raises UnknownName
        return dict(self._meta.get(name, {}))

    def _read_only(self, *args, **kwargs):
        raise ReadOnly(f"the {self.kind} registry is read-only; add or replace a component with "
                       f"`@register_{self.kind}(name)` (`.register(name)`), remove yours with `.unregister(name)`")

    __setitem__ = __delitem__ = __ior__ = update = pop = popitem = setdefault = clear = _read_only

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self)})"
