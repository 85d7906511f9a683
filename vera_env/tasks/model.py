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

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationInfo, field_validator

from vera_env.errors import GraderError
from vera_env.verification.grading import GraderSpec, grade_against
from vera_env.verification.strength.reference import Reference

__all__ = ["Task", "Trap"]

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
    _reference: Reference | None = PrivateAttr(default=None)

    @property
    def reference(self) -> Reference | None:
        """How the answer follows from the files (a generated family's solver and the
        transformations that keep the answer), or None: strength then builds
        format-level controls only (`vera_env.verification.strength.reference`)."""
        return self._reference

    def with_reference(self, reference: Reference | None) -> Task:
        """This task with ``reference`` attached (not part of the task file: code, not data)."""
        task = self.model_copy()
        task._reference = reference
        return task

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
        try:
            verdict = grade_against(spec, answer, answer)
        except GraderError as exc:  # a ground truth its own rule cannot read
            raise ValueError(f"the task's own answer {answer!r} does not pass its "
                             f"{spec.kind} grader: {exc}") from exc
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
        if spec.kind != "llm" and grade_against(spec, answer, trap.wrong_answer).correct is True:
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
