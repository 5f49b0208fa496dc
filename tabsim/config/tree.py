"""``task.tree``: the tree MDP's settings as a typed model, checked where they enter.

The checks are those of :func:`tabsim.base.choices.check_tree` (plain Python, no JAX), so a bad value is refused
with the message that names it (``task.tree.styles[1].actions: ...``) before any environment is built.
A tree's dump holds only the fields the config gives, so its digest, stores and files are those of the
mapping it was read from.
"""
from __future__ import annotations

from pydantic import Field, model_serializer, model_validator

from tabsim.base.choices import TREE_FIELDS, check_tree
from tabsim.config.base import BIG, Section


class GivenOnly(Section):
    """A section whose dump holds only the fields that were given (the defaults stay unwritten)."""

    @model_serializer(mode="wrap")
    def _given_only(self, handler):
        out = handler(self)
        return {k: v for k, v in out.items() if k in self.model_fields_set}


class TreeStyle(GivenOnly):
    """One answer style: the prior mass of its root actions, its accuracy and the actions that start it."""

    mass: float = Field(1.0, description="prior mass of the style's root actions")
    accuracy: float | None = Field(None, description="None = the traced prior_strength")
    actions: list[int] | None = Field(None, description="root actions; None = every n-th action")


class TreeConfig(GivenOnly):
    """The structure of a tree MDP (``task.env = "tree"``)."""

    depth: int = Field(4, description="tokens per answer at most")
    branching: int = Field(3, description="actions per node: STOP and branching - 1 content tokens")
    styles: list[TreeStyle] | None = Field(None, description="None = one style over every root action")
    length_slope_correct: float = 0.0
    length_slope_wrong: float = 0.0

    @model_validator(mode="before")
    @classmethod
    def _checked(cls, v):
        if isinstance(v, TreeConfig):
            return v
        if not isinstance(v, dict):
            raise ValueError(f"task.tree: must be a table of {', '.join(TREE_FIELDS)}, got {v!r}")
        check_tree(v, None, big=BIG)
        return v

    @property
    def n_leaves(self) -> int:
        """Terminal (node, action) pairs: STOP at every node, every content action at the last level."""
        b = self.branching
        return sum((b - 1) ** d for d in range(self.depth)) + (b - 1) ** self.depth

    def env_kwargs(self) -> dict:
        """The given settings as keyword arguments of :class:`tabsim.sim.envs.TreeEnv` (its defaults are these
        models' defaults)."""
        return self.model_dump()
