"""The grader spec: how a final answer is compared with the ground truth, validated at load.

Each kind takes only its own fields, so a ``pattern`` on a numeric grader (a sign the
author meant another kind) is an error rather than ignored. Task files name a spec; the
rules (``grading.rules``) and the judge (``grading.judge``) apply it.
"""

from __future__ import annotations

import re
from typing import Literal, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

__all__ = ["DEFAULT_REL_TOL", "GraderKind", "GraderSpec"]

GraderKind = Literal["exact", "numeric", "set", "choice", "regex", "llm"]

DEFAULT_REL_TOL = 1e-6
"""Tolerance of a numeric grader that names none: equal up to float formatting."""

_FIELDS_OF_KIND: dict[str, frozenset[str]] = {
    "exact": frozenset(), "set": frozenset(), "numeric": frozenset({"abs_tol", "rel_tol"}),
    "choice": frozenset({"choices"}), "regex": frozenset({"pattern"}), "llm": frozenset({"rubric"}),
}


class GraderSpec(BaseModel):
    """How a final answer is compared with the ground truth.

    Each kind takes only its own fields, so a ``pattern`` on a numeric grader (a sign the
    author meant another kind) is an error rather than ignored.

    Attributes:
        kind: ``exact``, ``numeric``, ``set``, ``choice``, ``regex`` or ``llm``.
        abs_tol: numeric: absolute tolerance (>= 0).
        rel_tol: numeric: relative tolerance (>= 0). With neither tolerance given,
            ``rel_tol`` defaults to `DEFAULT_REL_TOL`; with one given, the other is 0.
        choices: choice: the allowed answers (non-empty, distinct).
        pattern: regex: a pattern the whole answer must match (case-insensitive).
        rubric: llm: the instructions a judge applies.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: GraderKind
    abs_tol: float | None = Field(default=None, validate_default=True)
    rel_tol: float | None = Field(default=None, validate_default=True)
    choices: tuple[str, ...] | None = Field(default=None, validate_default=True)
    pattern: str | None = Field(default=None, validate_default=True)
    rubric: str | None = Field(default=None, validate_default=True)

    @model_validator(mode="before")
    @classmethod
    def _default_tolerance(cls, data: object) -> object:
        if (isinstance(data, dict) and data.get("kind") == "numeric"
                and data.get("abs_tol") is None and data.get("rel_tol") is None):
            return {**data, "rel_tol": DEFAULT_REL_TOL}
        return data

    @field_validator("abs_tol", "rel_tol", "choices", "pattern", "rubric")
    @classmethod
    def _belongs_to_kind(cls, value: object, info: ValidationInfo) -> object:
        kind = info.data.get("kind")
        if kind is None:  # kind itself was invalid; that error is reported instead
            return value
        name = info.field_name or ""
        if name not in _FIELDS_OF_KIND[kind]:
            if value is not None:
                raise ValueError(f"{name} is not used by kind={kind!r}")
            return value
        return _VALIDATE[name](value, kind)


def _tolerance(value: object, kind: str) -> float:
    if value is None:
        return 0.0
    tol = float(value)  # type: ignore[arg-type]  # pydantic has coerced it to float
    if not 0.0 <= tol < float("inf"):
        raise ValueError(f"a tolerance must be finite and >= 0, got {tol}")
    return tol


def _choices(value: object, kind: str) -> tuple[str, ...]:
    if not value:
        raise ValueError("kind='choice' needs a non-empty list of choices")
    choices = cast(tuple[str, ...], value)  # pydantic has validated it as a tuple of str
    folded = [" ".join(c.split()).casefold() for c in choices]
    if len(set(folded)) != len(folded) or not all(folded):
        raise ValueError(f"choices must be distinct and non-blank, got {list(choices)}")
    return choices


def _pattern(value: object, kind: str) -> str:
    if not value:
        raise ValueError("kind='regex' needs a pattern")
    try:
        re.compile(str(value))
    except re.error as exc:
        raise ValueError(f"pattern {value!r} does not compile: {exc}") from exc
    return str(value)


def _rubric(value: object, kind: str) -> str:
    if not value or not str(value).strip():
        raise ValueError("kind='llm' needs a rubric (what a judge should score 1.0)")
    return str(value)


_VALIDATE = {"abs_tol": _tolerance, "rel_tol": _tolerance, "choices": _choices,
             "pattern": _pattern, "rubric": _rubric}
