"""``vera_env.training.scripts.grpo`` on a ``Curriculum``: tasks drawn when played, outcomes fed back.

A dataset built up front cannot follow pass rates that the run itself produces, so a
curriculum's starts are deferred (``drawn:K``) and drawn by the rollout the first time
slot K is played; TRL plays each slot once per group member, and the group must share
its task or its advantages compare different questions.
"""

from __future__ import annotations

import json

import pytest
from stepwise_sampler import StepScripted
from training_turns import TWO_TURN_RUN

from vera_env.tasks import Curriculum, curriculum_source
from vera_env.training.arguments import parse_args
from vera_env.training.envs import EnvOptions, task_source
from vera_env.training.lockstep import LockstepRollout
from vera_env.training.resume import fit
from vera_env.training.samplers import trainer_sampler
from vera_env.training.scripts import grpo
from vera_env.training.starts import DRAWN, Start, build_dataset

TYPES = ("tab.sentinel_mean", "seq.gc_content")


def _curriculum():
    return curriculum_source(seeds=range(3), types=TYPES, difficulties=("easy",), seed=1)


def test_build_dataset_on_curriculum_defers_every_task():
    data = build_dataset(_curriculum(), 5, seed=0)
    assert [t.startswith(DRAWN) for t in data["task_id"]] == [True] * 5
    assert len(set(data["task_id"])) == 5  # one slot per prompt


def test_grpo_curriculum_start_flag_reaches_the_source():
    args = parse_args(grpo.Args, ["--tasks", "curriculum", "--difficulties", "easy", "medium",
                                  "--curriculum-start", "medium", "--num-prompts", "2"])
    tasks = task_source(args.tasks, args.difficulties, args.num_prompts, args.curriculum_start)
    assert isinstance(tasks, Curriculum)
    assert {tasks.level(t) for t in ("seq.gc_content", "vcf.titv")} == {"medium"}
    assert parse_args(grpo.Args, []).curriculum_start is None


def test_build_dataset_on_plain_source_draws_up_front():
    from vera_env.tasks.builtin import builtin_source

    data = build_dataset(builtin_source(seeds=range(2), types=TYPES), 3, seed=0)
    assert not any(t.startswith(DRAWN) for t in data["task_id"])


def test_rollout_refuses_a_deferred_start_from_a_source_that_does_not_draw():
    from vera_env.tasks.builtin import builtin_source

    tasks = builtin_source(seeds=range(1), types=TYPES)
    rollout = LockstepRollout(tasks, EnvOptions(env_max_steps=2).env_spec(), env_workers=1)
    try:
        with pytest.raises(ValueError, match="needs a task source that draws"):
            rollout._resolve(Start(f"{DRAWN}0", 1), {})
        assert rollout._resolve(Start(tasks.ids()[0], 1), {}) == Start(tasks.ids()[0], 1)
    finally:
        rollout.close()


def test_rollout_resolve_gives_a_group_one_task_and_slots_fresh_draws():
    tasks = _curriculum()
    rollout = LockstepRollout(tasks, grpo.Args().env_spec(), env_workers=1)
    try:
        batch: dict[str, str] = {}
        group = [rollout._resolve(Start(f"{DRAWN}0", 7), batch) for _ in range(4)]
        assert len({s.task_id for s in group}) == 1 and group[0].seed == 7
        assert group[0].task_id.split(".")[2] == "warmup"  # the ladder's first rung
        others = {rollout._resolve(Start(f"{DRAWN}{k}", k), batch).task_id for k in range(1, 30)}
        assert len(others) > 1  # each slot draws its own task
        later = {rollout._resolve(Start(f"{DRAWN}0", 7), {}).task_id for _ in range(30)}
        assert len(later) > 1  # the same slot in a later batch (epoch) draws again
        plain = Start("seq.gc_content.easy.s1", 3)
        assert rollout._resolve(plain, batch) == plain
    finally:
        rollout.close()


def test_grpo_on_curriculum_plays_drawn_tasks_and_feeds_outcomes_back(tmp_path, tokenizer):
    from vera_env.training.tiny import tiny_model

    tasks = _curriculum()
    plans = {tasks.get(t).question: {0: [(None, f"FINAL ANSWER: {tasks.get(t).answer}")]}
             for t in tasks.ids() if ".warmup." in t}
    args = parse_args(grpo.Args, [
        *TWO_TURN_RUN, "--num-prompts", "4", "--train-steps", "2", "--output-dir",
        str(tmp_path), "--dump-rollouts", str(tmp_path / "dump.jsonl"), "--no-save-final"])
    trainer, rollout = grpo.build_trainer(args, tasks, tiny_model(tokenizer), tokenizer)
    rollout._sampler_factory = lambda t: StepScripted(trainer_sampler(t), tokenizer, plans,
                                                      first="Steps left: 2.", model_tokens=8)
    before = json.dumps(tasks.state_dict()["outcomes"], sort_keys=True)
    try:
        fit(trainer, args.output_dir, resume=False, tasks=tasks)
    finally:
        rollout.close()
    played = {json.loads(line)["task_id"]
              for line in (tmp_path / "dump.jsonl").read_text().splitlines()}
    assert played and all(".warmup." in t for t in played)  # drawn from the first rung
    outcomes = tasks.state_dict()["outcomes"]
    assert json.dumps(outcomes, sort_keys=True) != before
    assert sum(len(v) for v in outcomes.values()) == 4  # 2 steps x 2 episodes, each once
