"""Dynamic sampling (``--redraw-uninformative``): groups with no advantage are replayed
on redrawn tasks before the optimizer steps, and never trained on.

A real tiny run through the env and sandbox on two warmup tasks, every turn scripted so
each group's rewards are known: on ``tab.sentinel_mean`` member 0 answers right and
member 1 wrong (a mixed group: an advantage), on ``seq.gc_content`` both answer wrong
(all equal: none).
"""

from __future__ import annotations

import io
import json
import re
from collections import defaultdict

import numpy as np
import pytest
from training_turns import TWO_TURN_RUN, train_scripted

from vera_env.tasks.builtin import builtin_source
from vera_env.training.arguments import parse_args
from vera_env.training.lockstep import LockstepRollout
from vera_env.training.phase_log import PhaseLog
from vera_env.training.scripts import grpo
from vera_env.training.starts import DRAWN, Start, format_start, parse_start

MIXED, DEAD = "tab.sentinel_mean", "seq.gc_content"
REDRAWS = 3


@pytest.fixture(scope="module")
def run(tokenizer, tmp_path_factory):
    from vera_env.training.tiny import tiny_model

    tasks = builtin_source(difficulties=("warmup",), seeds=(0,), types=(MIXED, DEAD))
    wrong = "FINAL ANSWER: -98765"
    plans = {}
    for task in (tasks.get(t) for t in tasks.ids()):
        right = f"FINAL ANSWER: {task.answer}" if task.id.startswith(MIXED) else wrong
        plans[task.question] = {0: [(None, right)], 1: [(None, wrong)]}
    folder = tmp_path_factory.mktemp("redraw")
    args = parse_args(grpo.Args, [
        *TWO_TURN_RUN, "--max-turn-tokens", "24", "--num-prompts", "4", "--train-steps", "4",
        "--seed", "3",
        "--redraw-uninformative", str(REDRAWS), "--output-dir", str(folder),
        "--dump-rollouts", str(folder / "dump.jsonl"), "--no-save-final"])
    lines = io.StringIO()
    trainer = train_scripted(args, tasks, tiny_model(tokenizer), tokenizer, plans,
                             log=PhaseLog("grpo", stream=lines))
    episodes: dict[int, list[dict]] = defaultdict(list)
    for line in (folder / "dump.jsonl").read_text().splitlines():
        record = json.loads(line)
        episodes[record["episode"]].append(record)
    groups: dict[int, list[dict]] = defaultdict(list)
    for turns in episodes.values():
        groups[turns[0]["group"]].append(turns[0])
    logged = [h["stepwise/redrawn_groups"] for h in trainer.state.log_history
              if "stepwise/redrawn_groups" in h]
    return {"groups": groups, "logged": logged, "phases": lines.getvalue()}


def test_only_groups_without_advantage_are_redrawn_and_none_is_trained(run):
    redrawn = [g for g in run["groups"].values() if g[0]["redrawn"]]
    assert redrawn, "the seeded run must redraw at least one group"
    for group in redrawn:
        assert len(group) == 2 and len({r["task_id"] for r in group}) == 1
        assert group[0]["task_id"].startswith(DEAD)
        assert [r["correct"] for r in group] == [False, False]
        assert all(r["advantage"] is None and not r["trained"] for r in group)


def test_every_step_trains_one_group_and_redraws_at_most_the_cap(run):
    kept = [g for g in run["groups"].values() if not g[0]["redrawn"]]
    by_step: dict[int, int] = defaultdict(int)
    for group in run["groups"].values():
        by_step[group[0]["step"]] += group[0]["redrawn"]
    assert len(kept) == 4 and sorted(by_step) == [0, 1, 2, 3]
    assert all(n <= REDRAWS for n in by_step.values())
    assert run["logged"] == [float(by_step[s]) for s in sorted(by_step)]
    for group in kept:  # a mixed group is trained with opposite advantages
        if group[0]["task_id"].startswith(MIXED):
            assert [r["correct"] for r in group] == [True, False]
            assert group[0]["advantage"] > 0 > group[1]["advantage"]
        else:  # a dead group is kept only once the redraws ran out
            assert by_step[group[0]["step"]] == REDRAWS


def test_rollout_redraw_keeps_deferred_starts_and_redraws_fixed_ones():
    tasks = builtin_source(difficulties=("warmup",), seeds=range(5), types=(MIXED, DEAD))
    rollout = LockstepRollout(tasks, grpo.Args().env_spec(), env_workers=1)
    try:
        deferred = format_start(Start(f"{DRAWN}4", 11))
        assert rollout.redraw(deferred, np.random.default_rng(0)) == deferred
        fixed = format_start(Start(tasks.ids()[0], 11))
        drawn = [parse_start(rollout.redraw(fixed, np.random.default_rng(k))) for k in range(20)]
        assert {s.seed for s in drawn} == {11}
        assert {s.task_id for s in drawn} <= set(tasks.ids()) and len({s.task_id for s in drawn}) > 3
    finally:
        rollout.close()


def test_redraws_refused_with_reward_to_go_or_below_zero(tokenizer, tmp_path):
    from vera_env.training.tiny import tiny_model

    tasks = builtin_source(difficulties=("warmup",), seeds=(0,), types=(MIXED,))
    for extra in (["--redraw-uninformative", "1", "--advantage", "reward_to_go"],
                  ["--redraw-uninformative", "-1"]):
        args = parse_args(grpo.Args, [*TWO_TURN_RUN, "--num-prompts", "2", *extra,
                                      "--output-dir", str(tmp_path)])
        with pytest.raises(ValueError, match="redraws must be >= 0 and needs advantage='episode'"):
            grpo.build_trainer(args, tasks, tiny_model(tokenizer), tokenizer)



def test_every_redraw_round_is_announced_with_the_groups_it_replays(run):
    announced = [(int(step), int(n)) for step, n in re.findall(
        r"step (\d+)/4: replaying (\d+) group\(s\) with no advantage", run["phases"])]
    assert announced and sum(n for _, n in announced) == sum(run["logged"])
    per_step = defaultdict(int)
    for step, n in announced:
        per_step[step - 1] += n
    assert [per_step[s] for s in range(4)] == run["logged"]
