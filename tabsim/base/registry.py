"""Named components: a registry that a decorator fills and that refuses unknown or taken names clearly.

Every pluggable kind of the engine (advantage estimators, ratios, surrogates, aggregations, KL
estimators, environments) is one :class:`Registry`; the config validates a name against the same
one-line message, :func:`unknown`.
"""
from __future__ import annotations

import difflib


def suggest(name, allowed) -> str:
    """`` (did you mean `x`?)`` for the closest of ``allowed`` to a misspelt ``name``, else ``""``."""
    near = difflib.get_close_matches(str(name), [str(a) for a in allowed], n=1, cutoff=0.6)
    return f" (did you mean `{near[0]}`?)" if near else ""


def unknown(kind: str, name, allowed) -> str:
    """The message for ``name`` not among ``allowed``: the kind, the closest name and the allowed ones."""
    return f"unknown {kind} {name!r}{suggest(name, allowed)}; allowed: {', '.join(sorted(map(str, allowed)))}"


class UnknownName(KeyError, ValueError):
    """A name no component is registered under: a ``KeyError`` to lookups, a ``ValueError`` to validation."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class Registry(dict):
    """Components of one ``kind`` (the config field that names them: ``"estimator"``, ``"env"``) by name, in
    the order they were registered.

    ``@reg.register(name, **meta)`` adds one; ``reg[name]`` looks one up and raises :class:`UnknownName`,
    naming the kind and the allowed names, for a name never registered. A name taken by one of tabsim's own
    components is refused; a name a user registered is replaced when registered again (a notebook cell run
    twice), and :meth:`version` counts its registrations, so the programs compiled for the earlier one are
    not reused (:func:`tabsim.config.static.static_key`).
    A registry is a ``dict``, so ``name in reg``, ``sorted(reg)`` and ``dict(reg)`` work as for one.

    Example::

        ESTIMATORS = Registry("estimator")

        @ESTIMATORS.register("grpo")
        def grpo(rewards, *, lengths, valid, hp): ...
    """

    def __init__(self, kind: str, own: str = "tabsim."):
        super().__init__()
        self.kind, self.own = kind, own
        self._meta: dict[str, dict] = {}
        self._versions: dict[str, int] = {}

    def is_own(self, name: str) -> bool:
        """Whether ``name`` is one of the package's own components (defined in a module under ``own``)."""
        return str(getattr(self[name], "__module__", "")).startswith(self.own)

    def register(self, name: str, **meta):
        """A decorator that registers its argument under ``name``, with the keywords ``meta``, and returns it."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.kind} is registered under a non-empty string, got {name!r}")
        if name in self and self.is_own(name):
            raise ValueError(f"{self.kind} {name!r} is one of tabsim's own ({self[name]!r}); register yours "
                             f"under another name (taken: {', '.join(self)})")

        def deco(obj):
            self[name] = obj
            self._meta[name] = dict(meta)
            self._versions[name] = self._versions.get(name, 0) + 1
            return obj

        return deco

    def version(self, name: str) -> int:
        """How many times ``name`` was registered (a name only set as a dict entry counts 0)."""
        self[name]  # an unknown name raises UnknownName
        return self._versions.get(name, 0)

    def names(self) -> tuple[str, ...]:
        """The registered names, in registration order."""
        return tuple(self)

    def meta(self, name: str) -> dict:
        """The keywords ``name`` was registered with (``{}`` for one only set as a dict entry)."""
        self[name]  # an unknown name raises UnknownName
        return dict(self._meta.get(name, {}))

    def __missing__(self, name):
        raise UnknownName(unknown(self.kind, name, self))

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self)})"
