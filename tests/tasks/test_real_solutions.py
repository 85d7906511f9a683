"""Reference and careless solutions of every real type, replayed with bash outside the sandbox.

As for the builtin families (`test_builtin_solutions`): every CHECK must print True on
the real files, the answer must be what the last command printed and grade correct, and
the careless solution must print the trap's wrong answer, graded wrong. Replayed under
mawk, so nothing depends on gawk extensions (FLAG bits are tested with arithmetic, not
``and()``). `test_real_env` replays the same turns through the sandbox.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from solution_replay import awk_variants, replay

from vera_env.tasks.real import REAL_TYPES, make_real_task, real_id
from vera_env.verification.grading import grade

AWK = "mawk" if "mawk" in awk_variants() else "gawk"


def _last_line(text: str) -> str:
    return [line for line in text.splitlines() if line.strip()][-1].strip()


@pytest.mark.parametrize("tid", [real_id(t, s) for t in REAL_TYPES for s in (0, 1)])
def test_reference_solution_checks_pass_and_answer_is_computed(tid: str, tmp_path: Path) -> None:
    task = make_real_task(tid)
    (tmp_path / "ws").mkdir()
    result = replay(task.solution, task.data_files(), tmp_path / "ws", AWK)
    assert result.verdicts
    assert [v for v in result.verdicts if v[1] != "True"] == []
    assert result.answer == task.answer == _last_line(result.outputs[-1])
    assert grade(task, result.answer).correct is True


@pytest.mark.parametrize("tid", [real_id(t) for t in REAL_TYPES])
def test_careless_solution_prints_the_trap_answer_graded_wrong(tid: str, tmp_path: Path) -> None:
    task = make_real_task(tid)
    (tmp_path / "ws").mkdir()
    result = replay(task.trap.careless_solution, task.data_files(), tmp_path / "ws", AWK)
    assert result.answer == task.trap.wrong_answer == _last_line(result.outputs[-1])
    assert grade(task, result.answer).correct is False
