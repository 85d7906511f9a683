"""The ``warmup`` difficulty: every type, small data, the reference right, the trap gone.

Warmup is the first rung of the curriculum: the same question and answer format on a few
dozen records, with the trap taken out of the data where it lives there, so that a small
model's first correct commands are rewarded. The reference solution must still replay
with every CHECK True and a correct answer; on the types without a trap the careless
solution must now be *right* (the trap really is gone); the three whose trap is the
format or the question keep it, and their careless answer stays wrong.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from solution_replay import STRENGTH_TESTED, replay

from vera_env.evaluation.validation import validate_tasks
from vera_env.tasks import TaskSource
from vera_env.tasks.builtin import (
    ALL_DIFFICULTIES,
    DIFFICULTIES,
    TASK_TYPES,
    builtin_ids,
    generate,
    parse_task_id,
    task_id,
)
from vera_env.verification.grading import grade

WARMUP = [task_id(t, "warmup", s) for t in TASK_TYPES for s in (0, 1, 2)]
TRAP_KEPT = {"mtx.knockout_gene", "mtx.doublets", "tab.fold_change"}
"""Types whose trap is the file format or the question itself, kept at warmup."""
MAX_BYTES = 16 * 1024
"""A warmup task's data, uncompressed, is at most 16 KiB (a matrix of ~1,300 lines;
every other type under 11 KiB and 200 lines)."""


def _raw_size(files: dict[str, bytes]) -> int:
    return sum(len(gzip.decompress(v) if k.endswith(".gz") else v) for k, v in files.items())


def test_warmup_is_a_difficulty_but_not_in_the_standard_sample() -> None:
    assert ALL_DIFFICULTIES[0] == "warmup" and "warmup" not in DIFFICULTIES
    assert parse_task_id("vcf.titv.warmup.s4") == ("vcf.titv", "warmup", 4)
    assert len(builtin_ids(("warmup",))) == len(TASK_TYPES)


@pytest.mark.parametrize("tid", WARMUP)
def test_warmup_data_is_small(tid: str) -> None:
    assert _raw_size(generate(tid).files) <= MAX_BYTES


@pytest.mark.parametrize("tid", WARMUP)
def test_warmup_reference_checks_pass_and_answer_grades_correct(tid: str, tmp_path: Path,
                                                                 built) -> None:
    task = built(tid)
    result = replay(task.solution, task.data_files(), tmp_path / "ws", "gawk")
    failed = [(name, last) for name, last in result.verdicts if last != "True"]
    assert result.verdicts and not failed, failed
    assert result.answer == task.answer
    assert [x for x in result.outputs[-1].splitlines() if x.strip()][-1].strip() == task.answer
    assert grade(task, result.answer).correct is True


@pytest.mark.parametrize("tid", WARMUP)
def test_warmup_careless_solution_right_where_trap_removed_wrong_where_kept(
        tid: str, tmp_path: Path, built) -> None:
    task, careless = built(tid), generate(tid).trap
    result = replay(careless.careless_solution, task.data_files(), tmp_path / "ws", "gawk")
    kept = parse_task_id(tid)[0] in TRAP_KEPT
    assert result.answer == careless.wrong_answer
    assert grade(task, result.answer).correct is not kept
    assert (task.trap is not None) is kept
    assert ("trap" in task.tags) is kept and "warmup" in task.tags


@pytest.mark.parametrize("task_type", sorted(TASK_TYPES))
def test_warmup_same_id_gives_identical_bytes_and_other_seeds_differ(task_type: str) -> None:
    a, b = generate(task_id(task_type, "warmup", 5)), generate(task_id(task_type, "warmup", 5))
    assert a.files == b.files and a.answer == b.answer
    assert generate(task_id(task_type, "warmup", 6)).files != a.files


def test_warmup_oracle_full_credit_in_the_sandbox_and_checks_discriminate(built) -> None:
    tasks = [built(task_id(t, "warmup", 1)) for t in TASK_TYPES]
    strong = {t.id for t in tasks if parse_task_id(t.id)[0] in STRENGTH_TESTED}
    verdicts = validate_tasks(tasks, TaskSource(tasks, name="warmup"), strength_ids=strong,
                              jobs=2)
    assert [v.status for v in verdicts] == ["ok"] * len(tasks), verdicts
    for task, verdict in zip(tasks, verdicts, strict=True):
        passed, total = map(int, verdict.checks.split("/"))
        assert passed == total >= 3, verdict
        if task.id in strong:  # every node earns (the status): one check each at least
            shown, tested = map(int, verdict.discriminating.split("/"))
            assert tested == total and shown >= 3, verdict
