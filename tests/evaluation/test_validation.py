"""Task validation: reference and careless solutions replayed through the real env."""

from __future__ import annotations

import pytest

from vera_env.evaluation.validation import strength_sample, validate_task, validate_tasks
from vera_env.rollout import EnvPool
from vera_env.spec import EnvSpec
from vera_env.tasks import Task, TaskSource

MEAN = ("<command>awk -F'\\t' 'NR>1 && $3!=-999 {s+=$3;n++} END{print s/n}' alcohol.txt"
        " > mean.txt; cat mean.txt</command>\n"
        'NODE kind=transform summary="mean drinks without the sentinel" artifact=mean.txt\n'
        "CHECK range \"mean is 5\" :: awk -F'\\t' 'NR>1 && $3!=-999 {s+=$3;n++} "
        "END{print (s/n==5) ? \"True\" : \"False\"}' alcohol.txt")
CARELESS = ("<command>awk -F'\\t' 'NR>1 {s+=$3;n++} END{print s/n}' alcohol.txt</command>",
            "FINAL ANSWER: -246.0")


def _task(alcohol_task: Task, **changes) -> Task:
    trap = {"description": "the -999 sentinel counted as a value",
            "careless_solution": CARELESS, "wrong_answer": "-246.0"}
    data = {**alcohol_task.model_dump(), "solution": (MEAN, "FINAL ANSWER: 5.0"),
            "trap": trap}
    return Task.model_validate({**data, **changes}).with_reference(alcohol_task.reference)


def _validate(tasks, strength=frozenset()):
    return validate_tasks(tasks, TaskSource(tasks, name="t"), strength_ids=set(strength),
                          spec=EnvSpec(max_steps=6))


def test_sound_task_passes_with_its_trap_biting(alcohol_task):
    task = _task(alcohol_task)
    (verdict,) = _validate([task], strength={task.id})
    assert verdict.status == "ok", verdict
    assert verdict.checks == "1/1" and verdict.discriminating == "1/1"
    assert verdict.careless == "-246.0 (wrong)"


def test_wrong_reference_answer_and_toothless_trap_fail_with_the_reason(alcohol_task):
    wrong = _task(alcohol_task, id="wrong", solution=(MEAN, "FINAL ANSWER: 7"))
    toothless = _task(alcohol_task, id="toothless",
                      trap={"description": "none", "careless_solution": ("FINAL ANSWER: 5",),
                            "wrong_answer": "6"})
    verdicts = _validate([wrong, toothless])
    assert [v.status for v in verdicts] == ["FAIL", "FAIL"]
    assert "graded wrong" in verdicts[0].note
    assert "the trap does not bite" in verdicts[1].note


def test_task_without_solution_is_skipped_not_failed(alcohol_task):
    source = TaskSource([alcohol_task], name="t")
    with EnvPool(EnvSpec(max_steps=3).build) as pool:
        verdict = validate_task(alcohol_task, source, pool, pool)
    assert verdict.status == "skip" and "no reference solution" in verdict.note


@pytest.mark.parametrize(("mode", "expected"), [
    ("all", {"seq.gc.easy.s0", "seq.gc.easy.s1", "tab.x.hard.s0", "mine"}),
    ("off", set()),
    ("first-seed", {"seq.gc.easy.s0", "tab.x.hard.s0", "mine"}),
])
def test_strength_sample_modes(alcohol_task, mode, expected):
    tasks = [alcohol_task.model_copy(update={"id": i})
             for i in ("seq.gc.easy.s0", "seq.gc.easy.s1", "tab.x.hard.s0", "mine")]
    assert strength_sample(tasks, mode) == expected
