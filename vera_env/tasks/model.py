"""The task schema: what a task file may say, validated once, at load.

Why so strict. A task is read from outside (a suite folder, a JSONL file, a generated
family) and every mistake in it surfaces, if it is not caught here, far from its cause:
a grader ``kind`` misspelt becomes a crash in the middle of a training run, a regex that
does not compile becomes a grader fault on the first answer, and a ground truth that does
not satisfy its own grader silently marks every correct answer wrong. So the models are
frozen pydantic models with ``extra="forbid"`` (a misspelt key is an error, not an
ignored field), and the cross-field rule that catches most authoring mistakes is checked
here: **a task's own answer must grade correct under its own grader**, and a trap's wrong
answer must not.

Errors raised here are pydantic ``ValidationError``s with field locations;
`vera_env.tasks.loaders` turns them into ``TaskFileError(file, field, message)``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from vera_env.grading import grade_against

__all__ = ["DEFAULT_REL_TOL", "GraderKind", "GraderSpec", "Task", "Trap"]

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
    choices = tuple(value)  # type: ignore[arg-type]
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


class Trap(BaseModel):
    """The plausible wrong analysis a careless agent does on a task.

    Attributes:
        description: What the careless analysis misses.
        careless_solution: Turns (same wire format as a solution) that fall into the trap.
        wrong_answer: The answer the careless solution arrives at; never correct.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    description: str = Field(min_length=1)
    careless_solution: tuple[str, ...] = ()
    wrong_answer: str = Field(min_length=1)


_ID = re.compile(r"[^\s/\\]+")


def _ends_with_answer(turns: tuple[str, ...], what: str) -> tuple[str, ...]:
    if turns and "FINAL ANSWER:" not in turns[-1]:
        raise ValueError(f"the last turn of a {what} must contain 'FINAL ANSWER: ...'")
    return turns


class Task(BaseModel):
    """One question about a set of data files, with its ground truth.

    Attributes:
        id: Unique within its source; no whitespace or slashes.
        question: What the agent is asked.
        answer: The ground truth (never staged into the workspace).
        grader: How an answer is compared with ``answer``.
        human_solvable: Whether a person with the same tools could answer it.
        tags: Free labels (family, skills, traps).
        solution: Reference turns an oracle policy replays; the last one answers.
        data_dir: Folder whose every file is staged into the workspace at the same
            relative path; None for a task without files.
        trap: The careless analysis this task is built to catch, if any.
        allowed_domains: Web domains the task's source allowed a solver to consult
            (BioMysteryBench's ``allowed_domains``). Recorded, not enforced: the sandbox
            has no network at all.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    question: str = Field(min_length=1)
    answer: str = Field(min_length=1)
    grader: GraderSpec
    human_solvable: bool = True
    tags: tuple[str, ...] = ()
    solution: tuple[str, ...] = ()
    data_dir: Path | None = None
    trap: Trap | None = None
    allowed_domains: tuple[str, ...] = ()

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if not _ID.fullmatch(value):
            raise ValueError(f"id must be non-empty, without whitespace or slashes, got {value!r}")
        return value

    @field_validator("answer", mode="before")
    @classmethod
    def _answer_from_number(cls, value: object) -> object:
        # JSON authors write "answer": 42; a bool is almost surely a mistake, so not it.
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        return value

    @field_validator("grader")
    @classmethod
    def _answer_satisfies_grader(cls, spec: GraderSpec, info: ValidationInfo) -> GraderSpec:
        answer = info.data.get("answer")
        if answer is None or spec.kind == "llm":
            return spec
        verdict = grade_against(spec, answer, answer)
        if verdict.correct is not True:
            raise ValueError(f"the task's own answer {answer!r} does not pass its "
                             f"{spec.kind} grader: {verdict.detail}")
        return spec

    @field_validator("solution")
    @classmethod
    def _solution_answers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _ends_with_answer(value, "solution")

    @field_validator("data_dir")
    @classmethod
    def _data_dir_exists(cls, value: Path | None) -> Path | None:
        if value is None:
            return None
        if not value.is_dir():
            raise ValueError(f"data_dir {str(value)!r} is not an existing directory")
        return Path(os.path.abspath(value))

    @field_validator("trap")
    @classmethod
    def _trap_is_wrong(cls, trap: Trap | None, info: ValidationInfo) -> Trap | None:
        spec, answer = info.data.get("grader"), info.data.get("answer")
        if trap is None or spec is None or answer is None:
            return trap
        _ends_with_answer(trap.careless_solution, "careless_solution")
        if grade_against(spec, answer, trap.wrong_answer).correct is True:
            raise ValueError(f"trap.wrong_answer {trap.wrong_answer!r} grades as correct; "
                             "a trap must lead to a wrong answer")
        return trap

    def data_files(self) -> dict[str, Path]:
        """Every file under ``data_dir``, keyed by its relative POSIX path.

        Returns:
            ``{"counts/matrix.mtx.gz": Path("/abs/.../counts/matrix.mtx.gz"), ...}``,
            sorted by name; empty when the task has no ``data_dir``.
        """
        if self.data_dir is None:
            return {}
        files = sorted(p for p in self.data_dir.rglob("*") if p.is_file())
        return {p.relative_to(self.data_dir).as_posix(): p for p in files}
