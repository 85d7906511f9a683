"""The analyst teacher: its episodes compute the answer, verify it and answer it right."""

from __future__ import annotations

import pytest

from training.analyst import AnalystTeacher
from training.envs import make_env
from vera_env.evaluation.fingerprints import fingerprint_kind
from vera_env.rollout import run_episode
from vera_env.tasks import TaskSource
from vera_env.tasks.builtin import TASK_TYPES, make_task

SEEDS = (0, 1, 2)
# Turn lengths in the tiny tokenizer (``training.tiny``), which counts about as SmolLM2
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
