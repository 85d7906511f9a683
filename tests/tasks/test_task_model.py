"""Task and GraderSpec validation: every authoring mistake is caught at construction."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from vera_env.tasks.model import Task, Trap
from vera_env.verification.grading import DEFAULT_REL_TOL, GraderSpec


def _task(**overrides: object) -> Task:
    fields: dict[str, object] = {"id": "t1", "question": "How many?", "answer": "42",
                                 "grader": {"kind": "numeric"}}
    return Task.model_validate({**fields, **overrides})


def test_numeric_grader_without_tolerance_gets_default_rel_tol() -> None:
    spec = GraderSpec(kind="numeric")
    assert (spec.rel_tol, spec.abs_tol) == (DEFAULT_REL_TOL, 0.0)


def test_numeric_grader_with_one_tolerance_sets_the_other_to_zero() -> None:
    assert GraderSpec(kind="numeric", abs_tol=0.5).rel_tol == 0.0


def test_numeric_grader_negative_tolerance_rejected() -> None:
    with pytest.raises(ValidationError, match="finite and >= 0"):
        GraderSpec(kind="numeric", abs_tol=-1)


def test_choice_grader_without_choices_rejected() -> None:
    with pytest.raises(ValidationError, match="needs a non-empty list of choices"):
        GraderSpec(kind="choice")


def test_choice_grader_duplicate_choices_rejected() -> None:
    with pytest.raises(ValidationError, match="distinct"):
        GraderSpec(kind="choice", choices=["A", " a "])


def test_regex_grader_pattern_must_compile() -> None:
    with pytest.raises(ValidationError, match="does not compile") as info:
        GraderSpec(kind="regex", pattern="(unclosed")
    assert info.value.errors()[0]["loc"] == ("pattern",)


def test_llm_grader_needs_rubric() -> None:
    with pytest.raises(ValidationError, match="needs a rubric"):
        GraderSpec(kind="llm")


def test_field_of_another_kind_rejected() -> None:
    with pytest.raises(ValidationError, match="pattern is not used by kind='numeric'"):
        GraderSpec(kind="numeric", pattern="x")


def test_unknown_grader_kind_rejected() -> None:
    with pytest.raises(ValidationError, match="'exact', 'numeric'"):
        GraderSpec(kind="fuzzy")  # type: ignore[arg-type]


def test_task_is_frozen_and_forbids_unknown_keys() -> None:
    task = _task()
    with pytest.raises(ValidationError, match="frozen"):
        task.answer = "7"  # type: ignore[misc]
    with pytest.raises(ValidationError, match="Extra inputs"):
        _task(answr="42")


def test_task_numeric_answer_from_json_number_becomes_string() -> None:
    assert _task(answer=5076.02).answer == "5076.02"


def test_task_answer_must_satisfy_its_own_grader() -> None:
    with pytest.raises(ValidationError, match="does not pass its numeric grader") as info:
        _task(answer="forty-two")
    assert info.value.errors()[0]["loc"] == ("grader",)
    with pytest.raises(ValidationError, match="does not pass its choice grader"):
        _task(answer="D", grader={"kind": "choice", "choices": ["A", "B"]})
    with pytest.raises(ValidationError, match="does not pass its regex grader"):
        _task(answer="abc", grader={"kind": "regex", "pattern": r"\d+"})


def test_llm_task_answer_is_not_self_graded() -> None:
    task = _task(answer="a rubric-graded answer", grader={"kind": "llm", "rubric": "1.0 if x"})
    assert task.grader.rubric == "1.0 if x"


@pytest.mark.parametrize("bad_id", ["", "has space", "a/b"])
def test_task_id_without_whitespace_or_slashes(bad_id: str) -> None:
    with pytest.raises(ValidationError, match="id must be non-empty"):
        _task(id=bad_id)


def test_solution_must_end_with_final_answer() -> None:
    with pytest.raises(ValidationError, match="last turn of a solution"):
        _task(solution=["<command>ls</command>"])
    assert _task(solution=["<command>ls</command>", "FINAL ANSWER: 42"]).solution[-1] == \
        "FINAL ANSWER: 42"


def test_trap_wrong_answer_must_grade_wrong() -> None:
    trap = {"description": "d", "careless_solution": ["FINAL ANSWER: 42.0"], "wrong_answer": "42.0"}
    with pytest.raises(ValidationError, match="grades as correct"):
        _task(trap=trap)
    assert _task(trap={**trap, "wrong_answer": "41"}).trap == Trap(
        description="d", careless_solution=("FINAL ANSWER: 42.0",), wrong_answer="41")


def test_missing_data_dir_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="not an existing directory"):
        _task(data_dir=tmp_path / "nope")


def test_data_files_lists_every_file_by_relative_posix_path(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.csv").write_text("x")
    (tmp_path / "sub" / "b.tsv.gz").write_bytes(b"y")
    files = _task(data_dir=tmp_path).data_files()
    assert files == {"a.csv": tmp_path / "a.csv", "sub/b.tsv.gz": tmp_path / "sub" / "b.tsv.gz"}
    assert all(p.is_absolute() for p in files.values())
    assert _task().data_files() == {}
