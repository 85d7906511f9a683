"""rescore_run: stored answers graded again with the run's own reward weights."""

from __future__ import annotations

import json

import pytest

from vera_env.evaluation.rescore import rescore_run
from vera_env.evaluation.rundir import RunDir, RunSettings, append
from vera_env.records import RewardPartsRecord, StepRecord
from vera_env.rollout import Attempt
from vera_env.spec import EnvSpec
from vera_env.tasks import TaskSource


def test_rescore_uses_the_runs_correctness_weight_not_the_default(alcohol_task, tmp_path):
    run = RunDir(tmp_path / "run")
    spec = EnvSpec(tasks="suite", reward={"correctness_weight": 2.0})
    run.start(RunSettings(policy="openai", model="m", task_ids=(alcohol_task.id,), attempts=1,
                          seed=0, temperature=0.0, max_tokens=8, env=spec), resume=False)
    step = StepRecord(reward=0.1, reward_parts=RewardPartsRecord(verification=0.1,
                                                                 correctness=0.0))
    stored = Attempt(task_id=alcohol_task.id, answer="5", correct=False, score=0.1,
                     steps=[step])
    with run.open_results() as handle:
        append(handle, stored)
    summary, changes = rescore_run(run, TaskSource([alcohol_task], name="t"), tmp_path / "out")
    (row,) = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").open()]
    assert row["correct"] is True and row["score"] == pytest.approx(0.1 + 2.0)
    assert len(changes) == 1 and summary.accuracy.rate == 1.0
