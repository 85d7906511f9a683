"""The summary of an evaluation run as frozen records (``vera_env.evaluation.metrics``
computes it).

A run's summary was a 35-key dict built in one function and read back by string key
by the table, the HTML report and the command's exit code; a key renamed in one place
read ``None`` in another. The records here are what those readers use; ``to_dict``
writes the JSON that ``summary.json`` has always held, key for key and in the same
order, so a script reading old and new run folders sees one format.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Accuracy", "AnswerPhases", "Canaries", "Consistency", "GraphMeans", "HarnessError",
           "PassAtK", "Summary", "TaskSummary", "TurnMetrics"]


@dataclass(frozen=True, slots=True)
class TaskSummary:
    """One task's attempts: how many were scored and right, and each one's outcome."""

    attempts: int
    scored: int
    correct: int
    pass_at_1: float | None
    outcomes: tuple[str, ...]
    answers: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """The ``per_task`` entry of ``summary.json``."""
        return {"attempts": self.attempts, "scored": self.scored, "correct": self.correct,
                "pass@1": self.pass_at_1, "outcomes": list(self.outcomes),
                "answers": list(self.answers)}


@dataclass(frozen=True, slots=True)
class HarnessError:
    """An attempt a harness bug ended (status ``error``)."""

    task_id: str
    attempt_index: int
    error: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"task_id": self.task_id, "attempt_index": self.attempt_index,
                "error": self.error}


@dataclass(frozen=True, slots=True)
class Accuracy:
    """Right answers over the scored attempts; the rates are None when none was scored."""

    scored: int
    correct: int
    rate: float | None
    stderr: float | None
    ci95: tuple[float, float] | None

    def to_dict(self) -> dict[str, Any]:
        """The accuracy keys of ``summary.json``."""
        return {"accuracy": self.rate, "accuracy_stderr": self.stderr,
                "accuracy_ci95": list(self.ci95) if self.ci95 is not None else None}


@dataclass(frozen=True, slots=True)
class PassAtK:
    """Unbiased pass@1 and pass@k, each over the tasks with enough scored attempts."""

    k: int
    at_1: float | None
    at_k: float | None
    tasks_at_k: int

    def to_dict(self) -> dict[str, Any]:
        """``pass@1``, ``pass@<k>`` (when k is not 1) and ``pass@k_tasks``."""
        out = {"pass@1": self.at_1}
        if self.k != 1:
            out[f"pass@{self.k}"] = self.at_k
        return {**out, "pass@k_tasks": self.tasks_at_k}


@dataclass(frozen=True, slots=True)
class Consistency:
    """The share of fully scored tasks right in at least the rule's count of attempts."""

    rate: float | None
    rule: str
    tasks: int

    def to_dict(self) -> dict[str, Any]:
        """The consistency keys of ``summary.json``."""
        return {"consistency": self.rate, "consistency_rule": self.rule,
                "consistency_tasks": self.tasks}


@dataclass(frozen=True, slots=True)
class GraphMeans:
    """Means over the scored attempts of what their analysis graphs held."""

    verification_reward: float | None
    discriminating_checks: float | None
    checks: float | None
    nodes: float | None
    steps: float | None

    def to_dict(self) -> dict[str, Any]:
        """The ``mean_*`` keys of ``summary.json``."""
        return {"mean_verification_reward": self.verification_reward,
                "mean_discriminating_checks": self.discriminating_checks,
                "mean_checks": self.checks, "mean_nodes": self.nodes, "mean_steps": self.steps}


@dataclass(frozen=True, slots=True)
class AnswerPhases:
    """Scored answers by the phase that released them (``Attempt.answer_phase``)."""

    free: int
    under_forcing: int
    extra_ask: int
    phase_unknown: int

    def to_dict(self) -> dict[str, Any]:
        """The ``answers_*`` keys of ``summary.json``."""
        return {"answers_free": self.free, "answers_under_forcing": self.under_forcing,
                "answers_extra_ask": self.extra_ask, "answers_phase_unknown": self.phase_unknown}


@dataclass(frozen=True, slots=True)
class Canaries:
    """Canary questions: answered with a value, answered right, and abstentions."""

    rate: float | None
    attempts: int
    right_rate: float | None
    abstention_rate: float | None


@dataclass(frozen=True, slots=True)
class TurnMetrics:
    """What a trainer watches besides accuracy: rejected turns and the mean return."""

    turns: int
    rejected_turns: int
    format_error_rate: float | None
    mean_return: float | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"turns": self.turns, "rejected_turns": self.rejected_turns,
                "format_error_rate": self.format_error_rate, "mean_return": self.mean_return}


@dataclass(frozen=True, slots=True)
class Summary:
    """A run's summary (``vera_env.evaluation.metrics.summarise``).

    Attributes:
        attempts: Attempts summarised (one per task and attempt index).
        tasks: Tasks among them.
        k: Attempts per task the run asked for.
        excluded: Attempts kept out of every rate (``is_excluded``).
        statuses: Attempts by status, every status present.
        harness_errors: The first few attempts a harness bug ended.
        unscorable: Attempts whose grade could not be decided.
        no_answer_share: Scored attempts that ended without a usable answer.
        tokens_in: Prompt tokens over the run; None when none was reported.
        tokens_out: Completion tokens likewise.
        episode_wall_s: Wall seconds of the episodes, summed.
        per_task: Each task's attempts, by task id in sorted order.
    """

    attempts: int
    tasks: int
    k: int
    excluded: int
    accuracy: Accuracy
    pass_at: PassAtK
    consistency: Consistency
    no_answer_share: float | None
    statuses: Mapping[str, int]
    harness_errors: tuple[HarnessError, ...]
    unscorable: int
    graph: GraphMeans
    answers: AnswerPhases
    canaries: Canaries
    turns: TurnMetrics
    tokens_in: int | None
    tokens_out: int | None
    episode_wall_s: float
    per_task: Mapping[str, TaskSummary]

    @property
    def scored(self) -> int:
        """Attempts counted in the rates."""
        return self.accuracy.scored

    @property
    def correct(self) -> int:
        """Scored attempts graded right."""
        return self.accuracy.correct

    def to_dict(self) -> dict[str, Any]:
        """What ``summary.json`` holds: the keys and order it always had."""
        return {
            "attempts": self.attempts, "tasks": self.tasks, "k": self.k,
            "scored": self.scored, "excluded": self.excluded, "correct": self.correct,
            **self.accuracy.to_dict(), **self.pass_at.to_dict(), **self.consistency.to_dict(),
            "no_answer_share": self.no_answer_share, "statuses": dict(self.statuses),
            "harness_errors": [e.to_dict() for e in self.harness_errors],
            "unscorable": self.unscorable, **self.graph.to_dict(), **self.answers.to_dict(),
            "canary_rate": self.canaries.rate, "canary_attempts": self.canaries.attempts,
            **self.turns.to_dict(), "canary_right_rate": self.canaries.right_rate,
            "abstention_rate": self.canaries.abstention_rate,
            "tokens_in": self.tokens_in, "tokens_out": self.tokens_out,
            "episode_wall_s": self.episode_wall_s,
            "per_task": {task_id: t.to_dict() for task_id, t in self.per_task.items()},
        }
