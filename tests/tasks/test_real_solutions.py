"""Reference and careless solutions of every real type, replayed with bash outside the sandbox.

As for the builtin families (`test_builtin_solutions`): every CHECK must print True on
the real files, the answer must be what the last command printed and grade correct, and
the careless solution must print the trap's wrong answer, graded wrong. Replayed under
mawk, so nothing depends on gawk extensions (FLAG bits are tested with arithmetic, not
``and()``). `test_real_env` replays the same turns through the sandbox.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from solution_replay import awk_variants, parse_turn, replay

from vera_env.tasks.real import REAL_TYPES, make_real_task, real_id, real_instance
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


@pytest.mark.parametrize("tid", [real_id(t) for t in REAL_TYPES])
def test_reference_solution_checks_at_most_four_nodes_with_two_facts_or_more(tid: str) -> None:
    """Strength rewards the first four nodes with a passing check, each by its distinct
    pieces of evidence: a reference spreads its recounts over at most four nodes, and
    every node recounts two facts or more (one check per fact, no check repeated)."""
    checked = [t.checks for t in map(parse_turn, make_real_task(tid).solution) if t.checks]
    assert 2 <= len(checked) <= 4
    for checks in checked:
        commands = [command for _, _, command in checks]
        assert len(commands) >= 2 and len(set(commands)) == len(commands)


@pytest.mark.parametrize("tid", [real_id(t, s) for t in REAL_TYPES for s in (0, 1)])
def test_census_counts_what_the_question_reads_in_the_staged_file(tid: str,
                                                                 tmp_path: Path) -> None:
    built = real_instance(tid)
    if built.reads is None:  # binary primary files (BAM, h5ad) are never cleaned
        assert built.primary.endswith((".bam", ".h5ad"))
        return
    for name, path in make_real_task(tid).data_files().items():
        (tmp_path / name).write_bytes(path.read_bytes())
    out = subprocess.run(["bash", "-c", built.reads.command], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    assert int(out) == built.reads.value > 0
