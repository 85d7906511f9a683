"""The analyst teacher: its episodes compute the answer, verify it and answer it right."""

from __future__ import annotations

import pytest

from vera_env.evaluation.fingerprints import fingerprint_kind
from vera_env.rollout import Attempt, run_episode
from vera_env.spec import EnvSpec
from vera_env.tasks import TaskSource
from vera_env.tasks.builtin import TASK_TYPES, make_task
from vera_env.training.analyst import _SCRIPT, AnalystTeacher, analysis_command
from vera_env.training.collect import collect
from vera_env.training.envs import make_env
from vera_env.training.episodes import draw_starts

SEEDS = (0, 1)  # two data draws per type and difficulty; a third re-proved the same commands
# Turn lengths in the tiny tokenizer (``vera_env.training.tiny``), which counts about as SmolLM2
# does here (max 180 and 73 against SmolLM2's 204 and 76): the node and answer turns fit
# GRPO's ~120-token cap; the one-liner of the longest types does not yet.
MAX_NODE_TOKENS = 120
MAX_COMMAND_TOKENS = 200


def _checks(action: str) -> list[str]:
    return [line.split(" :: ", 1)[1] for line in action.splitlines()
            if line.startswith("CHECK ")]


@pytest.mark.parametrize("difficulty", ["warmup", "easy"])
@pytest.mark.parametrize("task_type", sorted(TASK_TYPES))
def test_analyst_teacher_episode_correct_verified_and_not_fingerprinting(
        task_type, difficulty, tokenizer):
    ids = [f"{task_type}.{difficulty}.s{seed}" for seed in SEEDS]
    tasks = TaskSource([make_task(i) for i in ids])
    env = make_env(tasks, max_steps=3, wrappers=("gate", "forced"), reserve=1,
                   observation_variant="compact")
    try:
        attempts = [run_episode(env, AnalystTeacher(tasks), seed=0, task_id=i) for i in ids]
    finally:
        env.close()
    for task_id, attempt in zip(ids, attempts, strict=True):
        actions = [step.action for step in attempt.steps]
        assert attempt.correct, (task_id, actions, attempt.answer)
        assert attempt.verification_reward > 0, (task_id, actions)
        checks = [c for action in actions for c in _checks(action)]
        assert checks and all(fingerprint_kind(c, actions[0]) is None for c in checks)
        lengths = [len(tokenizer(a).input_ids) for a in actions]
        assert lengths[0] <= MAX_COMMAND_TOKENS and max(lengths[1:]) <= MAX_NODE_TOKENS
        # The check re-runs the saved computation; it does not repeat a pinned number.
        assert actions[0].startswith("<command>cat > q.sh") and "$(sh q.sh)" in actions[1]


def test_analyst_teacher_unreadable_output_reruns_then_answers_without_the_reference():
    task = make_task("vcf.titv.warmup.s0")
    teacher = AnalystTeacher(TaskSource([task]))
    info = {"task_id": task.id, "step": 1, "prefill": ""}
    assert teacher.act("$ something else\nerror", info).startswith("<command>cat > q.sh")
    answer = teacher.act("no output", {**info, "step": 2, "prefill": "FINAL ANSWER: "})
    assert answer == "FINAL ANSWER: unknown" and str(task.answer) not in answer


@pytest.mark.parametrize("difficulty", ["warmup", "easy"])
def test_analyst_repair_fails_first_then_repairs_and_marks_the_mistake_unlearned(difficulty):
    ids = [f"{task_type}.{difficulty}.s0" for task_type in sorted(TASK_TYPES)]
    tasks = TaskSource([make_task(i) for i in ids])
    spec = EnvSpec(max_steps=4, wrappers=("gate", "forced"), reserve=1,
                   observation_variant="compact")
    rows = collect(tasks, AnalystTeacher(tasks, repair=1.0), draw_starts(ids, len(ids)),
                   make_env_fn=lambda: spec.build(tasks=tasks), concurrency=2)
    for row in rows:
        attempt = Attempt.from_json(row["attempt"])
        first = attempt.steps[0]
        assert row["correct"] and row["verification_reward"] > 0, (row["task_id"], row["actions"])
        assert row["learn"] == [False, True, True, True], row["task_id"]
        # The mistake fails with an error the observation shows; the next turn is the
        # teacher's own command, which re-writes q.sh for the node's check.
        assert "[exit " in row["observations"][1] and "[stderr]" in row["observations"][1]
        assert first.action != row["actions"][1] and "$(sh q.sh)" in row["actions"][2]
        assert row["actions"][1] == ("<command>" + _SCRIPT.format(
            analysis_command(".".join(row["task_id"].split(".")[:2]),
                             tasks.get(row["task_id"]).question)) + "</command>")


def test_analyst_repair_share_is_chosen_by_task_id_and_validated():
    ids = [f"tab.sentinel_mean.easy.s{seed}" for seed in range(40)]
    tasks = TaskSource([make_task(i) for i in ids])
    teacher = AnalystTeacher(tasks, repair=0.5)
    first = [teacher.act("QUESTION", {"task_id": i, "prefill": ""}) for i in ids]
    mistaken = [teacher.deliberate_mistake(a, {"task_id": i}) for a, i in zip(first, ids, strict=True)]
    assert 8 <= sum(mistaken) <= 32  # about half, the same every time
    assert mistaken == [AnalystTeacher(tasks, repair=0.5).deliberate_mistake(a, {"task_id": i})
                        for a, i in zip(first, ids, strict=True)]
    assert not any(AnalystTeacher(tasks).deliberate_mistake(a, {"task_id": i})
                   for a, i in zip(first, ids, strict=True))
    with pytest.raises(ValueError, match="share"):
        AnalystTeacher(tasks, repair=1.5)
