"""Reference and careless solutions of every builtin type, run for real with bash.

Each reference solution must: parse as wire-format turns, have every CHECK print True on
the real data, answer exactly what its last command printed, grade correct, and have
checks that fail when a derived file is wrong. Each careless solution must land on the
trap's wrong answer. The sandbox's awk is gawk (`test_builtin_env` replays every type
there), so these replays run under mawk as well: solutions must not depend on gawk
extensions, or they break on the many systems whose awk is mawk.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from solution_replay import (
    STRENGTH_TESTED,
    awk_variants,
    check_fails_on_some_mutant,
    parse_turn,
    replay,
)

from vera_env.tasks.builtin import TASK_TYPES, task_id
from vera_env.verification.grading import grade
from vera_env.wire.answers import answer_is_usable
from vera_env.wire.protocol import parse_emission

AWKS = awk_variants()
PORTABLE = [a for a in AWKS if a == "mawk"] or AWKS
REPLAYED = [task_id(t, "easy", s) for t in TASK_TYPES for s in (0, 1)]


def _last_line(text: str) -> str:
    return [line for line in text.splitlines() if line.strip()][-1].strip()


def test_both_awks_are_available_to_prove_portability() -> None:
    assert "gawk" in AWKS and "mawk" in AWKS, f"found only {AWKS}"


@pytest.mark.parametrize("awk", PORTABLE)
@pytest.mark.parametrize("tid", REPLAYED)
def test_reference_solution_checks_pass_and_answer_grades_correct(
        tid: str, awk: str, tmp_path: Path, built) -> None:
    task = built(tid)
    workdir = tmp_path / "ws"
    workdir.mkdir()
    result = replay(task.solution, task.data_files(), workdir, awk)
    assert result.verdicts, "a reference solution must declare checks"
    failed = [(name, last) for name, last in result.verdicts if last != "True"]
    assert not failed, failed
    assert result.answer == task.answer
    assert _last_line(result.outputs[-1]) == task.answer, "answer not computed by the commands"
    assert grade(task, result.answer).correct is True


@pytest.mark.parametrize("awk", PORTABLE)
@pytest.mark.parametrize("tid", REPLAYED)
def test_careless_solution_lands_on_the_trap(tid: str, awk: str, tmp_path: Path,
                                             built) -> None:
    task = built(tid)
    assert task.trap is not None
    workdir = tmp_path / "ws"
    workdir.mkdir()
    result = replay(task.trap.careless_solution, task.data_files(), workdir, awk)
    assert result.answer == task.trap.wrong_answer
    assert _last_line(result.outputs[-1]) == task.trap.wrong_answer
    assert grade(task, result.answer).correct is False


# Types whose checks test_builtin_env strength-tests for real are left out here.
@pytest.mark.parametrize("tid", [task_id(t) for t in TASK_TYPES if t not in STRENGTH_TESTED])
def test_every_reference_check_fails_when_a_derived_file_is_wrong(tid: str, tmp_path: Path,
                                                                 built) -> None:
    task = built(tid)
    workdir = tmp_path / "ws"
    workdir.mkdir()
    replay(task.solution, task.data_files(), workdir, "gawk")
    derived = sorted(p for p in workdir.rglob("*")
                     if p.is_file() and p.relative_to(workdir).as_posix() not in task.data_files())
    assert derived
    for text in task.solution:
        for _, name, command in parse_turn(text).checks:
            assert check_fails_on_some_mutant(command, workdir, derived), \
                f"check {name!r} still passes on every mutant: it does not test the analysis"


@pytest.mark.parametrize("tid", [task_id(t) for t in TASK_TYPES])
def test_solution_turns_are_wire_format(tid: str, built) -> None:
    task = built(tid)
    turns = [parse_turn(t) for t in task.solution]
    assert turns[-1].answer == task.answer and not turns[-1].command
    assert all(not t.answer for t in turns[:-1])
    nodes = [t.node for t in turns if t.node]
    assert len(nodes) >= 2
    for i, node in enumerate(nodes[1:], start=2):  # parents name an earlier node
        parents = node.split("parents=")[1].split()[0]
        assert all(int(p.removeprefix("n")) < i for p in parents.split(","))


@pytest.mark.parametrize("tid", [task_id(t) for t in TASK_TYPES])
def test_every_turn_is_accepted_by_the_protocol_parser(tid: str, built) -> None:
    task = built(tid)
    assert task.trap is not None
    for turns in (task.solution, task.trap.careless_solution):
        for text in turns:
            emission, mine = parse_emission(text), parse_turn(text)
            assert emission.error == "", (text, emission.error)
            assert emission.command == mine.command.strip()
            assert [c.command for c in emission.checks] == [c for _, _, c in mine.checks]
            assert emission.answer == mine.answer
        assert answer_is_usable(parse_emission(turns[-1]).answer)
