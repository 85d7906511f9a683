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
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from vera_env.errors import GraderError
from vera_env.verification.grading import GraderSpec, grade_against
from vera_env.verification.strength.program import program_reference
from vera_env.verification.strength.reference import Reference, RewriteTransform

if TYPE_CHECKING:
    from vera_env.sandbox import Sandbox

__all__ = ["ReferenceProgram", "Task", "Trap"]

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


_SCRIPT_MAX_BYTES = 64 * 1024


class ReferenceProgram(BaseModel):
    """A task's reference as a program: it prints the task's answer from the task's files.

    Strength runs it in the sandbox, read-only, in a workspace holding one variant of the
    task's files (encoded as the task's own are: a ``.gz`` stays gzipped), and grades
    the last non-empty line it prints against the task's answer with the task's grader:
    a variant whose answer is kept is a control, one whose answer moves is a mutant
    (`vera_env.verification.strength.program`). Exactly one of:

    Attributes:
        command: A shell command (bash), run in the files' folder.
        script: A file beside ``task.json`` (a folder suite) or the ``.jsonl`` file; it
            is run by its ``#!`` line, by bash if it has none, in the files' folder.
            Checked at load (it must exist, at most 64 KiB), read when strength runs it.
        rewrites: Optional, file name -> the rewrites strength probes for that file
            (`vera_env.verification.strength.reference.REWRITE_TRANSFORMS`; ``[]``:
            none; a file not named gets the default ones). Name fewer where a rewrite
            keeps the program's answer but moves a fact an honest analysis checks on
            its way (a survival table's time and status pairs). `vera-env tasks export`
            writes a family's own.
        mutants: Optional, file name -> kinds of mutation aimed at what the question
            reads, each a list of files: the same change made by growing amounts (a
            case row dropped, then two), or one file where only one outcome exists.
            Each file holds the task file's whole content so changed (a ``.gz`` name is
            gunzipped first). Tried before the generic mutations and classified by the
            program like them: kept only where its answer moves. Without them a suite
            gets the generic mutations only, which a question about a few records
            rarely notices (`vera-env tasks export` writes a family's own).
        controls: Optional, file name -> files holding the task file's content changed
            so the answer is kept (identifiers the question does not name renamed, a
            README reworded); tried before the generic controls and kept only where
            the program prints its answer again.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: str | None = None
    script: Path | None = None
    rewrites: dict[str, tuple[RewriteTransform, ...]] | None = None
    mutants: dict[str, tuple[tuple[Path, ...], ...]] | None = None
    controls: dict[str, tuple[Path, ...]] | None = None

    @field_validator("mutants", mode="before")
    @classmethod
    def _kinds_of_one(cls, value: object) -> object:
        # A kind with one file may be written as the file's name alone.
        if isinstance(value, dict):
            return {k: [[f] if isinstance(f, str | Path) else f for f in v]
                    if isinstance(v, list | tuple) else v for k, v in value.items()}
        return value

    @field_validator("mutants", "controls")
    @classmethod
    def _variant_files_exist(cls, value: dict[str, object] | None) -> object:
        for name, entries in (value or {}).items():
            for entry in entries:  # type: ignore[attr-defined]
                for path in entry if isinstance(entry, tuple) else (entry,):
                    if not Path(path).is_file():
                        raise ValueError(f"{name!r}: variant file {str(path)!r} is not an "
                                         "existing file")
        return value

    @field_validator("command")
    @classmethod
    def _command_not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("the reference command is empty; give a shell command that "
                             "prints the answer")
        return value

    @field_validator("script")
    @classmethod
    def _script_exists(cls, value: Path | None) -> Path | None:
        if value is None:
            return None
        if not value.is_file():
            raise ValueError(f"reference script {str(value)!r} is not an existing file")
        if value.stat().st_size > _SCRIPT_MAX_BYTES:
            raise ValueError(f"reference script {str(value)!r} is larger than 64 KiB (it "
                             "is handed to the sandbox on the command line)")
        return Path(os.path.abspath(value))

    @model_validator(mode="after")
    def _exactly_one(self) -> ReferenceProgram:
        if (self.command is None) == (self.script is None):
            raise ValueError("a reference is either {\"command\": ...} or "
                             "{\"script\": ...}, exactly one of the two")
        return self

    def shell_command(self) -> str:
        """The bash command that runs it in the sandbox (a script's text goes to
        ``/tmp``: the workspace holds the task's files and nothing else)."""
        if self.command is not None:
            return self.command
        assert self.script is not None  # _exactly_one
        text = self.script.read_text(encoding="utf-8")
        first = text.split("\n", 1)[0]
        runner = first[2:].strip() if first.startswith("#!") else "bash"
        path = f"/tmp/vera-reference-{self.script.name}"
        return (f"printf '%s' {shlex.quote(text)} > {shlex.quote(path)} && "
                f"{runner} {shlex.quote(path)}")


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
        reference_program: The task file's ``reference``: a program that prints the
            answer from the files, how strength tells controls from mutants in a suite
            written without Python (`ReferenceProgram`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", validate_by_name=True,
                              validate_by_alias=True, serialize_by_alias=True)

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
    reference_program: ReferenceProgram | None = Field(default=None, alias="reference")
    _reference: Reference | None = PrivateAttr(default=None)

    @property
    def reference(self) -> Reference | None:
        """How the answer follows from the files (a generated family's solver and the
        transformations that keep the answer), or None; a task file's ``reference``
        program becomes one in ``strength_reference``."""
        return self._reference

    def with_reference(self, reference: Reference | None) -> Task:
        """This task with ``reference`` attached (not part of the task file: code, not data)."""
        task = self.model_copy()
        task._reference = reference
        return task

    def strength_reference(self, sandbox: Sandbox, *, timeout_s: float = 60.0
                           ) -> Reference | None:
        """The reference strength classifies this task's variants by: the attached one,
        else the task file's program run in ``sandbox`` (each run cut at ``timeout_s``),
        else None (`vera_env.tasks.unreferenced`: its checks then earn nothing)."""
        if self._reference is not None or self.reference_program is None:
            return self._reference

        def same(truth: str, other: str) -> bool:
            try:
                return grade_against(self.grader, truth, other).correct is True
            except GraderError:
                return False
        program = self.reference_program
        return program_reference(program.shell_command(), self.data_files(), sandbox,
                                 same=same, timeout_s=timeout_s, rewriting=program.rewrites,
                                 mutants=program.mutants, controls=program.controls)

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
