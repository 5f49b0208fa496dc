"""The claim studies: each a folder ``<root>/<ID>/`` holding ``claim.yaml`` (the published claim, its
paper, how the table stands for the paper's setting and what it cannot represent, and how the plan's
hypotheses bear on the claim) beside a pre-registered ``plan.yaml``; and ``<root>/waiting.yaml``, the
claims not studied yet with what each waits for.

A claim file is YAML read with ``yaml.safe_load`` and checked with pydantic; unknown keys are errors,
and a problem is refused in one line naming the file, the field and what is allowed.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tabsim.files.safeload import LoadError, load_yaml
from tabsim.prereg.errors import PreregError

CLAIM_FILE, PLAN_FILE, WAITING_FILE, RESULTS_DIR = "claim.yaml", "plan.yaml", "waiting.yaml", "results"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Paper(_Model):
    title: str = Field(min_length=1)
    authors: str = Field(min_length=1)
    arxiv: str = Field(pattern=r"^\d{4}\.\d{4,5}$", description="arXiv id, e.g. 2508.05928")


class Bearing(_Model):
    """How one confirmatory hypothesis of the plan bears on the claim."""

    region: str = Field(min_length=1, description="where in the design it tests the claim, e.g. 'p_s 0.20'")
    if_supported: Literal["holds", "fails"] = Field(description="the claim there if the hypothesis is SUPPORTED")


class Headline(_Model):
    """How an estimate of the plan reads as the claim's quantity (e.g. x2: a Sum-coded coefficient -> a difference)."""

    label: str = Field(min_length=1)
    scale: float = 1.0


class Figure(_Model):
    metric: str = "pass1"
    by: list[str] = Field(min_length=1, description="factor columns; the one with most levels is the x axis")


class Expected(_Model):
    """The exact expected update's flow beside the Monte-Carlo runs (bandit, stateless rules)."""

    vary: dict[str, list[Any]] = Field(default_factory=dict, description="static fields (section.key) and their levels")
    sweep: str = Field("prior_strength", description="the traced factor swept along the flow")


class Quick(_Model):
    seeds: int = Field(2, ge=2, le=64)
    steps: int = Field(10, ge=1, le=1000)


class Claim(_Model):
    id: str = Field(pattern=r"^[A-Za-z0-9_-]+$")
    title: str = Field(min_length=1)
    paper: Paper
    quote: str = Field(min_length=1, description="the claim in the paper's words")
    paper_numbers: str = Field(min_length=1, description="the paper's own numbers")
    paper_number: str = Field(min_length=1, description="the paper's headline number, one line for the summary")
    setting: str = Field(min_length=1, description="the tabular operationalisation and why it stands for the paper's")
    cannot_represent: str = Field(min_length=1, description="what the table cannot represent, said plainly")
    waits: Optional[str] = Field(None, description="the part of the claim that waits, and for what")
    bearing: dict[str, Bearing] = Field(min_length=1, description="confirmatory hypothesis id -> its bearing")
    headline: Headline
    figure: Figure
    expected: Optional[Expected] = None
    quick: Quick = Field(default_factory=Quick)
    folder: Optional[Path] = Field(None, exclude=True)

    @property
    def plan_path(self) -> Path:
        return self.folder / PLAN_FILE

    @property
    def results_dir(self) -> Path:
        return self.folder / RESULTS_DIR


class Waiting(_Model):
    id: str = Field(pattern=r"^[A-Za-z0-9_-]+$")
    claim: str = Field(min_length=1)
    paper: str = Field(min_length=1)
    status: Literal["waiting", "not testable in a table"]
    waits_for: str = Field(min_length=1)


def _problems(path: Path, err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(x) for x in first["loc"]) or "the file"
    got = first.get("input")
    shown = "" if isinstance(got, (dict, list)) or first["type"] == "missing" else f" (got {got!r})"
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"{path}: {where}: {first['msg'].removeprefix('Value error, ')}{shown}{more}"


def _read(path: Path, what: str):
    try:
        return load_yaml(path, schema="core", what=what)
    except LoadError as err:
        raise PreregError(str(err)) from None


def load_claim(folder: str | Path) -> Claim:
    """The claim of ``folder`` (its ``claim.yaml``; the plan beside it must exist)."""
    folder = Path(folder)
    path = folder / CLAIM_FILE
    if not path.is_file():
        raise PreregError(f"{folder}: no {CLAIM_FILE}; a claim study is a folder holding {CLAIM_FILE} and {PLAN_FILE}")
    try:
        claim = Claim.model_validate(_read(path, "claim file"))
    except ValidationError as err:
        raise PreregError(_problems(path, err)) from None
    if claim.id != folder.name:
        raise PreregError(f"{path}: id: {claim.id!r} differs from its folder's name {folder.name!r}")
    if not (folder / PLAN_FILE).is_file():
        raise PreregError(f"{folder}: no {PLAN_FILE} beside {CLAIM_FILE}")
    return claim.model_copy(update={"folder": folder})


def load_claims(root: str | Path, ids=None) -> list[Claim]:
    """The claim studies under ``root`` in the order of their ids, or those of ``ids`` in that order."""
    root = Path(root)
    if not root.is_dir():
        raise PreregError(f"{root}: no such folder of claim studies")
    found = {p.parent.name: p.parent for p in sorted(root.glob(f"*/{CLAIM_FILE}"))}
    if ids:
        unknown = [i for i in ids if i not in found]
        if unknown:
            raise PreregError(f"claim {unknown[0]!r}: not a study under {root}; allowed: {', '.join(found) or 'none'}")
        return [load_claim(found[i]) for i in ids]
    return [load_claim(f) for f in found.values()]


def load_waiting(root: str | Path) -> list[Waiting]:
    """The claims of ``<root>/waiting.yaml`` (empty when there is none)."""
    path = Path(root) / WAITING_FILE
    if not path.is_file():
        return []
    doc = _read(path, "list of waiting claims")
    if not isinstance(doc, list):
        raise PreregError(f"{path}: the top level must be a list of claims, got {type(doc).__name__}")
    try:
        return [Waiting.model_validate(x) for x in doc]
    except ValidationError as err:
        raise PreregError(_problems(path, err)) from None
