"""Every builtin type, at every difficulty, through the real environment and sandbox.

The oracle (``policies.OraclePolicy``) must get full credit -- correct answer, every check
passed -- and the trap's careless solution must land on the trap's wrong answer and be
graded wrong, exactly as ``vera-env tasks validate`` decides it. Strength testing (every
check re-run against mutants of its data) is costly, so it runs here on one type per
family; ``vera-env tasks validate builtin`` runs it on every type and difficulty.
"""

from __future__ import annotations

import pytest
from solution_replay import STRENGTH_TESTED

from vera_env.evaluation.validation import Verdict, validate_tasks
from vera_env.tasks import TaskSource
from vera_env.tasks.builtin import DIFFICULTIES, TASK_TYPES, task_id

_SEEDS = {"easy": 4, "medium": 1, "hard": 2}


def _validate(tasks: list, *, strength: bool) -> list[Verdict]:
    source = TaskSource(tasks, name="sample")
    strong = {t.id for t in tasks} if strength else set()
    return validate_tasks(tasks, source, strength_ids=strong, jobs=2)  # work is in subprocesses


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_oracle_full_credit_and_careless_wrong_on_every_type(difficulty: str, built) -> None:
    tasks = [built(task_id(t, difficulty, _SEEDS[difficulty])) for t in TASK_TYPES]
    verdicts = _validate(tasks, strength=False)
    failed = [v for v in verdicts if v.status != "ok"]
    assert not failed, failed
    for task, verdict in zip(tasks, verdicts, strict=True):
        passed, total = map(int, verdict.checks.split("/"))
        assert passed == total >= 3, verdict
        assert verdict.careless == f"{task.trap.wrong_answer} (wrong)", verdict


def test_reference_checks_discriminate_under_strength_testing(built) -> None:
    tasks = [built(task_id(t, "easy", 0)) for t in sorted(STRENGTH_TESTED)]
    verdicts = _validate(tasks, strength=True)
    assert [v.status for v in verdicts] == ["ok"] * 4, verdicts  # every node earns
    for verdict in verdicts:
        shown, tested = map(int, verdict.discriminating.split("/"))
        assert verdict.checks == f"{tested}/{tested}", verdict
        # Not every check: one that counts a value of one column the controls never move
        # cannot be told from a pin of that column gated on its hash (``fingerprints``).
        assert 3 * shown >= 2 * tested, verdict
