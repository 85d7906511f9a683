"""The analyst teacher: its episodes compute the answer, verify it and answer it right."""

from __future__ import annotations

import pytest

from vera_env.evaluation.fingerprints import fingerprint_kind
from vera_env.rollout import Attempt, run_episode
from vera_env.spec import EnvSpec
from vera_env.tasks import TaskSource
from vera_env.tasks.builtin import TASK_TYPES, make_task
from vera_env.training.analyst import _SCRIPT, INTERMEDIATES, AnalystTeacher, analysis_command
from vera_env.training.collection import collect
from vera_env.training.envs import EnvOptions, make_env
from vera_env.training.starts import draw_starts
from vera_env.verification.rewards import RewardConfig

SEEDS = (0, 1)  # two data draws per type and difficulty; a third re-proved the same commands
# Turn lengths in the tiny tokenizer (``vera_env.training.tiny``), which counts about as SmolLM2
# does here (max 180 and 73 against SmolLM2's 204 and 76): the node and answer turns fit
# GRPO's ~120-token cap; the one-liner of the longest types does not yet.
MAX_NODE_TOKENS = 120
MAX_COMMAND_TOKENS = 200
# A node with the extra checks (``evidence``) fits the evaluation's 208 tokens a turn
# (``benchmarks/learning_curve.py --turn-tokens``); it measures at most 162.
MAX_EVIDENCE_NODE_TOKENS = 180
# Cheap with strength on (2-3 s an episode) and each with two earning intermediates
# (``benchmarks/results/teacher_evidence.json``).
EVIDENCE_TYPES = ("tab.survival_median", "vcf.titv")


def _checks(action: str) -> list[str]:
    return [line.split(" :: ", 1)[1] for line in action.splitlines()
            if line.startswith("CHECK ")]


@pytest.mark.parametrize("difficulty", ["warmup", "easy"])
@pytest.mark.parametrize("task_type", sorted(TASK_TYPES))
def test_analyst_teacher_episode_correct_verified_and_not_fingerprinting(
        task_type, difficulty, tokenizer):
    ids = [f"{task_type}.{difficulty}.s{seed}" for seed in SEEDS]
    tasks = TaskSource([make_task(i) for i in ids])
    env = make_env(tasks, EnvOptions(env_max_steps=3, wrappers=("gate", "forced"), reserve=1,
                                    observation_variant="compact"))
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
        assert actions[0].startswith("<command>cat > q.sh")
        assert "$(sh q.sh | sed -n 1p)" in actions[1] and "sed -n 2p" not in actions[1]


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
        assert first.action != row["actions"][1] and "$(sh q.sh | sed -n 1p)" in row["actions"][2]
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


def _evidence_play(share: float) -> dict[str, Attempt]:
    ids = [f"{task_type}.easy.s0" for task_type in EVIDENCE_TYPES]
    tasks = TaskSource([make_task(i) for i in ids])
    env = make_env(tasks, EnvOptions(env_max_steps=3, wrappers=("gate", "forced"), reserve=1,
                                    observation_variant="compact"),
                   reward=RewardConfig(strength=True))
    try:
        return {i: run_episode(env, AnalystTeacher(tasks, evidence=share), seed=0, task_id=i)
                for i in ids}
    finally:
        env.close()


@pytest.fixture(scope="module")
def evidence_episodes() -> dict[float, dict[str, Attempt]]:
    return {share: _evidence_play(share) for share in (1.0, 0.0)}


def test_analyst_evidence_node_checks_each_printed_line_with_the_value_shown(
        evidence_episodes, tokenizer):
    for task_id, attempt in evidence_episodes[1.0].items():
        command, node = (step.action for step in attempt.steps[:2])
        lines = len(INTERMEDIATES[".".join(task_id.split(".")[:2])]) + 1
        shown = attempt.steps[0].command_output.split()
        assert len(shown) == lines, (task_id, shown)
        assert _checks(node) == [f'test "$(sh q.sh | sed -n {k}p)" = "{value}" && echo True '
                                 "|| echo False" for k, value in enumerate(shown, start=1)]
        assert attempt.correct and evidence_episodes[0.0][task_id].steps[0].action == command
        assert len(tokenizer(node).input_ids) <= MAX_EVIDENCE_NODE_TOKENS


def test_analyst_evidence_extra_checks_earn_more_verification_with_strength_on(
        evidence_episodes):
    for task_id, extra in evidence_episodes[1.0].items():
        single = evidence_episodes[0.0][task_id]
        assert extra.correct and single.correct
        assert extra.verification_reward > single.verification_reward > 0, task_id
        assert len(_checks(single.steps[1].action)) == 1
        # the answer's check and one intermediate at least (an intermediate that is a
        # count the controls barely move cannot be told from a gated pin of it)
        assert sum(check.earns for check in extra.steps[1].checks) >= 2, task_id


def test_analyst_evidence_unreadable_intermediates_leave_the_answer_check_alone():
    task = make_task("tab.sentinel_mean.easy.s0")
    tasks = TaskSource([task])
    command = _SCRIPT.format(analysis_command("tab.sentinel_mean", task.question))
    info = {"task_id": task.id, "prefill": ""}
    teacher = AnalystTeacher(tasks, evidence=1.0)
    node = teacher.act(f"$ {command}\n3612.78\n45\n\nSteps left: 2.", info)
    assert _checks(node)[1] == 'test "$(sh q.sh | sed -n 2p)" = "45" && echo True || echo False'
    broken = teacher.act(f"$ {command}\n3612.78\n[stderr] awk: oops\n", info)
    assert len(_checks(broken)) == 1 and "3612.78" in _checks(broken)[0]
    single = AnalystTeacher(tasks).act(f"$ {command}\n3612.78\n45\n", info)
    assert len(_checks(single)) == 1


def test_analyst_evidence_share_is_chosen_by_task_id_not_family_and_validated():
    ids = [f"{task_type}.easy.s{seed}" for task_type in sorted(TASK_TYPES) for seed in range(3)]
    tasks = TaskSource([make_task(i) for i in ids])
    chosen = [AnalystTeacher(tasks, evidence=0.5).extra_checks(i) for i in ids]
    assert 9 <= sum(chosen) <= 30  # about half, the same every time
    by_family = {i.rsplit(".", 2)[0]: set() for i in ids}
    for task_id, extra in zip(ids, chosen, strict=True):
        by_family[task_id.rsplit(".", 2)[0]].add(extra)
    assert any(len(modes) == 2 for modes in by_family.values())  # within one family, both
    assert all(AnalystTeacher(tasks, evidence=1.0).extra_checks(i) for i in ids)
    assert not any(AnalystTeacher(tasks, repair=1.0).extra_checks(i) for i in ids)
    with pytest.raises(ValueError, match="evidence is a share"):
        AnalystTeacher(tasks, evidence=-0.1)
