"""Re-grade the answers of a stored run without rerunning a single episode.

Episodes are expensive (a model, minutes of sandbox time) and grading is cheap, and the
grader is the part most often revised after the fact: a tolerance too tight, a set
answer written with another separator, an exact grader replaced by a rubric judge
(``--grader '{"kind": "llm", "rubric": "Same value as {truth}"}'`` with a judge endpoint
grades every answer with ``grading.RubricJudge``, ``{truth}`` standing for each task's
ground truth).
Re-scoring reads ``results.jsonl``, grades each stored answer again — with the tasks'
current graders, or with one grader given for all — and writes a new results file and
summary beside the old ones, which stay untouched, plus ``changes.jsonl`` listing every
verdict that moved.

What is not re-graded: exclusions (a provider or sandbox fault has no answer to judge)
and attempts with no usable answer (they stay wrong). The verification part of the
score is the harness's measurement and is kept; only the correctness part changes.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from vera_env.evaluation.metrics import EXCLUDED_STATUSES, Summary, latest_attempts, summarise
from vera_env.evaluation.rundir import RunDir, write_atomic
from vera_env.rollout import Attempt
from vera_env.tasks import GraderSpec, TaskSource
from vera_env.verification.grading import Judge, grade
from vera_env.verification.rewards import RewardConfig, RewardLedger
from vera_env.wire.text import json_line

__all__ = ["TRUTH", "Change", "rescore_attempt", "rescore_run"]

TRUTH = "{truth}"   # in a --grader rubric: replaced by each task's ground truth


@dataclasses.dataclass(frozen=True, slots=True)
class Change:
    """One verdict that moved."""

    task_id: str
    attempt_index: int
    answer: str
    before: bool | None
    after: bool | None
    detail: str


def rescore_attempt(attempt: Attempt, source: TaskSource, *, grader: GraderSpec | None = None,
                    judge: Judge | None = None, correctness_weight: float = 1.0
                    ) -> tuple[Attempt, str]:
    """A copy of ``attempt`` graded again, and the grader's detail ("" if not re-graded).

    Raises:
        KeyError: The task is not in ``source``.
        GraderError: The grader cannot decide (a judge outage, an ``llm`` grader and no
            judge); ``rescore_run`` then writes nothing.
    """
    if attempt.status in EXCLUDED_STATUSES or not attempt.answer:
        return dataclasses.replace(attempt), ""
    task = source.get(attempt.task_id)
    if grader is not None:
        if grader.rubric and TRUTH in grader.rubric:
            grader = grader.model_copy(
                update={"rubric": grader.rubric.replace(TRUTH, task.answer)})
        task = task.model_copy(update={"grader": grader})
    verdict = grade(task, attempt.answer, judge)
    old_part = _correctness_part(attempt)
    ledger = RewardLedger(RewardConfig(correctness_weight=correctness_weight))
    new_part = ledger.correctness(verdict.correct) or 0.0
    measured = sum(step.reward for step in attempt.steps) - (old_part or 0.0)
    new = dataclasses.replace(attempt, correct=verdict.correct, unscorable=False,
                              score=measured + new_part)
    return new, verdict.detail


def _correctness_part(attempt: Attempt) -> float | None:
    for step in reversed(attempt.steps):
        if step.reward_parts.correctness is not None:
            return step.reward_parts.correctness
    return None


def rescore_run(run: RunDir, source: TaskSource, out: Path, *,
                grader: GraderSpec | None = None, judge: Judge | None = None
                ) -> tuple[Summary, list[Change]]:
    """Re-grade every attempt of ``run``; write ``out``/results.jsonl, summary.json, changes.jsonl.

    Returns:
        The new summary and the verdicts that moved.
    """
    settings = run.settings()
    weight = settings.env.reward.correctness_weight  # the run's reward, not the default
    rescored: list[Attempt] = []
    changes: list[Change] = []
    for attempt in latest_attempts(run.attempts()):
        new, detail = rescore_attempt(attempt, source, grader=grader, judge=judge,
                                      correctness_weight=weight)
        rescored.append(new)
        if new.correct != attempt.correct:
            changes.append(Change(attempt.task_id, attempt.attempt_index, attempt.answer,
                                  attempt.correct, new.correct, detail))
    summary = summarise(rescored, settings.attempts)
    written = {**summary.to_dict(), "settings": settings.to_dict(),
               "rescored": {"from": str(run.path), "grader": grader.model_dump() if grader
                            else "each task's own", "changed": len(changes)}}
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "results.jsonl", "".join(a.to_json() + "\n" for a in rescored))
    write_atomic(out / "summary.json", json.dumps(written, indent=2, default=str) + "\n")
    write_atomic(out / "changes.jsonl", "".join(
        json_line(dataclasses.asdict(c)) + "\n" for c in changes))
    return summary, changes
